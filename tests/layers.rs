//! The shim reads as layers, and no module imports one above its own:
//!
//! 0 base       guard, clock, config, log, fingerprint
//! 1 driver     loader, elf (the real driver's functions)
//! 2 records    findings, trace, writer, deferred (what is found, records, the file, calls
//!              kept to be checked later)
//! 3 engine     engine, families (checks, facts, tracked state)
//! 4 entry      dispatch, exports, resolvers, dlsym_hook, capi, lib, process (where calls and
//!              process events come in)
//!
//! C types and the declaration list live in sharecheck-core, below all of these; the CLI reads
//! the records and links none of this.

use std::path::Path;

const LAYERS: &[(&str, u8)] = &[
    ("guard", 0),
    ("clock", 0),
    ("config", 0),
    ("log", 0),
    ("fingerprint", 0),
    ("loader", 1),
    ("elf", 1),
    ("findings", 2),
    ("stack", 2),
    ("trace", 2),
    ("deferred", 2),
    ("writer", 2),
    ("engine", 3),
    ("families", 3),
    ("dispatch", 4),
    ("exports", 4),
    ("resolvers", 4),
    ("dlsym_hook", 4),
    ("capi", 4),
    ("lib", 4),
    ("process", 4),
];

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .unwrap_or_else(|| panic!("module `{module}` has no layer in tests/layers.rs"))
        .1
}

/// Top-level modules a source text refers to as `crate::name` or `use crate::{a, b::c}`.
fn referenced(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        out.push(name.to_string());
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        }
    }
    out
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn no_module_of_the_shim_imports_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let own = layer(&module);
        let text = std::fs::read_to_string(file).unwrap();
        for used in referenced(&text) {
            if LAYERS.iter().any(|(name, _)| *name == used) && layer(&used) > own {
                violations.push(format!(
                    "{} ({own}) uses {used} ({})",
                    relative.display(),
                    layer(&used)
                ));
            }
        }
    }
    assert!(files.len() > 20, "read {} files", files.len());
    assert!(
        violations.is_empty(),
        "imports up the layers:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_reference_finder_sees_paths_and_groups() {
    let text = "use crate::{loader, trace::x};\nlet a = crate::engine::states();\n// crate::capi\n";
    assert_eq!(referenced(text), ["loader", "trace", "engine"]);
}
