//! Reading a hunt file as text: its size, encoding and NUL bytes are checked before TOML
//! sees it, and every message is one short line that never echoes the file wholesale.

use crate::error::ConfigError;
use std::path::Path;

/// The largest hunt file read: the examples are about 1 KiB, so 1 MiB is a wrong file,
/// not a long hunt (issue 19, finding 7: a 10 MB one-line file wrote 20 MB to stderr).
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Longest user text an error echoes (a value, a line of the file), in characters.
const SNIPPET_CHARS: usize = 80;

/// Longest message after `file: field: `, in characters; keeps every error one short line.
const MESSAGE_CHARS: usize = 240;

/// Reads a text file of at most [`MAX_FILE_BYTES`] that is UTF-8 without NUL bytes. Only a
/// regular file is read, opened without waiting: a FIFO hung `run`, `report` and `watch`
/// (issue 61, finding 5).
pub(super) fn text_file(path: &Path) -> Result<String, ConfigError> {
    use crate::files::{self, FileError};
    let read_error = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let bytes = match files::open_regular(path)
        .and_then(|f| files::read_capped(f, MAX_FILE_BYTES as u64))
    {
        Ok(bytes) => bytes,
        Err(FileError::TooLarge { .. }) => return Err(too_large(path)),
        Err(FileError::Io(e)) => return Err(read_error(e)),
        Err(e) => return Err(read_error(std::io::Error::other(e.to_string()))),
    };
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(nul_byte(path, &bytes, at));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let bytes = e.as_bytes();
            let at = e.utf8_error().valid_up_to();
            let (line, column) = line_column(&bytes[..at]);
            Err(ConfigError::Syntax {
                path: path.to_owned(),
                message: format!(
                    "line {line}, column {column}: byte 0x{:02x} is not UTF-8: a hunt file is \
                     UTF-8 text (is this the right file?)",
                    bytes[at]
                ),
            })
        }
    }
}

/// The checks of [`text_file`] that text already in memory can fail: size and NUL bytes.
pub(super) fn check_text(path: &Path, text: &str) -> Result<(), ConfigError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(path));
    }
    match text.bytes().position(|b| b == 0) {
        Some(at) => Err(nul_byte(path, text.as_bytes(), at)),
        None => Ok(()),
    }
}

fn too_large(path: &Path) -> ConfigError {
    ConfigError::Syntax {
        path: path.to_owned(),
        message: format!(
            "is larger than {} KiB: a hunt file is a few lines of TOML (is this the right file?)",
            MAX_FILE_BYTES >> 10
        ),
    }
}

fn nul_byte(path: &Path, bytes: &[u8], at: usize) -> ConfigError {
    let (line, column) = line_column(&bytes[..at]);
    ConfigError::Syntax {
        path: path.to_owned(),
        message: format!(
            "line {line}, column {column}: a NUL byte: a hunt file is text, this looks like a \
             binary file"
        ),
    }
}

/// 1-based line and column (in characters) just after `before`.
fn line_column(before: &[u8]) -> (usize, usize) {
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, column)
}

/// A TOML error as one line: where, what, and the start of the offending line.
pub(super) fn syntax(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    // The raw structs read every integer as i64 so that validation can give the range; the
    // user wrote a number, not a Rust type.
    let what = short_unknown_field(e.message())
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number");
    let message = match e.span() {
        Some(span) => {
            let at = floor_char_boundary(text, span.start.min(text.len()));
            let (line, column) = line_column(&text.as_bytes()[..at]);
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let line_text = text[line_start..].lines().next().unwrap_or("").trim();
            format!(
                "line {line}, column {column}: {}: in `{}`",
                one_line(&what, MESSAGE_CHARS / 2),
                cap(line_text, SNIPPET_CHARS)
            )
        }
        None => what,
    };
    ConfigError::Syntax {
        path: path.to_owned(),
        message: one_line(&message, MESSAGE_CHARS),
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`, ..." lists every field of the table
/// (25 for a host); keep the closest one as a suggestion instead.
pub(super) fn short_unknown_field(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_owned();
    };
    let Some((name, expected)) = rest.split_once('`') else {
        return message.to_owned();
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let closest = known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .min()
        .filter(|(d, _)| *d <= 2 + name.len() / 4);
    match closest {
        Some((_, k)) => format!("unknown field `{}`: did you mean `{k}`?", cap(name, 40)),
        None => format!(
            "unknown field `{}`: known here: {}",
            cap(name, 40),
            known.join(", ")
        ),
    }
}

/// Levenshtein distance, for suggestions between short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().take(64).enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (up + 1).min(row[j] + 1).min(diag + usize::from(ca != *cb));
            diag = up;
        }
    }
    row[b.len()]
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// User text as an error echoes it: quoted, control characters escaped, at most
/// [`SNIPPET_CHARS`] characters.
pub(crate) fn snippet(s: &str) -> String {
    format!("\"{}\"", cap(s, SNIPPET_CHARS))
}

/// `s` with control characters escaped, cut to `max` characters with "…".
fn cap(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A message made one line (line breaks become "; ") of at most `max` characters.
pub(super) fn one_line(s: &str, max: usize) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    cap(&joined, max)
}

/// The dotted name of the first string (or key) holding a NUL byte, as `hosts[0].address`.
pub(super) fn nul_in_strings(table: &toml::Table) -> Option<String> {
    fn walk(at: String, v: &toml::Value) -> Option<String> {
        match v {
            toml::Value::String(s) if s.contains('\0') => Some(at),
            toml::Value::Array(xs) => xs
                .iter()
                .enumerate()
                .find_map(|(i, x)| walk(format!("{at}[{i}]"), x)),
            toml::Value::Table(t) => in_table(&at, t),
            _ => None,
        }
    }
    fn in_table(at: &str, t: &toml::Table) -> Option<String> {
        t.iter().find_map(|(k, v)| {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            if k.contains('\0') {
                Some(here)
            } else {
                walk(here, v)
            }
        })
    }
    in_table("", table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_suggest_the_closest_known_one() {
        let m = "unknown field `memroy_mb`, expected one of `name`, `kind`, `memory_mb`, `cpus`";
        assert_eq!(
            short_unknown_field(m),
            "unknown field `memroy_mb`: did you mean `memory_mb`?"
        );
        let m = "unknown field `zzzzzzzz`, expected one of `name`, `kind`";
        assert_eq!(
            short_unknown_field(m),
            "unknown field `zzzzzzzz`: known here: name, kind"
        );
    }

    #[test]
    fn snippets_are_capped_and_escaped() {
        assert_eq!(snippet("a\0b\nc"), "\"a\\u{0}b\\nc\"");
        let long = "x".repeat(10_000);
        assert_eq!(snippet(&long).chars().count(), SNIPPET_CHARS + 3);
        assert_eq!(one_line("a\n\n  b  \nc", 100), "a; b; c");
    }

    #[test]
    fn lines_and_columns_count_from_one_in_characters() {
        assert_eq!(line_column(b""), (1, 1));
        assert_eq!(line_column("a\nbé".as_bytes()), (2, 3));
    }
}
