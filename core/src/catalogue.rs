//! The catalogue as people and programs read it: which functions each rule is checked on (from
//! the check table and the report-phase checks), RULES.md's text and the JSON of `sharecheck
//! rules`. Above the rules, the table and the report-phase checks, which know nothing of it.

use crate::functions::{FnInfo, FUNCTIONS};
use crate::json::JsonOut;
use crate::rules::{all, divergences, Rule};

/// A rule's catalogue entry as JSON, with the field names of a finding in a trace record.
pub fn encode(rule: &Rule, w: &mut JsonOut) {
    w.begin_object();
    w.kv_str("rule", rule.id);
    w.kv_str("severity", rule.severity.as_str());
    w.kv_str("kind", rule.kind.as_str());
    w.key("functions");
    w.begin_array();
    for f in functions_of(rule) {
        w.str(f.symbol);
    }
    w.end_array();
    w.kv_str("requirement", rule.requirement);
    w.kv_str("doc", &rule.source.cite());
    if let Some(url) = rule.source.url() {
        w.kv_str("doc_url", &url);
    }
    w.kv_str("quote", rule.quote);
    w.key("documented_code");
    match rule.documented_code {
        Some(code) => w.i64(code.into()),
        None => w.null(),
    }
    w.kv_str("fix", rule.fix);
    w.end_object();
}

/// The functions a rule is checked on: those whose checks (in the table) can report it, or whose
/// calls a report-phase check attaches it to; for a known divergence, those of its misuse. Empty for `divergence.unlisted` (any function).
pub fn functions_of(rule: &Rule) -> impl Iterator<Item = &'static FnInfo> + '_ {
    let target: &Rule = divergences::KNOWN
        .iter()
        .find(|d| std::ptr::eq(d.rule, rule))
        .map_or(rule, |d| d.misuse);
    let reported: Vec<&str> = crate::rules::FAMILIES
        .iter()
        .flat_map(|f| f.reported)
        .filter(|(r, _)| std::ptr::eq(*r, target))
        .flat_map(|(_, symbols)| symbols.iter().copied())
        .collect();
    FUNCTIONS.iter().filter(move |f| {
        reported.contains(&f.symbol)
            || crate::table::checks_of(f.id)
                .iter()
                .any(|c| c.rules.iter().any(|r| std::ptr::eq(*r, target)))
    })
}

/// The catalogue as text (Markdown, so RULES.md is this output verbatim).
pub fn catalogue_text() -> String {
    let mut out = String::from(
        "# sharecheck rules\n\n\
         Every check sharecheck makes, one per documented requirement. IDs are stable: a rule's \
         meaning never changes once released. Mute one with `SHARECHECK_OPTIONS=mute=ID,ID`.\n\n\
         - severity, one policy for every rule: `error`, a documented requirement is broken, so \
         the call fails or its result is not what the program meant (whether or not the driver \
         noticed); `warning`, the behaviour is undefined or silently other than the program \
         meant; `info`, harmless or explanatory: a query with no effect on later calls (a device \
         asked about itself), a note on what a call did, a failure explained\n\
         - kind: `misuse` (the program's fault) or `divergence` (the driver answered other than \
         its documentation says; reported once per process)\n\
         - strict code: what `mode=strict` returns instead of calling the driver\n\n\
         This file is the output of `sharecheck rules`; a test keeps them equal.\n",
    );
    out.push_str(&index_text());
    for rule in all() {
        out.push('\n');
        out.push_str(&rule_text(rule));
    }
    out
}

/// The index at the top of the catalogue: per family, its rules by severity, each a link to its
/// section.
fn index_text() -> String {
    use crate::rules::{Severity, FAMILIES};
    let mut out = String::from("\n## Index\n");
    for family in FAMILIES {
        let rules = family.rules();
        let count = |severity| rules.iter().filter(|r| r.severity == severity).count();
        out.push_str(&format!(
            "\n**{}** ({} rules: {} error, {} warning, {} info)\n\n",
            family.title,
            rules.len(),
            count(Severity::Error),
            count(Severity::Warning),
            count(Severity::Info)
        ));
        for severity in [Severity::Error, Severity::Warning, Severity::Info] {
            let links: Vec<String> = rules
                .iter()
                .filter(|r| r.severity == severity)
                .map(|r| format!("[{}](#{})", r.id, anchor(r.id)))
                .collect();
            if !links.is_empty() {
                out.push_str(&format!("- {}: {}\n", severity.as_str(), links.join(", ")));
            }
        }
    }
    out
}

/// The anchor a Markdown renderer (GitHub's) gives the heading `## ID`: lower case, without the
/// characters other than letters, digits, `-` and `_`.
fn anchor(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// One rule's section of the catalogue (Markdown, as RULES.md has it).
pub fn rule_text(rule: &Rule) -> String {
    let mut out = String::new();
    {
        out.push_str(&format!(
            "## {}\n\n{} · {} · {}\n\n{}\n\nDocumented ({}):\n> {}\n\n",
            rule.id,
            rule.severity.as_str(),
            rule.kind.as_str(),
            {
                let names: Vec<&str> = functions_of(rule).map(|f| f.symbol).collect();
                if names.is_empty() {
                    "any function".to_string()
                } else {
                    names.join(", ")
                }
            },
            rule.requirement,
            match rule.source.url() {
                Some(url) => format!("[{}]({url})", rule.source.cite()),
                None => rule.source.cite(),
            },
            rule.quote,
        ));
        if let Some(code) = rule.documented_code {
            out.push_str(&format!("Strict code: {code}\n\n"));
        }
        out.push_str(&format!("Fix: {}\n", rule.fix));
    }
    out
}

/// The catalogue as one JSON array.
pub fn catalogue_json() -> String {
    let every: Vec<&Rule> = all().collect();
    rules_json(&every)
}

/// Some rules as one JSON array, in the catalogue's form.
pub fn rules_json(rules: &[&Rule]) -> String {
    let mut buf = Vec::new();
    let mut w = JsonOut::new(&mut buf);
    w.begin_array();
    for rule in rules {
        encode(rule, &mut w);
    }
    w.end_array();
    buf.push(b'\n');
    String::from_utf8(buf).expect("JSON writer emits UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::*;

    /// The index links every rule once, to the anchor of its own section.
    #[test]
    fn the_index_links_every_rule_to_its_section() {
        let index = index_text();
        for rule in all() {
            let link = format!("[{}](#{})", rule.id, anchor(rule.id));
            assert_eq!(index.matches(&link).count(), 1, "{}", rule.id);
        }
        assert_eq!(
            anchor("cuDeviceCanAccessPeer.invalid-device"),
            "cudevicecanaccesspeerinvalid-device"
        );
        assert!(index.contains("\n**Peer access** ("), "{index}");
    }

    #[test]
    fn every_rule_is_checked_somewhere_and_its_id_names_a_function_it_is_checked_on() {
        for rule in all() {
            let functions: Vec<&str> = functions_of(rule).map(|f| f.symbol).collect();
            if std::ptr::eq(rule, &divergences::UNLISTED)
                || std::ptr::eq(rule, &general::CALL_FAILED)
            {
                assert!(functions.is_empty());
                continue;
            }
            assert!(
                !functions.is_empty(),
                "{}: no check in the table reports it",
                rule.id
            );
            let head = rule.id.trim_start_matches("divergence.").split('.').next();
            let head = head.unwrap_or_default();
            if head.starts_with("cu") || head.starts_with("hip") {
                assert!(
                    functions.iter().any(|f| f.starts_with(head)),
                    "{} is checked on {functions:?}, not on {head}",
                    rule.id
                );
            }
        }
    }

    /// A findings-level trace keeps every call a report-phase check reads: the prefixes each check
    /// names, and every function whose record can carry a handle's fingerprint.
    #[cfg(feature = "report")]
    #[test]
    fn the_calls_report_checks_read_are_all_kept_at_the_findings_level() {
        for check in crate::crossproc::REPORT_CHECKS {
            for prefix in check.functions() {
                assert!(
                    REPORT_READS.iter().any(|r| prefix.starts_with(r)),
                    "{prefix} is read by a report check but not in REPORT_READS"
                );
            }
        }
        for f in FUNCTIONS {
            let handle = f.params.iter().any(|p| {
                let t = (p.c_type)();
                t.contains("Ipc") && t.contains("Handle") || t.contains("LogicalEndpoint")
            });
            assert!(
                !handle || read_by_report(f),
                "{} carries a handle",
                f.symbol
            );
        }
        let by_symbol = |s: &str| FUNCTIONS.iter().find(|f| f.symbol == s).unwrap();
        assert!(read_by_report(by_symbol("cuMemFree_v2")));
        assert!(!read_by_report(by_symbol("cuMemcpyPeerAsync")));
        assert!(!read_by_report(by_symbol("cuDeviceCanAccessPeer")));
    }

    /// The function facts a traced call's record takes as constants (`FnId::symbol`,
    /// `FnId::param_count`, `rules::reads_by_report`) are the table's, for every function.
    #[test]
    fn the_constant_function_facts_are_the_tables() {
        let mut read = 0;
        for f in FUNCTIONS {
            assert_eq!(f.id.symbol(), f.symbol);
            assert_eq!(f.id.param_count(), f.params.len(), "{}", f.symbol);
            let by_prefix = REPORT_READS.iter().any(|p| f.symbol.starts_with(p));
            assert_eq!(
                crate::rules::reads_by_report(f.id),
                by_prefix,
                "{}",
                f.symbol
            );
            read += usize::from(by_prefix);
        }
        // Both answers occur, so the comparison above could fail either way.
        assert!(read > 0 && read < FUNCTIONS.len());
    }

    #[test]
    fn every_rule_a_check_reports_is_in_a_family_and_every_divergence_is_known_or_unlisted() {
        for f in FUNCTIONS {
            for check in crate::table::checks_of(f.id) {
                for rule in check.rules {
                    assert!(
                        all().any(|r| std::ptr::eq(r, *rule)),
                        "{} reports {}, which no family lists",
                        check.name,
                        rule.id
                    );
                }
            }
        }
        // A divergence is an answer the driver gives for a misuse (known), one outside the
        // documented codes (unlisted), or what a driver does with a call it accepts, which a
        // check reports itself (HIP's runtime ignoring an attach).
        let reported_by_a_check = |rule: &Rule| {
            FUNCTIONS.iter().any(|f| {
                crate::table::checks_of(f.id)
                    .iter()
                    .any(|c| c.rules.iter().any(|r| std::ptr::eq(*r, rule)))
            })
        };
        for rule in all().filter(|r| r.kind == Kind::Divergence) {
            let known = divergences::KNOWN
                .iter()
                .any(|d| std::ptr::eq(d.rule, rule));
            assert!(
                known || std::ptr::eq(rule, &divergences::UNLISTED) || reported_by_a_check(rule),
                "{}",
                rule.id
            );
        }
        for d in divergences::KNOWN {
            assert_eq!(d.misuse.kind, Kind::Misuse, "{}", d.rule.id);
            assert_ne!(d.misuse.documented_code, Some(d.returns), "{}", d.rule.id);
        }
    }

    #[test]
    fn catalogue_lists_every_rule_in_both_formats() {
        let text = catalogue_text();
        let json = catalogue_json();
        for rule in all() {
            assert!(text.contains(&format!("\n## {}\n", rule.id)), "{}", rule.id);
            assert!(
                json.contains(&format!("\"rule\":\"{}\"", rule.id)),
                "{}",
                rule.id
            );
        }
    }
}
