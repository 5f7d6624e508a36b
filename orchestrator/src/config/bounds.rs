//! The range of every number a hunt file may hold, each with its reason (issue 19, finding 7),
//! and of the length of each command it runs (issue 32, finding 8).
//!
//! Validation checks each number against its entry in [`BOUNDS`] before using it, so a
//! duration built from one (`Duration::from_secs`, `Instant + Duration`) cannot overflow and
//! a count cannot ask for four billion boots. `docs/hunt-file-bounds.md` holds the same table,
//! rendered by [`markdown_table`]; a unit test fails when the two differ.

use std::fmt;

/// The values a number field accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    /// Integers from `min` to `max`, both included.
    Int {
        /// The smallest value accepted.
        min: i64,
        /// The largest value accepted.
        max: i64,
    },
    /// Finite floats between `min` and `max`; an open end is not itself accepted.
    Float {
        /// The lower end.
        min: f64,
        /// Whether `min` itself is refused.
        min_open: bool,
        /// The upper end.
        max: f64,
        /// Whether `max` itself is refused.
        max_open: bool,
    },
    /// A text (a command) of `min` to `max` bytes, both included.
    Bytes {
        /// The fewest bytes accepted.
        min: i64,
        /// The most bytes accepted.
        max: i64,
    },
}

impl Range {
    /// Whether an integer is in range.
    pub fn holds_int(&self, x: i64) -> bool {
        match *self {
            Range::Int { min, max } => (min..=max).contains(&x),
            Range::Float { .. } | Range::Bytes { .. } => false,
        }
    }

    /// Whether a float is finite and in range (NaN and infinities never are).
    pub fn holds_float(&self, x: f64) -> bool {
        match *self {
            Range::Float {
                min,
                min_open,
                max,
                max_open,
            } => {
                x.is_finite()
                    && if min_open { x > min } else { x >= min }
                    && if max_open { x < max } else { x <= max }
            }
            Range::Int { .. } | Range::Bytes { .. } => false,
        }
    }

    /// Whether a text's length in bytes is in range.
    pub fn holds_len(&self, text: &str) -> bool {
        match *self {
            Range::Bytes { min, max } => (min..=max).contains(&(text.len() as i64)),
            Range::Int { .. } | Range::Float { .. } => false,
        }
    }
}

/// `1..=64` for integers; `(0, 0.5)` for floats, a parenthesis where the end is left out.
impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Range::Int { min, max } => write!(f, "{min}..={max}"),
            Range::Bytes { min, max } => write!(f, "{min}..={max} bytes"),
            Range::Float {
                min,
                min_open,
                max,
                max_open,
            } => write!(
                f,
                "{}{}, {}{}",
                if min_open { '(' } else { '[' },
                Num(min),
                Num(max),
                if max_open { ')' } else { ']' }
            ),
        }
    }
}

/// A float as a person writes it: `0.5`, `10`, `1e15`.
struct Num(f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.abs() >= 1e6 {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// What a field holds when the hunt file leaves it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// This integer.
    Int(i64),
    /// This float.
    Float(f64),
    /// Something the table describes in words (computed, or required by a mode).
    Text(&'static str),
}

/// One number field of a hunt file: its range and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// The field as errors name it, with `[]` for "any host": `hosts[].memory_mb`.
    pub field: &'static str,
    /// The host kind that reads it, for `hosts[]` fields.
    pub kind: Option<&'static str>,
    /// The values accepted.
    pub range: Range,
    /// The value when the field is left out.
    pub default: Default,
    /// Why the range is what it is, in one line.
    pub why: &'static str,
}

impl Bound {
    /// `Ok(x)` when in range, else the message an error gives after the field's name.
    pub fn int(&self, x: i64) -> Result<i64, String> {
        if self.range.holds_int(x) {
            Ok(x)
        } else {
            Err(self.out_of_range(x))
        }
    }

    /// `Ok(x)` when finite and in range, else the message an error gives after the field.
    pub fn float(&self, x: f64) -> Result<f64, String> {
        if self.range.holds_float(x) {
            Ok(x)
        } else {
            Err(self.out_of_range(x))
        }
    }

    /// `Ok(())` when a command's length in bytes is in range, else the message an error gives
    /// after the field's name.
    pub fn length(&self, text: &str) -> Result<(), String> {
        if self.range.holds_len(text) {
            return Ok(());
        }
        Err(format!(
            "is {} bytes long, out of range {}: {}; put a longer command in a script and run \
             the script",
            text.len(),
            self.range,
            self.why
        ))
    }

    fn out_of_range(&self, x: impl fmt::Display) -> String {
        format!("{x} is out of range {}: {}", self.range, self.why)
    }
}

pub(super) const fn int(
    field: &'static str,
    min: i64,
    max: i64,
    default: i64,
    why: &'static str,
) -> Bound {
    Bound {
        field,
        kind: None,
        range: Range::Int { min, max },
        default: Default::Int(default),
        why,
    }
}

pub(super) const fn host(kind: &'static str, b: Bound) -> Bound {
    Bound {
        kind: Some(kind),
        ..b
    }
}

/// An open interval `(min, max)`.
pub(super) const fn open(
    field: &'static str,
    min: f64,
    max: f64,
    default: Default,
    why: &'static str,
) -> Bound {
    Bound {
        field,
        kind: None,
        range: Range::Float {
            min,
            min_open: true,
            max,
            max_open: true,
        },
        default,
        why,
    }
}

/// A text of 1 to `max` bytes, required or with a default said in words.
const fn bytes(field: &'static str, max: i64, default: &'static str, why: &'static str) -> Bound {
    Bound {
        field,
        kind: None,
        range: Range::Bytes { min: 1, max },
        default: Default::Text(default),
        why,
    }
}

mod table;
pub use table::*;

/// [`BOUNDS`] as the Markdown table of `docs/hunt-file-bounds.md`.
pub fn markdown_table() -> String {
    let mut out = String::from("| field | kind | range | default | why |\n|---|---|---|---|---|\n");
    for b in BOUNDS {
        let default = match b.default {
            Default::Int(x) => x.to_string(),
            Default::Float(x) => Num(x).to_string(),
            Default::Text(t) => t.to_owned(),
        };
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} | {} |\n",
            b.field,
            b.kind.unwrap_or(""),
            b.range,
            default.replace('|', "\\|"),
            b.why.replace('|', "\\|"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_print_as_the_docs_write_them() {
        assert_eq!(TEST_JOBS.range.to_string(), "1..=64");
        assert_eq!(CLASSIFY_ALPHA.range.to_string(), "(0, 0.5)");
        assert_eq!(CLASSIFY_THRESHOLD.range.to_string(), "(0, 1e15]");
        assert_eq!(TEST_COMMAND_BYTES.range.to_string(), "1..=131071 bytes");
    }

    #[test]
    fn floats_must_be_finite_and_open_ends_are_left_out() {
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.5, -0.01] {
            assert!(CLASSIFY_ALPHA.float(x).is_err(), "{x}");
        }
        assert_eq!(CLASSIFY_ALPHA.float(0.01), Ok(0.01));
        assert!(CLASSIFY_THRESHOLD.float(1e15).is_ok());
        assert!(CLASSIFY_THRESHOLD.float(1.1e15).is_err());
    }

    #[test]
    fn every_default_is_in_its_range_and_every_reason_is_one_short_line() {
        for b in BOUNDS {
            match b.default {
                Default::Int(x) => assert!(b.range.holds_int(x), "{}", b.field),
                Default::Float(x) => assert!(b.range.holds_float(x), "{}", b.field),
                Default::Text(_) => {}
            }
            assert!(
                b.why.len() <= 100 && !b.why.contains('\n'),
                "{}: {}",
                b.field,
                b.why
            );
        }
    }

    #[test]
    fn each_field_is_listed_once_per_host_kind() {
        for (i, a) in BOUNDS.iter().enumerate() {
            for b in &BOUNDS[i + 1..] {
                assert!((a.field, a.kind) != (b.field, b.kind), "{}", a.field);
            }
        }
    }

    // The table in the docs is the table in the code: regenerate it with
    // `FIRSTBAD_BLESS=1 cargo test -p firstbad --lib config::bounds`.
    #[test]
    fn the_docs_table_is_the_code_table() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/hunt-file-bounds.md");
        let text = std::fs::read_to_string(&doc).expect("docs/hunt-file-bounds.md exists");
        let (begin, end) = ("<!-- bounds:begin -->\n", "<!-- bounds:end -->");
        let start = text.find(begin).expect("the docs mark the table's start") + begin.len();
        let stop = text.find(end).expect("the docs mark the table's end");
        let table = markdown_table();
        if std::env::var_os("FIRSTBAD_BLESS").is_some() {
            let new = format!("{}{table}{}", &text[..start], &text[stop..]);
            std::fs::write(&doc, new).expect("docs/hunt-file-bounds.md is writable");
            return;
        }
        assert_eq!(
            &text[start..stop],
            table,
            "docs/hunt-file-bounds.md differs from config/bounds.rs: rerun with FIRSTBAD_BLESS=1"
        );
    }
}
