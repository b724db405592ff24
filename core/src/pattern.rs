//! Trace file patterns (`SHARECHECK_TRACE`): `%p` the pid, `%h` the host name, `%q{VAR}` an
//! environment variable, `%%` a percent sign; anything else is itself.
//!
//! One tokenizer for both readers: the shim expands a pattern into its file name
//! ([`expand`]), `sharecheck run` turns it into a glob and creates its directory.
//! Patterns are bytes (a path need not be UTF-8).

use std::fmt;

/// One piece of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token<'a> {
    /// Bytes taken as they are (never empty, never holding `%`).
    Literal(&'a [u8]),
    /// `%p`: the process id.
    Pid,
    /// `%h`: the host name.
    Host,
    /// `%q{VAR}`: the value of environment variable VAR (nothing when unset).
    Var(&'a [u8]),
    /// `%%`: one `%`.
    Percent,
}

/// What is wrong with a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// `%x` for a key other than `p`, `h`, `q`, `%` (the key as written, one character).
    UnknownKey(String),
    /// The pattern ends with a `%` that starts no key.
    LonePercent,
    /// `%q` not followed by `{VAR}` with a non-empty VAR.
    BadVar,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::UnknownKey(key) => {
                write!(f, "unknown key %{key} (use %p, %h, %q{{VAR}} or %%)")
            }
            PatternError::LonePercent => write!(f, "ends with a lone %"),
            PatternError::BadVar => write!(f, "%q must be followed by {{VAR}}"),
        }
    }
}

impl std::error::Error for PatternError {}

/// The character starting `bytes`, for a message (one byte shown as `\xNN` if not UTF-8).
fn first_char(bytes: &[u8]) -> String {
    let len = match bytes[0] {
        b if b < 0x80 => 1,
        b if b >= 0xf0 => 4,
        b if b >= 0xe0 => 3,
        _ => 2,
    };
    match bytes.get(..len).map(std::str::from_utf8) {
        Some(Ok(c)) => c.to_string(),
        _ => format!("\\x{:02x}", bytes[0]),
    }
}

/// Splits `pattern` into tokens, or says what is wrong with it.
pub fn tokenize(pattern: &[u8]) -> Result<Vec<Token<'_>>, PatternError> {
    let mut tokens = Vec::new();
    let mut rest = pattern;
    while !rest.is_empty() {
        let literal = rest.iter().position(|&b| b == b'%').unwrap_or(rest.len());
        if literal > 0 {
            tokens.push(Token::Literal(&rest[..literal]));
            rest = &rest[literal..];
            continue;
        }
        let Some(&key) = rest.get(1) else {
            return Err(PatternError::LonePercent);
        };
        rest = &rest[2..];
        tokens.push(match key {
            b'p' => Token::Pid,
            b'h' => Token::Host,
            b'%' => Token::Percent,
            b'q' => {
                let name = rest
                    .strip_prefix(b"{")
                    .and_then(|r| r.iter().position(|&b| b == b'}').map(|end| &r[..end]))
                    .filter(|name| !name.is_empty())
                    .ok_or(PatternError::BadVar)?;
                rest = &rest[name.len() + 2..];
                Token::Var(name)
            }
            _ => {
                return Err(PatternError::UnknownKey(first_char(
                    &pattern[pattern.len() - rest.len() - 1..],
                )))
            }
        });
    }
    Ok(tokens)
}

/// Expands `pattern`: `%p` becomes `pid`, `%h` becomes `host`, `%q{VAR}` becomes `var(VAR)`
/// (nothing when it answers `None`), `%%` becomes `%`.
pub fn expand(
    pattern: &[u8],
    pid: u32,
    host: &[u8],
    var: impl Fn(&[u8]) -> Option<Vec<u8>>,
) -> Result<Vec<u8>, PatternError> {
    let mut out = Vec::new();
    for token in tokenize(pattern)? {
        match token {
            Token::Literal(bytes) => out.extend_from_slice(bytes),
            Token::Pid => out.extend_from_slice(pid.to_string().as_bytes()),
            Token::Host => out.extend_from_slice(host),
            Token::Var(name) => out.extend(path_safe(var(name).unwrap_or_default())),
            Token::Percent => out.push(b'%'),
        }
    }
    Ok(out)
}

/// A variable's value as one piece of a file name: `/` becomes `_`, and `.` or `..` alone
/// becomes `_`, so that `%q{VAR}` never leaves the directory the pattern names.
fn path_safe(mut value: Vec<u8>) -> Vec<u8> {
    for b in &mut value {
        if *b == b'/' {
            *b = b'_';
        }
    }
    if value == b"." || value == b".." {
        return b"_".to_vec();
    }
    value
}

/// `literal` as a pattern that expands to itself (`%` doubled).
pub fn escape(literal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(literal.len());
    for &b in literal {
        if b == b'%' {
            out.push(b'%');
        }
        out.push(b);
    }
    out
}

/// Splits tokens at the last `/` of their literal text: the directory part (without that `/`;
/// `/` itself for a file in the root) and the file-name part. `None` when there is no `/`.
pub fn split_dir<'a>(tokens: &[Token<'a>]) -> Option<(Vec<Token<'a>>, Vec<Token<'a>>)> {
    let (at, pos) = tokens.iter().enumerate().rev().find_map(|(i, t)| match t {
        Token::Literal(bytes) => bytes.iter().rposition(|&b| b == b'/').map(|p| (i, p)),
        _ => None,
    })?;
    let Token::Literal(bytes) = tokens[at] else {
        unreachable!("found in a literal")
    };
    let mut dir = tokens[..at].to_vec();
    // The root keeps its `/`.
    let head = if at == 0 && pos == 0 {
        &bytes[..1]
    } else {
        &bytes[..pos]
    };
    if !head.is_empty() {
        dir.push(Token::Literal(head));
    }
    let mut file = Vec::new();
    if pos + 1 < bytes.len() {
        file.push(Token::Literal(&bytes[pos + 1..]));
    }
    file.extend_from_slice(&tokens[at + 1..]);
    Some((dir, file))
}

/// The bytes `tokens` stand for when they hold no key that varies (only literals and `%%`).
pub fn literal_text(tokens: &[Token]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for token in tokens {
        match token {
            Token::Literal(bytes) => out.extend_from_slice(bytes),
            Token::Percent => out.push(b'%'),
            Token::Pid | Token::Host | Token::Var(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Token::*;

    #[test]
    fn keys_become_tokens() {
        assert_eq!(
            tokenize(b"/t/%h-%p.jsonl").unwrap(),
            [
                Literal(b"/t/"),
                Host,
                Literal(b"-"),
                Pid,
                Literal(b".jsonl")
            ]
        );
        assert_eq!(
            tokenize(b"r%q{RANK}%%%q{A_B}x").unwrap(),
            [
                Literal(b"r"),
                Var(b"RANK"),
                Percent,
                Var(b"A_B"),
                Literal(b"x")
            ]
        );
        assert_eq!(tokenize(b"").unwrap(), []);
        assert_eq!(tokenize(b"%%").unwrap(), [Percent]);
        // Not UTF-8: taken as it is.
        assert_eq!(tokenize(b"\xff/%p").unwrap(), [Literal(b"\xff/"), Pid]);
    }

    #[test]
    fn bad_patterns_name_the_problem() {
        for (pattern, error) in [
            (&b"a%x"[..], PatternError::UnknownKey("x".into())),
            (b"%P", PatternError::UnknownKey("P".into())),
            ("%é".as_bytes(), PatternError::UnknownKey("é".into())),
            (b"%\xff", PatternError::UnknownKey("\\xff".into())),
            (b"a%", PatternError::LonePercent),
            (b"%%%", PatternError::LonePercent),
            (b"%q", PatternError::BadVar),
            (b"%qRANK", PatternError::BadVar),
            (b"%q{RANK", PatternError::BadVar),
            (b"%q{}", PatternError::BadVar),
        ] {
            assert_eq!(tokenize(pattern), Err(error), "{pattern:?}");
        }
        assert_eq!(
            PatternError::UnknownKey("x".into()).to_string(),
            "unknown key %x (use %p, %h, %q{VAR} or %%)"
        );
        assert_eq!(PatternError::LonePercent.to_string(), "ends with a lone %");
        assert_eq!(
            PatternError::BadVar.to_string(),
            "%q must be followed by {VAR}"
        );
    }

    #[test]
    fn expansion_fills_in_every_key() {
        let var = |name: &[u8]| (name == b"RANK").then(|| b"3".to_vec());
        assert_eq!(
            expand(b"/t/%h-%p.jsonl", 42, b"node7", var).unwrap(),
            b"/t/node7-42.jsonl"
        );
        assert_eq!(
            expand(b"r%q{RANK}-%q{UNSET}.%%", 42, b"node7", var).unwrap(),
            b"r3-.%"
        );
        assert!(expand(b"a%x", 1, b"h", var).is_err());
    }

    #[test]
    fn a_variable_cannot_lead_out_of_the_directory() {
        let var = |name: &[u8]| {
            Some(match name {
                b"UP" => b"..".to_vec(),
                b"DEEP" => b"../../etc/x".to_vec(),
                _ => b".".to_vec(),
            })
        };
        assert_eq!(expand(b"/t/%q{UP}/f", 1, b"h", var).unwrap(), b"/t/_/f");
        assert_eq!(
            expand(b"/t/%q{DEEP}.jsonl", 1, b"h", var).unwrap(),
            b"/t/.._.._etc_x.jsonl"
        );
        assert_eq!(expand(b"/t/%q{DOT}/f", 1, b"h", var).unwrap(), b"/t/_/f");
    }

    #[test]
    fn escaped_text_expands_to_itself() {
        let text = b"/home/a%b/%p%%";
        let escaped = escape(text);
        assert_eq!(escaped, b"/home/a%%b/%%p%%%%");
        assert_eq!(expand(&escaped, 1, b"h", |_| None).unwrap(), text);
        assert_eq!(literal_text(&tokenize(&escaped).unwrap()).unwrap(), text);
    }

    #[test]
    fn directory_and_file_parts() {
        let split = |p: &'static [u8]| {
            let tokens = tokenize(p).unwrap();
            split_dir(&tokens).map(|(d, f)| (literal_text(&d), f.len()))
        };
        assert_eq!(
            split(b"/t/a%%b/%p.jsonl"),
            Some((Some(b"/t/a%b".to_vec()), 2))
        );
        assert_eq!(split(b"/t/%h/x.jsonl"), Some((None, 1)));
        assert_eq!(split(b"/x.jsonl"), Some((Some(b"/".to_vec()), 1)));
        assert_eq!(split(b"/%p"), Some((Some(b"/".to_vec()), 1)));
        assert_eq!(split(b"x.jsonl"), None);
        assert_eq!(split(b"%q{DIR}"), None);
        let tokens = tokenize(b"/t/%q{D}/").unwrap();
        let (dir, file) = split_dir(&tokens).unwrap();
        assert_eq!(dir, [Literal(b"/t/"), Var(b"D")]);
        assert_eq!(file, []);
    }
}
