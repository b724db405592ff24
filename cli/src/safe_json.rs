//! JSON that is safe on a terminal: what `serde_json` writes, with the characters it passes
//! through raw that a terminal acts on or that reorder text (DEL, the C1 controls U+0080 to
//! U+009F, and the bidirectional controls) written as `\uXXXX` escapes instead. Inside a JSON
//! string an escape means the same character, and outside strings JSON has none of these, so the
//! value read back is the same. Every JSON the CLI prints goes through here (`cat`, the JSON and
//! SARIF reports, the Perfetto timeline): a trace is the traced program's text.

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};
use std::io::{self, Write};

/// Whether `c` is written escaped (besides what JSON escapes itself).
pub fn needs_escape(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Writes `text` with the characters [`needs_escape`] names as `\uXXXX`.
fn write_escaped<W: ?Sized + Write>(out: &mut W, text: &str) -> io::Result<()> {
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if needs_escape(c) {
            out.write_all(&text.as_bytes()[start..i])?;
            write!(out, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
    }
    out.write_all(&text.as_bytes()[start..])
}

/// A JSON line of a trace as it is, but for the characters [`needs_escape`] names, escaped (the
/// line must be a JSON value: they can only stand inside its strings).
pub fn write_line(out: &mut impl Write, line: &[u8]) -> io::Result<()> {
    match std::str::from_utf8(line) {
        Ok(text) => write_escaped(out, text),
        // serde_json accepted it, so it is UTF-8; otherwise left as it is.
        Err(_) => out.write_all(line),
    }
}

/// A formatter that escapes what [`needs_escape`] names, and otherwise formats as `F`.
struct Safe<F>(F);

macro_rules! forward {
    ($($name:ident $(($($arg:ident: $ty:ty),*))?;)*) => {
        $(
            fn $name<W: ?Sized + Write>(&mut self, w: &mut W $($(, $arg: $ty)*)?) -> io::Result<()> {
                self.0.$name(w $($(, $arg)*)?)
            }
        )*
    };
}

impl<F: Formatter> Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        write_escaped(w, fragment)
    }
    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        self.0.write_char_escape(w, escape)
    }
    forward! {
        begin_array;
        end_array;
        begin_array_value(first: bool);
        end_array_value;
        begin_object;
        end_object;
        begin_object_key(first: bool);
        end_object_key;
        begin_object_value;
        end_object_value;
    }
}

/// [`serde_json::to_writer`], safe on a terminal.
pub fn to_writer<W: Write, T: ?Sized + Serialize>(out: W, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        Safe(CompactFormatter),
    ))
}

/// [`serde_json::to_string_pretty`], safe on a terminal.
pub fn to_string_pretty<T: ?Sized + Serialize>(value: &T) -> String {
    let mut out = Vec::new();
    let pretty = Safe(PrettyFormatter::new());
    match value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out, pretty,
    )) {
        // Only strings' bytes and JSON's own punctuation were written.
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DEL, a C1 control (CSI) and a bidi override come out escaped, in compact and pretty JSON
    /// and in a trace line, and read back as the same value; other text is as serde_json writes it.
    #[test]
    fn terminal_controls_are_escaped_and_the_value_is_unchanged() {
        let value = serde_json::json!({"exe": "a\u{7f}b\u{9b}2Jc\u{202e}d é \u{1b}", "n": [1, 2]});
        let mut compact = Vec::new();
        to_writer(&mut compact, &value).unwrap();
        let compact = String::from_utf8(compact).unwrap();
        assert_eq!(
            compact,
            r#"{"exe":"a\u007fb\u009b2Jc\u202ed é \u001b","n":[1,2]}"#
        );
        let pretty = to_string_pretty(&value);
        assert!(
            pretty.contains("\"exe\": \"a\\u007fb\\u009b2Jc\\u202ed é \\u001b\""),
            "{pretty}"
        );
        assert!(pretty.contains("\n  \"n\": [\n    1,"), "{pretty}");
        for text in [&compact, &pretty] {
            let back: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(back, value);
        }
        let raw = serde_json::to_string(&value).unwrap();
        let mut line = Vec::new();
        write_line(&mut line, raw.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(line).unwrap(), compact);
    }
}
