//! `sharecheck rules`: RULES.md is its text output, the JSON form lists every rule, usage errors.

mod common;

use std::path::Path;
use std::process::Output;

use common::{sharecheck, TempDir};
use serde_json::Value;
use sharecheck_core::rules;
use sharecheck_core::schema::env;

/// Set to 1 to rewrite RULES.md from `sharecheck rules` instead of comparing.
const UPDATE_ENV: &str = env::dev::UPDATE_RULES;

fn rules(args: &[&str]) -> Output {
    let dir = TempDir::new("rules");
    sharecheck(&dir).arg("rules").args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rules_md_is_the_output_of_sharecheck_rules() {
    let out = rules(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    assert_eq!(
        out.stdout,
        sharecheck_core::catalogue::catalogue_text().into_bytes()
    );
    assert_eq!(rules(&["--format", "text"]).stdout, out.stdout);

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let path = root.join("RULES.md");
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        std::fs::write(&path, &out.stdout).unwrap();
        return;
    }
    let file = std::fs::read(&path).unwrap_or_default();
    if file != out.stdout {
        let (old, new) = (
            String::from_utf8_lossy(&file),
            String::from_utf8_lossy(&out.stdout),
        );
        let line = old
            .lines()
            .zip(new.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(old.lines().count().min(new.lines().count()));
        panic!(
            "RULES.md is stale: run {UPDATE_ENV}=1 cargo test -p sharecheck-cli --test rules \
             ({} differs from `sharecheck rules` from line {} on)",
            path.display(),
            line + 1
        );
    }
}

#[test]
fn json_has_one_object_per_rule_with_the_catalogue_fields() {
    let out = rules(&["--format=json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("`sharecheck rules --format json`");
    let entries = v.as_array().expect("a JSON array");
    let mut keys = [
        "rule",
        "severity",
        "kind",
        "functions",
        "requirement",
        "doc",
        "quote",
        "documented_code",
        "fix",
    ];
    keys.sort();
    for entry in entries {
        let obj = entry.as_object().expect("an object per rule");
        // The vendor's page, where the document has one (the CUDA Driver API's sections).
        let cuda = obj["doc"]
            .as_str()
            .unwrap()
            .starts_with("CUDA Driver API, ")
            && !obj["doc"].as_str().unwrap().contains("Logical Endpoint");
        assert_eq!(obj.contains_key("doc_url"), cuda, "{entry}");
        if let Some(url) = obj.get("doc_url") {
            assert!(
                url.as_str()
                    .unwrap()
                    .starts_with("https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__"),
                "{entry}"
            );
        }
        let mut got: Vec<&str> = obj
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "doc_url")
            .collect();
        got.sort();
        assert_eq!(got, keys, "{entry}");
        assert!(
            ["error", "warning", "info"].contains(&obj["severity"].as_str().unwrap()),
            "{entry}"
        );
        assert!(
            ["misuse", "divergence"].contains(&obj["kind"].as_str().unwrap()),
            "{entry}"
        );
        assert!(obj["functions"].as_array().is_some(), "{entry}");
        assert!(
            obj["documented_code"].is_null() || obj["documented_code"].is_i64(),
            "{entry}"
        );
    }
    let ids: Vec<&str> = entries
        .iter()
        .map(|e| e["rule"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = rules::all().map(|r| r.id).collect();
    assert_eq!(ids, expected);
}

#[test]
fn rules_usage_errors_exit_2_and_help() {
    for (args, why) in [
        (&["--bogus"][..], "unexpected argument '--bogus' found"),
        (
            &["--format", "xml"],
            "invalid value 'xml' for '--format <FORMAT>'",
        ),
        (&["--format"], "a value is required"),
    ] {
        let out = rules(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(
            err.contains("Usage: sharecheck rules") || err.contains("try '--help'"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
    let help = rules(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(text.contains("--format <FORMAT>"), "{text}");
    assert!(
        text.contains("warning  undefined or silently different behaviour"),
        "{text}"
    );
    let dir = TempDir::new("rules-help");
    let out = sharecheck(&dir).args(["help", "rules"]).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
}

/// `rules ID...` and `explain ID...` print the rules named, as the catalogue has them; an ID no
/// rule has is a usage error that names the IDs containing it.
#[test]
fn rules_named_are_printed_alone_and_unknown_ones_refused() {
    let out = rules(&["cuMemcpyPeer.memory-freed", "call.failed"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let want = [
        sharecheck_core::catalogue::rule_text(rules::by_id("cuMemcpyPeer.memory-freed").unwrap()),
        sharecheck_core::catalogue::rule_text(rules::by_id("call.failed").unwrap()),
    ]
    .join("\n");
    assert_eq!(text, want);
    let dir = TempDir::new("explain");
    let explained = sharecheck(&dir)
        .args(["explain", "--format", "json", "call.failed"])
        .output()
        .unwrap();
    assert_eq!(explained.status.code(), Some(0), "{explained:?}");
    let json: Value = serde_json::from_slice(&explained.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["rule"], "call.failed");
    assert_eq!(json[0]["severity"], "info");
    let unknown = rules(&["same-device"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(unknown.stdout.is_empty());
    let message = stderr(&unknown);
    assert!(
        message.contains("no rule `same-device`; rules containing it: ")
            && message.contains("cuDeviceCanAccessPeer.same-device"),
        "{message}"
    );
}
