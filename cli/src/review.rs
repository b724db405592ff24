//! Review aids of `sharecheck report`: suppressions (as valgrind and the sanitizers keep them)
//! and baselines (what is new since an earlier run, for CI gating).
//!
//! A suppressions file holds one suppression a line, its conditions separated by blanks, all of
//! which must hold: `rule:PATTERN`, `fn:PATTERN` (the CUDA or HIP function called), and the
//! program's frames as valgrind writes them: `fun:PATTERN` (a function's whole name, demangled;
//! an inlined function is a frame of its own) and `obj:PATTERN` (a module's whole path), in order
//! from the innermost frame, where `...` stands for any number of frames. `frame:PATTERN` matches
//! any frame's `module+0xoffset (symbol+0x..)` text. Patterns are globs (`*`, `?`) over the whole
//! name. `#` starts a comment. `--gen-suppressions` writes one line for each distinct finding,
//! naming its innermost function in the program's own code.

use crate::occurrence::Occurrence;
use crate::symbolize::Symbols;
use std::collections::BTreeMap;
use std::path::Path;

/// One frame condition of a suppression, valgrind's way.
#[derive(Clone, Debug, PartialEq, Eq)]
enum FramePattern {
    Fun(String),
    Obj(String),
    /// `...`: any number of frames.
    Any,
}

/// One suppression: every condition must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suppression {
    rule: Option<String>,
    func: Option<String>,
    frame: Option<String>,
    frames: Vec<FramePattern>,
}

/// A frame of a finding's stack as suppressions and baselines see it: its module and function
/// (a frame's inlined functions are frames of their own, innermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedFrame {
    pub module: String,
    pub offset: u64,
    pub function: Option<String>,
    /// The function the shim named when it captured the frame (the symbol table's or the
    /// loader's), on the frame's outermost function only: true to the module as it was then,
    /// where `function` is read from the module as it is now (rebuilt in place, perhaps).
    pub recorded: Option<String>,
}

/// The frames of `o`'s stack with their functions: from debug information or the symbol table
/// where the module is still there, else the dynamic symbol the shim recorded.
pub fn named_frames(o: &Occurrence, symbols: &Symbols) -> Vec<NamedFrame> {
    let mut out = Vec::new();
    for (module, offset, symbol) in o.stack() {
        // `name+0x12` as recorded: the name alone.
        let recorded = symbol.map(|s| match s.rsplit_once('+') {
            Some((name, d)) if d.starts_with("0x") => name.to_string(),
            _ => s,
        });
        let functions = symbols.functions(&module, offset);
        if functions.is_empty() {
            out.push(NamedFrame {
                module,
                offset,
                function: recorded.clone(),
                recorded,
            });
        } else {
            let outer = functions.len() - 1;
            out.extend(functions.iter().enumerate().map(|(i, f)| NamedFrame {
                module: module.clone(),
                offset,
                function: Some(f.name.clone()),
                recorded: if i == outer { recorded.clone() } else { None },
            }));
        }
    }
    out
}

/// Whether a frame is in a runtime or system library rather than the program's own code: the
/// CUDA and HIP libraries, the C runtime and loader, and anything under the system's library
/// directories.
pub fn is_system(module: &str) -> bool {
    const DIRS: [&str; 6] = [
        "/lib/",
        "/lib64/",
        "/usr/lib/",
        "/usr/lib64/",
        "/usr/local/cuda",
        "/opt/rocm",
    ];
    const NAMES: [&str; 10] = [
        "libcuda.",
        "libcudart.",
        "libamdhip64.",
        "libhsa-runtime",
        "libc.so",
        "ld-linux",
        "libstdc++.",
        "libgcc_s.",
        "libpthread.",
        "libsharecheck",
    ];
    let name = Path::new(module)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(module);
    DIRS.iter().any(|d| module.starts_with(d)) || NAMES.iter().any(|n| name.starts_with(n))
}

/// The innermost frame in the program's own code (else the innermost frame).
fn user_frame(frames: &[NamedFrame]) -> Option<&NamedFrame> {
    frames
        .iter()
        .find(|f| !is_system(&f.module))
        .or_else(|| frames.first())
}

/// Whether `patterns` (with `...`) match `frames` from the innermost on.
fn frames_match(patterns: &[FramePattern], frames: &[NamedFrame]) -> bool {
    match patterns.split_first() {
        None => true,
        Some((FramePattern::Any, rest)) => {
            (0..=frames.len()).any(|skip| frames_match(rest, &frames[skip..]))
        }
        Some((p, rest)) => {
            let Some((frame, more)) = frames.split_first() else {
                return false;
            };
            let hit = match p {
                FramePattern::Fun(g) => [&frame.function, &frame.recorded]
                    .into_iter()
                    .flatten()
                    .any(|f| glob(g, f)),
                FramePattern::Obj(g) => glob(g, &frame.module),
                FramePattern::Any => unreachable!(),
            };
            hit && frames_match(rest, more)
        }
    }
}

/// `*` any run of characters, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

impl Suppression {
    pub fn matches(&self, o: &Occurrence, symbols: &Symbols) -> bool {
        self.rule.as_deref().is_none_or(|p| glob(p, o.rule()))
            && self
                .func
                .as_deref()
                .is_none_or(|p| o.func.as_deref().is_some_and(|f| glob(p, f)))
            && self.frame.as_deref().is_none_or(|p| {
                o.stack()
                    .iter()
                    .any(|(m, off, sym)| glob(p, &frame_text(m, *off, sym.as_deref())))
            })
            && (self.frames.is_empty() || frames_match(&self.frames, &named_frames(o, symbols)))
    }
}

fn frame_text(module: &str, offset: u64, symbol: Option<&str>) -> String {
    match symbol {
        Some(s) => format!("{module}+{offset:#x} ({s})"),
        None => format!("{module}+{offset:#x}"),
    }
}

/// Reads suppression files; an error names the file and line.
pub fn read_suppressions(files: &[impl AsRef<Path>]) -> Result<Vec<Suppression>, String> {
    let mut out = Vec::new();
    for file in files {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).map_err(|e| {
            format!(
                "cannot read the suppressions file {}: {}",
                file.display(),
                crate::trace::io_reason(&e)
            )
        })?;
        out.extend(parse_suppressions(&text, &file.display().to_string())?);
    }
    Ok(out)
}

/// The suppressions of one file's text (`name` for messages).
pub fn parse_suppressions(text: &str, name: &str) -> Result<Vec<Suppression>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut s = Suppression::default();
        for word in line.split_whitespace() {
            if word == "..." {
                s.frames.push(FramePattern::Any);
                continue;
            }
            let (key, value) = word.split_once(':').ok_or_else(|| {
                format!(
                    "{name}:{}: `{word}` is not `rule:PATTERN`, `fn:PATTERN`, `fun:PATTERN`, \
                     `obj:PATTERN`, `...` or `frame:PATTERN`",
                    n + 1
                )
            })?;
            let slot = match key {
                "rule" => &mut s.rule,
                "fn" => &mut s.func,
                "frame" => &mut s.frame,
                "fun" => {
                    s.frames.push(FramePattern::Fun(value.to_string()));
                    continue;
                }
                "obj" => {
                    s.frames.push(FramePattern::Obj(value.to_string()));
                    continue;
                }
                other => {
                    return Err(format!(
                        "{name}:{}: unknown condition `{other}` (rule, fn, fun, obj, frame)",
                        n + 1
                    ))
                }
            };
            *slot = Some(value.to_string());
        }
        out.push(s);
    }
    Ok(out)
}

/// The suppression line for a finding: its rule, function and the innermost function of the
/// program's own code (`... fun:NAME`); without a name, that frame's exact place.
pub fn suppression_line(o: &Occurrence, symbols: &Symbols) -> String {
    let mut line = format!("rule:{}", o.rule());
    if let Some(f) = &o.func {
        line.push_str(&format!(" fn:{f}"));
    }
    let frames = named_frames(o, symbols);
    match user_frame(&frames) {
        Some(NamedFrame {
            function: Some(function),
            ..
        }) if !function.contains(char::is_whitespace) => {
            line.push_str(&format!(" ... fun:{}", escape_glob(function)));
        }
        Some(frame) => {
            line.push_str(&format!(" frame:{}+{:#x}*", frame.module, frame.offset));
        }
        None => {}
    }
    line
}

/// `name` as a glob that matches only itself (`*`, `?` stand for themselves nowhere: a name
/// holding one is matched with `?` in its place).
fn escape_glob(name: &str) -> String {
    name.replace(['*', '?'], "?")
}

/// The suppressions file for the distinct findings' lines.
pub fn generate(lines: &std::collections::BTreeSet<String>) -> String {
    let mut out = String::from("# sharecheck suppressions (report --suppressions FILE)\n");
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// What identifies a finding across runs and rebuilds: its rule, its function, and the innermost
/// function of the program's own code (a module's file name and offset only where no name is
/// known; addresses and pids in messages never).
pub fn key(o: &Occurrence, symbols: &Symbols) -> String {
    let frames = named_frames(o, symbols);
    let user = frames
        .iter()
        .position(|f| !is_system(&f.module))
        .or((!frames.is_empty()).then_some(0));
    let place = user
        .map(|i| {
            let f = &frames[i];
            // The name the shim recorded at the call first (on the outermost function at the
            // frame's address): the module may have been rebuilt in place since, its offsets now
            // in other functions. Then the name read from the module, then its offset.
            let name = frames[i..]
                .iter()
                .take_while(|g| g.module == f.module && g.offset == f.offset)
                .find_map(|g| g.recorded.clone())
                .or_else(|| f.function.clone());
            match name {
                Some(function) => format!(" at {function}"),
                None => {
                    let file = Path::new(&f.module)
                        .file_name()
                        .map_or(f.module.as_str(), |n| {
                            n.to_str().unwrap_or(f.module.as_str())
                        });
                    format!(" at {file}+{:#x}", f.offset)
                }
            }
        })
        .unwrap_or_default();
    format!(
        "{} in {}{place}",
        o.rule(),
        o.func.as_deref().unwrap_or("?")
    )
}

/// Finding keys with their counts.
pub type Counted = Vec<(String, usize)>;

/// The keys of `now` not in `before` (new), and of `before` not in `now` (gone).
pub fn compare(
    before: &BTreeMap<String, usize>,
    now: &BTreeMap<String, usize>,
) -> (Counted, Counted) {
    let new = now
        .iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    let gone = before
        .iter()
        .filter(|(k, _)| !now.contains_key(*k))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    (new, gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_a_shell_would() {
        assert!(glob("cuMemcpyPeer*", "cuMemcpyPeerAsync_ptsz"));
        assert!(glob("*", ""));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*libtorch*.so+*", "/x/libtorch_cuda.so+0x10 (f+0x2)"));
        assert!(!glob("peer*", "cuMemcpyPeer"));
        assert!(glob("*.null-context", "cuMemcpyPeer.null-context"));
    }

    #[test]
    fn a_bad_line_is_refused_with_its_place() {
        let dir = std::env::temp_dir().join(format!("sharecheck-supp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.supp");
        std::fs::write(&f, "# c\nrule:a fn:b\n\nrule:x bogus\n").unwrap();
        let e = read_suppressions(&[&f]).unwrap_err();
        assert!(
            e.ends_with(
                "s.supp:4: `bogus` is not `rule:PATTERN`, `fn:PATTERN`, `fun:PATTERN`, \
                 `obj:PATTERN`, `...` or `frame:PATTERN`"
            ),
            "{e}"
        );
        std::fs::write(&f, "rule:a fn:b # why\nframe:*x*\n... fun:main obj:/x\n").unwrap();
        let s = read_suppressions(&[&f]).unwrap();
        assert_eq!(s.len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn frames(spec: &[(&str, Option<&str>)]) -> Vec<NamedFrame> {
        spec.iter()
            .map(|&(module, function)| NamedFrame {
                module: module.into(),
                offset: 0,
                function: function.map(str::to_string),
                recorded: None,
            })
            .collect()
    }

    fn patterns(line: &str) -> Vec<FramePattern> {
        parse_suppressions(line, "t").unwrap().remove(0).frames
    }

    /// `fun:` and `obj:` match frames in order from the innermost, whole names only; `...`
    /// skips any number of frames.
    #[test]
    fn frame_patterns_match_in_order_from_the_innermost_frame() {
        let stack = frames(&[
            ("/usr/lib/libcudart.so.13", Some("cudaMemcpyPeer")),
            ("/home/u/app", Some("copy_to_peer")),
            ("/home/u/app", Some("main")),
            ("/lib/x86_64-linux-gnu/libc.so.6", Some("__libc_start_main")),
        ]);
        let hit = |line: &str| frames_match(&patterns(line), &stack);
        assert!(hit("... fun:copy_to_peer"));
        assert!(hit("obj:*libcudart* fun:copy_to_peer fun:main"));
        assert!(hit("fun:cudaMemcpyPeer ... fun:main"));
        assert!(!hit("fun:copy_to_peer"), "anchored at the innermost frame");
        assert!(!hit("... fun:copy"), "a whole name, not a part");
        assert!(!hit("... fun:main fun:copy_to_peer"), "in order");
        // `main` names main, not __libc_start_main.
        let no_main = frames(&[("/lib/x86_64-linux-gnu/libc.so.6", Some("__libc_start_main"))]);
        assert!(!frames_match(&patterns("... fun:main"), &no_main));
        assert!(frames_match(&patterns("... fun:*main"), &no_main));
    }

    /// The program's own innermost frame is the first outside the runtimes and system
    /// libraries.
    #[test]
    fn the_user_frame_is_the_first_outside_system_libraries() {
        let stack = frames(&[
            (
                "/usr/local/cuda/lib64/libcudart.so.13",
                Some("cudaMemcpyPeer"),
            ),
            ("/tmp/x/libcuda.so.1", Some("cuMemcpyPeer")),
            ("/home/u/app", Some("copy_to_peer")),
        ]);
        assert_eq!(
            user_frame(&stack).and_then(|f| f.function.as_deref()),
            Some("copy_to_peer")
        );
        assert_eq!(escape_glob("operator*"), "operator?");
    }
}
