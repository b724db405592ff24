//! The shim reads as layers, and no module imports one above its own:
//!
//! 0 base       guard, clock, config, log, fingerprint, phases (a measurement build's clock),
//!              heap (the shim's allocator), hot (the line every call reads first)
//! 1 driver     loader, elf (the real driver's functions)
//! 2 records    findings, stack, trace, writer, deferred (what is found, records, the file,
//!              calls kept to be checked later)
//! 3 engine     engine, then families (checks, facts, tracked state: the families use the
//!              engine, which knows none of them by name)
//! 4 entry      dispatch, exports, resolvers, dlsym_hook, capi, lib, process (where calls and
//!              process events come in)
//!
//! C types and the declaration list live in sharecheck-core, below all of these; the CLI reads
//! the records and links none of this.
//!
//! And in every crate of the workspace (the shim, core, the CLI, the simulator), no two top-level
//! modules import each other, directly or through others: the module graph has no circle. Its
//! edges are read from the source as the compiler would resolve them: `crate::` paths (in `use`
//! groups over several lines too) and `super::` paths that climb to the crate's root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, u8)] = &[
    ("tls", 0),
    ("guard", 0),
    ("clock", 0),
    ("config", 0),
    ("log", 0),
    ("fingerprint", 0),
    ("phases", 0),
    ("heap", 0),
    ("hot", 0),
    ("loader", 1),
    ("elf", 1),
    ("findings", 2),
    ("stack", 2),
    ("trace", 2),
    ("writer", 2),
    ("deferred", 2),
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

/// The text without comments (line comments and nested block comments; string literals are
/// kept as they are, which only ever adds edges).
fn strip_comments(text: &str) -> String {
    let (mut out, mut depth, mut chars) = (String::new(), 0u32, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('*')) => {
                chars.next();
                depth += 1;
            }
            ('*', Some('/')) if depth > 0 => {
                chars.next();
                depth -= 1;
            }
            ('/', Some('/')) if depth == 0 => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The first segments of the paths after a `crate::` or a root-reaching `super::` prefix:
/// `a`, or every item of a `{a::b, c::{d}}` group (across lines).
fn heads(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        let name = ident(rest);
        return if name.is_empty() { vec![] } else { vec![name] };
    };
    // The group's items at depth 0, up to its closing brace.
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(ident)
        .filter(|n| !n.is_empty() && n != "self")
        .collect()
}

/// Top-level modules a file refers to. `depth`: how many `super::` reach the crate root from
/// the file's module (1 for `src/x.rs` and `src/x/mod.rs`, 2 for `src/x/y.rs`, ...).
fn referenced(text: &str, depth: usize) -> Vec<String> {
    let text = strip_comments(text);
    let mut out = Vec::new();
    let root_super = "super::".repeat(depth);
    for prefix in ["crate::", root_super.as_str()] {
        let mut from = 0;
        while let Some(i) = text[from..].find(prefix).map(|i| i + from) {
            from = i + prefix.len();
            let before = text[..i].chars().next_back();
            let rest = &text[from..];
            // Part of a longer path (`x::crate::`, or `super::` climbing further than the root).
            if before.is_some_and(|c| c == ':' || c.is_ascii_alphanumeric() || c == '_')
                || (prefix.starts_with("super") && rest.starts_with("super::"))
            {
                continue;
            }
            out.extend(heads(rest));
        }
    }
    out
}

fn visit(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// A crate's top-level modules and, for each, the others it refers to.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    visit(src, &mut files);
    let module_of = |file: &Path| -> (String, usize) {
        let parts: Vec<String> = file
            .strip_prefix(src)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let top = parts[0].trim_end_matches(".rs").to_string();
        // src/x.rs and src/x/mod.rs are module x (1 below the root); src/x/y.rs is x::y (2).
        let last_is_mod = parts.last().is_some_and(|p| p == "mod.rs");
        let depth = parts.len() - usize::from(last_is_mod && parts.len() > 1);
        (top, depth.max(1))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        graph.entry(module_of(file).0).or_default();
    }
    for file in &files {
        let (module, depth) = module_of(file);
        let text = std::fs::read_to_string(file).unwrap();
        for used in referenced(&text, depth) {
            if used != module && graph.contains_key(&used) {
                graph.get_mut(&module).unwrap().insert(used);
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan), each sorted.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn strong<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for u in &w.graph[v] {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                strong(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.stack.contains(&u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(u) = w.stack.pop() {
                component.push(u.to_string());
                if u == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            strong(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_module_of_the_shim_imports_a_layer_above_its_own() {
    let graph = module_graph(&root().join("src"));
    assert!(graph.len() > 20, "read {} modules", graph.len());
    let mut violations = Vec::new();
    for (module, uses) in &graph {
        let own = layer(module);
        for used in uses {
            if layer(used) > own {
                violations.push(format!("{module} ({own}) uses {used} ({})", layer(used)));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports up the layers:\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut found = Vec::new();
    for (name, dir) in [
        ("shim", "."),
        ("core", "core"),
        ("cli", "cli"),
        ("sim", "sim"),
    ] {
        let graph = module_graph(&root().join(dir).join("src"));
        assert!(graph.len() > 5, "{name}: read {} modules", graph.len());
        eprintln!(
            "{name}: {} modules, {} imports between them, {} circles",
            graph.len(),
            graph.values().map(BTreeSet::len).sum::<usize>(),
            circles(&graph).len()
        );
        for circle in circles(&graph) {
            let edges: Vec<String> = circle
                .iter()
                .map(|m| {
                    let inside: Vec<&str> = graph[m]
                        .iter()
                        .filter(|u| circle.contains(u))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", inside.join(", "))
                })
                .collect();
            found.push(format!("{name}: {circle:?} ({})", edges.join("; ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_reference_finder_reads_paths_groups_and_supers() {
    let text = "use crate::{loader, trace::x,\n    engine::{a, b}};\n\
                let a = crate::writer::states();\n// crate::capi\n/* crate::lib */\n\
                use super::guard::Guard;\nuse super::super::deep;\n";
    assert_eq!(
        referenced(text, 1),
        ["loader", "trace", "engine", "writer", "guard"]
    );
    assert_eq!(
        referenced(text, 2),
        ["loader", "trace", "engine", "writer", "deep"]
    );
}

#[test]
fn a_circle_is_found_through_a_third_module() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        graph.entry(from.into()).or_default().insert(to.into());
        graph.entry(to.into()).or_default();
    }
    assert_eq!(circles(&graph), [["a", "b", "c"]]);
}
