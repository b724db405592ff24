//! `sharecheck report --format sarif`: SARIF 2.1.0, what code-scanning services and IDEs read.
//! The rule catalogue is the tool's rules; each finding is a result with its level, message, the
//! function it was found on (a logical location), its host call stack (a SARIF stack, each frame
//! a physical location: the source file and line where `addr2line` resolves it, else the
//! module), and the innermost resolved frame as its location. Checked with Microsoft's SARIF
//! Multitool (`npx @microsoft/sarif-multitool validate`).

use crate::occurrence::Occurrence;
use crate::summary::Summary;
use crate::symbolize::Symbols;
use serde_json::{json, Map, Value};

/// `error`, `warning`, `note` from a severity name.
fn level(severity: Option<&str>) -> &'static str {
    match severity {
        Some("error") => "error",
        Some("warning") => "warning",
        _ => "note",
    }
}

/// A file path or a module as a SARIF artifact URI (absolute paths as `file://` URIs).
fn uri(path: &str) -> String {
    let encoded: String = path
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            '%' => "%25".to_string(),
            c => c.to_string(),
        })
        .collect();
    if encoded.starts_with('/') {
        format!("file://{encoded}")
    } else {
        encoded.trim_start_matches("./").to_string()
    }
}

/// `function at file:line` (what `Symbols` gives) as (function, file, line).
fn split_place(place: &str) -> Option<(&str, &str, u64)> {
    let (function, at) = place.split_once(" at ").unwrap_or(("", place));
    let (file, line) = at.rsplit_once(':')?;
    let line = line.parse().ok().filter(|&l| l > 0)?;
    Some((function, file, line))
}

/// The physical location of a frame: its source line where resolved, else its module.
fn frame_location(module: &str, offset: u64, symbols: &Symbols) -> Value {
    let place = symbols.get(module, offset);
    match place.as_deref().and_then(split_place) {
        Some((function, file, line)) => {
            let mut loc = json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(file)},
                    "region": {"startLine": line}
                }
            });
            if !function.is_empty() {
                loc["logicalLocations"] = json!([{"name": function, "kind": "function"}]);
            }
            loc
        }
        None => json!({
            "physicalLocation": {
                "artifactLocation": {"uri": uri(module)},
                "address": {"relativeAddress": offset, "kind": "module"}
            }
        }),
    }
}

fn result(o: &Occurrence, symbols: &Symbols, rule_index: Option<usize>) -> Value {
    let text = |k: &str| o.finding.get(k).and_then(Value::as_str);
    let mut r = Map::new();
    r.insert("ruleId".into(), o.rule().into());
    if let Some(i) = rule_index {
        r.insert("ruleIndex".into(), i.into());
    }
    r.insert("level".into(), level(text("severity")).into());
    r.insert(
        "message".into(),
        json!({"text": text("message").unwrap_or("(no message)")}),
    );
    let stack = o.stack();
    let function = o.func.clone().unwrap_or_else(|| "?".into());
    // Where: the innermost frame with a source line, else the function called.
    let resolved = stack.iter().find(|(m, off, _)| {
        symbols
            .get(m, *off)
            .is_some_and(|p| split_place(&p).is_some())
    });
    let mut location = match resolved {
        Some((m, off, _)) => frame_location(m, *off, symbols),
        None => json!({}),
    };
    location["logicalLocations"] = json!([{"name": function, "kind": "function"}]);
    r.insert("locations".into(), json!([location]));
    if !stack.is_empty() {
        let frames: Vec<Value> = stack
            .iter()
            .map(|(m, off, _)| json!({"location": frame_location(m, *off, symbols), "module": m}))
            .collect();
        r.insert(
            "stacks".into(),
            json!([{"message": {"text": format!("host call stack of {function}")}, "frames": frames}]),
        );
    }
    let mut props = Map::new();
    for (k, v) in [("pid", &o.pid), ("tid", &o.tid), ("seq", &o.seq)] {
        if !v.is_null() {
            props.insert(k.into(), v.clone());
        }
    }
    if let Some(args) = &o.args {
        props.insert("arguments".into(), args.clone());
    }
    if let Some(kind) = text("kind") {
        props.insert("kind".into(), kind.into());
    }
    r.insert("properties".into(), props.into());
    r.into()
}

/// The whole SARIF log for the findings of `s`, streamed: the log is written around an empty
/// `results` array, and each result (read back from the findings kept) goes in its place.
pub fn render_to(s: &Summary, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let catalogue: Vec<&sharecheck_core::rules::Rule> = sharecheck_core::rules::all().collect();
    let rules: Vec<Value> = catalogue
        .iter()
        .map(|rule| {
            let functions: Vec<&str> = sharecheck_core::catalogue::functions_of(rule)
                .map(|f| f.symbol)
                .collect();
            let mut described = json!({
                "id": rule.id,
                "shortDescription": {"text": rule.requirement},
                "fullDescription": {"text": format!("{} ({})", rule.quote, rule.source.cite())},
                "help": {"text": format!("Fix: {}", rule.fix)},
                "defaultConfiguration": {"level": level(Some(rule.severity.as_str()))},
                "properties": {
                    "kind": rule.kind.as_str(),
                    "functions": functions,
                    "documented_code": rule.documented_code,
                }
            });
            if let Some(url) = rule.source.url() {
                described["helpUri"] = url.into();
            }
            described
        })
        .collect();
    let symbols = &s.symbols;
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "sharecheck",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules
            }},
            "results": [],
            "properties": {"calls": s.calls, "processes": s.process_count(), "suppressed": s.findings.suppressed}
        }]
    });
    let text = crate::safe_json::to_string_pretty(&log);
    let (head, tail) = text
        .split_once("\"results\": []")
        .unwrap_or((text.as_str(), ""));
    out.write_all(head.as_bytes())?;
    out.write_all(b"\"results\": [")?;
    let mut any = false;
    for o in s.findings.all() {
        let index = catalogue.iter().position(|r| r.id == o.rule());
        let value = result(&o, symbols, index);
        out.write_all(if any { b",\n" } else { b"\n" })?;
        crate::safe_json::to_writer(&mut *out, &value)?;
        any = true;
    }
    out.write_all(if any { b"\n]" } else { b"]" })?;
    out.write_all(tail.as_bytes())?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_uris_and_places_split() {
        assert_eq!(uri("/a b/c#d.c"), "file:///a%20b/c%23d.c");
        assert_eq!(uri("./csu/x.c"), "csu/x.c");
        assert_eq!(
            split_place("main at /w/peer_cuda.c:157"),
            Some(("main", "/w/peer_cuda.c", 157))
        );
        assert_eq!(split_place("/w/x.c:0"), None);
        assert_eq!(split_place("x.c:12"), Some(("", "x.c", 12)));
    }
}
