//! Review aids of `sharecheck report`: suppressions (as valgrind and the sanitizers keep them)
//! and baselines (what is new since an earlier run, for CI gating).
//!
//! A suppressions file holds one suppression a line, its conditions separated by blanks, all of
//! which must hold: `rule:PATTERN`, `fn:PATTERN`, `frame:PATTERN` (any frame of the finding's
//! stack, as `module+0xoffset (symbol+0x..)`, matches). Patterns are globs (`*`, `?`). `#` starts a
//! comment. `--gen-suppressions` writes one line for each distinct finding.

use crate::occurrence::Occurrence;
use std::collections::BTreeMap;
use std::path::Path;

/// One suppression: every condition must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suppression {
    rule: Option<String>,
    func: Option<String>,
    frame: Option<String>,
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
    pub fn matches(&self, o: &Occurrence) -> bool {
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
            let (key, value) = word.split_once(':').ok_or_else(|| {
                format!(
                    "{name}:{}: `{word}` is not `rule:PATTERN`, `fn:PATTERN` or `frame:PATTERN`",
                    n + 1
                )
            })?;
            let slot = match key {
                "rule" => &mut s.rule,
                "fn" => &mut s.func,
                "frame" => &mut s.frame,
                other => {
                    return Err(format!(
                        "{name}:{}: unknown condition `{other}` (rule, fn, frame)",
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

/// The suppression line for a finding: its rule, function and innermost frame's module.
pub fn suppression_line(o: &Occurrence) -> String {
    let mut line = format!("rule:{}", o.rule());
    if let Some(f) = &o.func {
        line.push_str(&format!(" fn:{f}"));
    }
    if let Some((module, _, _)) = o.stack().first() {
        line.push_str(&format!(" frame:{module}+*"));
    }
    line
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

/// What identifies a finding across runs: its rule, its function, and where in the program
/// (the innermost frame's module file name and offset, which stay put between runs of one
/// build; addresses and pids in messages do not).
pub fn key(o: &Occurrence) -> String {
    let place = o
        .stack()
        .first()
        .map(|(m, off, _)| {
            let name = Path::new(m)
                .file_name()
                .map_or(m.as_str(), |n| n.to_str().unwrap_or(m.as_str()));
            format!(" at {name}+{off:#x}")
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
            e.ends_with("s.supp:4: `bogus` is not `rule:PATTERN`, `fn:PATTERN` or `frame:PATTERN`"),
            "{e}"
        );
        std::fs::write(&f, "rule:a fn:b # why\nframe:*x*\n").unwrap();
        let s = read_suppressions(&[&f]).unwrap();
        assert_eq!(s.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
