//! The rule catalogue: one entry per documented requirement the shim checks, split by family.
//!
//! Each rule has a stable ID (its meaning never changes once released; a changed requirement gets
//! a new ID), a severity, a kind, the requirement in our words, the documented sentence it rests
//! on and where that sentence is written, and a fix hint. Rules belong to a [`Family`] (one file
//! each: [`peer`], [`divergences`]); [`all`] assembles the catalogue from [`FAMILIES`]. Which
//! functions a rule is checked on is not written here: it follows from the check table
//! ([`crate::table`]), whose checks name the rules they report ([`CheckInfo`]). A known driver
//! divergence is data ([`KnownDivergence`], [`divergences::KNOWN`]). `sharecheck rules` prints the
//! catalogue, and RULES.md is that output, kept equal by a test.

pub mod attach;
pub mod divergences;
pub mod endpoint;
pub mod general;
pub mod ipc;
pub mod lifecycle;
pub mod peer;

use crate::functions::{FnInfo, FUNCTIONS};

use crate::json::JsonOut;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Harmless or explanatory: a query with no effect on later calls (a device asked about
    /// itself), a note on what a call did, an explained failure, a known driver divergence.
    Info,
    /// Undefined by the documents, or silently other than the program meant.
    Warning,
    /// A documented requirement is broken, so the call fails or its result is not what the
    /// program meant (whether or not the driver noticed).
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Error]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Whose fault a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The program broke a documented requirement.
    Misuse,
    /// The driver answered other than its documentation says.
    Divergence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Misuse => "misuse",
            Kind::Divergence => "divergence",
        }
    }
}

/// Where the requirement is written.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// `CUDA Driver API` or `HIP Runtime API`.
    pub document: &'static str,
    /// The section of that document.
    pub section: &'static str,
    /// The function whose documentation holds the sentence.
    pub function: &'static str,
}

impl Source {
    /// `CUDA Driver API, Peer Context Memory Access, cuCtxEnablePeerAccess`.
    pub fn cite(&self) -> String {
        format!("{}, {}, {}", self.document, self.section, self.function)
    }
}

/// One checked requirement.
#[derive(Debug)]
pub struct Rule {
    /// Stable ID: `<function>.<condition>`, `peer-access.<condition>` or `divergence.<...>`.
    pub id: &'static str,
    pub severity: Severity,
    pub kind: Kind,
    /// The requirement, in this project's words.
    pub requirement: &'static str,
    pub source: Source,
    /// The documented sentence(s) the rule rests on, verbatim.
    pub quote: &'static str,
    /// What the documentation says the call returns when the requirement is broken: the code
    /// `mode=strict` returns instead of calling the driver. `None` where it names none.
    pub documented_code: Option<i32>,
    pub fix: &'static str,
}

impl Rule {
    /// The catalogue entry as JSON, with the field names of a finding in a trace record.
    pub fn encode(&self, w: &mut JsonOut) {
        w.begin_object();
        w.kv_str("rule", self.id);
        w.kv_str("severity", self.severity.as_str());
        w.kv_str("kind", self.kind.as_str());
        w.key("functions");
        w.begin_array();
        for f in functions_of(self) {
            w.str(f.symbol);
        }
        w.end_array();
        w.kv_str("requirement", self.requirement);
        w.kv_str("doc", &self.source.cite());
        w.kv_str("quote", self.quote);
        w.key("documented_code");
        match self.documented_code {
            Some(code) => w.i64(code.into()),
            None => w.null(),
        }
        w.kv_str("fix", self.fix);
        w.end_object();
    }
}

pub(crate) const fn cuda(section: &'static str, function: &'static str) -> Source {
    Source {
        document: "CUDA Driver API",
        section,
        function,
    }
}

pub(crate) const fn hip(function: &'static str) -> Source {
    Source {
        document: "HIP Runtime API",
        section: peer::HIP_PEER,
        function,
    }
}

/// A family of rules: one unit of checks, catalogue and state (peer access, IPC, ...).
#[derive(Debug)]
pub struct Family {
    /// Short name: `peer`, `divergences`, ...
    pub name: &'static str,
    pub title: &'static str,
    /// Every rule the family defines, in catalogue order.
    pub rules: &'static [&'static Rule],
}

/// One check: a unit of the shim that runs on the functions the table gives it, and the rules it
/// can report.
#[derive(Debug)]
pub struct CheckInfo {
    /// `family.what[.api]`.
    pub name: &'static str,
    pub rules: &'static [&'static Rule],
}

/// A driver answers a misuse with another code than its documentation gives.
#[derive(Debug)]
pub struct KnownDivergence {
    /// The `divergence.*` rule that reports it.
    pub rule: &'static Rule,
    /// The misuse whose documented code the driver does not return.
    pub misuse: &'static Rule,
    /// The driver (and version) seen answering so.
    pub driver: &'static str,
    /// What that driver returns instead.
    pub returns: i32,
}

/// Misuse reported before the call is forwarded rather than settled after it, in any family: a
/// known driver does not return from the call (R580 dies of SIGSEGV inside
/// `cuStreamAttachMemAsync` with flags 0), so a finding made after it would never be seen.
pub static REPORTED_BEFORE_CALL: &[&Rule] = &[&attach::cuda::FLAGS_NOT_ONE];

/// Every family, in catalogue order.
pub static FAMILIES: &[&Family] = &[
    &peer::FAMILY,
    &ipc::FAMILY,
    &attach::FAMILY,
    &endpoint::FAMILY,
    &general::FAMILY,
    &divergences::FAMILY,
];

/// Symbol prefixes of the calls `sharecheck report`'s cross-process checks read: every call of
/// the IPC and logical endpoint families (their records carry the handles' fingerprints) and the
/// frees, closes and destructions that end what they exported or opened. A trace at
/// `trace_level=findings` keeps these besides the calls with findings.
pub const REPORT_READS: &[&str] = &[
    "cuIpc",
    "hipIpc",
    "cuLogicalEndpoint",
    "cuMemFree",
    "hipFree",
    "cuCtxDestroy",
    "cuEventDestroy",
    "hipEventDestroy",
];

/// Whether a report-phase check reads this function's calls ([`REPORT_READS`]).
pub fn read_by_report(info: &FnInfo) -> bool {
    REPORT_READS.iter().any(|p| info.symbol.starts_with(p))
}

/// Every rule, in catalogue order.
pub fn all() -> impl Iterator<Item = &'static Rule> {
    FAMILIES.iter().flat_map(|f| f.rules.iter().copied())
}

/// The family whose tests stage a rule: the one that defines it or, for a known divergence, the
/// one that defines its misuse.
pub fn home_family(rule: &Rule) -> Option<&'static Family> {
    let target: &Rule = divergences::KNOWN
        .iter()
        .find(|d| std::ptr::eq(d.rule, rule))
        .map_or(rule, |d| d.misuse);
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.rules.iter().any(|r| std::ptr::eq(*r, target)))
}

/// The rules whose home is one of `families` ([`home_family`]) and whose ID is not in `covered`:
/// what a family's tests have yet to stage.
pub fn without_case<'a>(
    families: &[&str],
    covered: impl IntoIterator<Item = &'a str>,
) -> Vec<&'static str> {
    let covered: std::collections::BTreeSet<&str> = covered.into_iter().collect();
    all()
        .filter(|r| home_family(r).is_some_and(|f| families.contains(&f.name)))
        .map(|r| r.id)
        .filter(|id| !covered.contains(id))
        .collect()
}

/// Looks a rule up by ID.
pub fn by_id(id: &str) -> Option<&'static Rule> {
    all().find(|r| r.id == id)
}

/// The known divergence of a misuse for a driver's answer.
pub fn known_divergence(misuse: &Rule, returns: i32) -> Option<&'static KnownDivergence> {
    divergences::KNOWN
        .iter()
        .find(|d| d.returns == returns && std::ptr::eq(d.misuse, misuse))
}

/// The functions a rule is checked on: those whose checks (in the table) can report it, or whose
/// calls a report-phase check attaches it to; for a known divergence, those of its misuse. Empty for `divergence.unlisted` (any function).
pub fn functions_of(rule: &Rule) -> impl Iterator<Item = &'static FnInfo> + '_ {
    let target: &Rule = divergences::KNOWN
        .iter()
        .find(|d| std::ptr::eq(d.rule, rule))
        .map_or(rule, |d| d.misuse);
    let reported: Vec<&str> = ipc::report::REPORTED_ON
        .iter()
        .chain(endpoint::report::REPORTED_ON)
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
    for rule in all() {
        out.push('\n');
        out.push_str(&rule_text(rule));
    }
    out
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
            rule.source.cite(),
            rule.quote,
        ));
        if let Some(code) = rule.documented_code {
            out.push_str(&format!("Strict code: {code}\n\n"));
        }
        out.push_str(&format!("Fix: {}\n", rule.fix));
    }
    out
}

/// The rules whose ID contains `text` (for "did you mean").
pub fn ids_containing(text: &str) -> Vec<&'static str> {
    all().map(|r| r.id).filter(|id| id.contains(text)).collect()
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
        rule.encode(&mut w);
    }
    w.end_array();
    buf.push(b'\n');
    String::from_utf8(buf).expect("JSON writer emits UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for rule in all() {
            assert!(seen.insert(rule.id), "duplicate rule id {}", rule.id);
            assert!(
                rule.id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{}",
                rule.id
            );
            assert_eq!(
                rule.kind == Kind::Divergence,
                rule.id.starts_with("divergence."),
                "{}",
                rule.id
            );
            assert!(!rule.quote.is_empty() && !rule.fix.is_empty() && !rule.requirement.is_empty());
        }
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

    /// A rule defined in a family's file but missing from its `FAMILY` list would never be
    /// printed, muted or tested: the sources are read to find every `static NAME: Rule`.
    #[test]
    fn every_rule_defined_in_a_family_file_is_listed_in_that_family() {
        let files = [
            (include_str!("peer.rs"), &peer::FAMILY),
            (include_str!("ipc.rs"), &ipc::FAMILY),
            (include_str!("attach.rs"), &attach::FAMILY),
            (include_str!("endpoint.rs"), &endpoint::FAMILY),
            (include_str!("general.rs"), &general::FAMILY),
            (include_str!("divergences.rs"), &divergences::FAMILY),
        ];
        assert_eq!(
            files.len(),
            FAMILIES.len(),
            "a family file is not read here"
        );
        for (source, family) in files {
            let defined: Vec<&str> = source
                .lines()
                .filter_map(|l| l.trim().strip_prefix("pub static "))
                .filter_map(|l| l.strip_suffix(": Rule = Rule {"))
                .collect();
            assert!(!defined.is_empty());
            let ids: Vec<&str> = source
                .lines()
                .filter_map(|l| l.trim().strip_prefix("id: \""))
                .filter_map(|l| l.strip_suffix("\","))
                .collect();
            assert_eq!(defined.len(), ids.len(), "{}", family.name);
            for id in ids {
                assert!(
                    family.rules.iter().any(|r| r.id == id),
                    "{id} is defined in the {} family's file but not listed in its FAMILY",
                    family.name
                );
            }
            assert_eq!(
                family.rules.len(),
                defined.len(),
                "{}: listed twice?",
                family.name
            );
        }
    }

    #[test]
    fn divergences_are_info_and_by_id_finds_every_rule() {
        for rule in all() {
            if rule.kind == Kind::Divergence {
                assert_eq!(rule.severity, Severity::Info, "{}", rule.id);
            }
            assert!(std::ptr::eq(by_id(rule.id).unwrap(), rule));
        }
        assert!(by_id("no.such-rule").is_none());
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
