//! Text taken from input (commit subjects, author names, ids, reasons, a command's output)
//! made inert where a report writes it: a terminal, Markdown, a mail's line.
//!
//! Issue 32, finding 4: a subject's `<img onerror>` and `[x](javascript:…)` stayed live in the
//! Markdown report, an ESC in a subject or a failed run's last line reached the terminal of
//! `firstbad report`, `log`, `status` and `watch … status`, and a 100 KB subject made a 100 KB
//! `Subject:` line.

use std::borrow::Cow;
use std::fmt::Write as _;

/// What a control character from input is printed as: visible, and moving nothing.
pub const REPLACEMENT: char = '\u{FFFD}';

/// Longest line of a mail (RFC 5322 section 2.1.1: 998 characters, CRLF excluded).
pub const MAIL_LINE_BYTES: usize = 998;

/// Characters of a commit subject (or a hunt's name) kept in a mail's `Subject:`: git's
/// own advice is about 50; 120 keeps every real kernel subject whole and the line far below
/// [`MAIL_LINE_BYTES`] even when each character takes 4 bytes.
pub const SUBJECT_CHARS: usize = 120;

/// A number for a message in a short form: `1e-30`, not 0. followed by 29 zeros and a 1
/// (issue 61, finding 4: an alpha was printed with 300 digits).
pub fn number(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-4 || x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Whether `c` would do something on a terminal instead of being shown: C0 (ESC among
/// them), DEL and C1.
fn is_control(c: char) -> bool {
    c.is_control()
}

/// `s` for a terminal, as multi-line text: every control character but `\n` and `\t`
/// replaced by [`REPLACEMENT`] (a `\r` too, which would let a line overwrite what came
/// before it).
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| is_control(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if is_control(c) && c != '\n' && c != '\t' {
                    REPLACEMENT
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// `s` as one line for a terminal: line breaks and tabs become spaces, every other control
/// character [`REPLACEMENT`].
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\n' | '\r' | '\t' => ' ',
                c if is_control(c) => REPLACEMENT,
                c => c,
            })
            .collect(),
    )
}

/// `s` as inert Markdown prose on one line: [`one_line`], HTML's `&`, `<` and `>` as
/// entities (no tag, no autolink, no entity of the input's survives, also for renderers that
/// know no backslash escape of them), and `\`, `[`, `]`, `` ` `` and `|` backslash-escaped
/// (no link, no image, no reference definition, no code span of the input's; a table's cell
/// stays one cell).
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in one_line(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '[' | ']' | '`' | '|' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` as a Markdown code span: [`one_line`] between backticks, its own backticks turned to
/// `'` so that it cannot end the span (inside one nothing is markup).
pub fn markdown_code(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('`');
    out.extend(one_line(s).chars().map(|c| if c == '`' { '\'' } else { c }));
    out.push('`');
    out
}

/// [`markdown_code`] in a table's cell: a `|` escaped, which GitHub's tables need even inside
/// a code span.
pub fn markdown_cell_code(s: &str) -> String {
    markdown_code(s).replace('|', "\\|")
}

/// `s` cut to `max` characters, with `…` in place of the rest.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let keep: String = s.chars().take(max.saturating_sub(1)).collect();
            Cow::Owned(keep + "…")
        }
    }
}

/// A mail's `Subject:` value from input: [`one_line`], cut to [`SUBJECT_CHARS`].
pub fn subject(s: &str) -> String {
    cut(&one_line(s), SUBJECT_CHARS).into_owned()
}

/// `text` with every line at most [`MAIL_LINE_BYTES`] bytes: a longer one is cut at a
/// character, with `…` in place of the rest (a folded line would read as a new field of the
/// trailers or the `git bisect log`).
pub fn mail_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.len() <= MAIL_LINE_BYTES {
            out.push_str(line);
            continue;
        }
        let room = MAIL_LINE_BYTES - '…'.len_utf8();
        let at = (0..=room)
            .rev()
            .find(|&i| body.is_char_boundary(i))
            .expect("0 is a boundary");
        let _ = write!(out, "{}…{end}", &body[..at]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_replaced_and_line_breaks_kept_only_in_multi_line_text() {
        let hostile = "a\x1b]0;owned\x07b\r\nc\td\u{7f}e\u{9b}31mf";
        assert_eq!(
            terminal(hostile),
            "a\u{FFFD}]0;owned\u{FFFD}b\u{FFFD}\nc\td\u{FFFD}e\u{FFFD}31mf"
        );
        assert_eq!(
            one_line(hostile),
            "a\u{FFFD}]0;owned\u{FFFD}b  c d\u{FFFD}e\u{FFFD}31mf"
        );
        assert!(matches!(terminal("plain\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn markdown_from_input_has_no_tag_link_or_image() {
        let md =
            markdown(r"<img src=x onerror=alert(1)> [x](javascript:alert(2)) \[y](z) a|b `c` &lt;");
        assert_eq!(
            md,
            r"&lt;img src=x onerror=alert(1)&gt; \[x\](javascript:alert(2)) \\\[y\](z) a\|b \`c\` &amp;lt;"
        );
        assert_eq!(markdown_code("a`<b>`|c\n"), "`a'<b>'|c `");
        assert_eq!(markdown_cell_code("a|b"), r"`a\|b`");
    }

    #[test]
    fn cuts_are_at_characters() {
        assert_eq!(cut("ééé", 3), "ééé");
        assert_eq!(cut("éééé", 3), "éé…");
        let long = format!("Subject: {}\nok\n", "é".repeat(1000));
        let cut = mail_lines(&long);
        let first = cut.lines().next().unwrap();
        assert!(
            first.len() <= MAIL_LINE_BYTES && first.ends_with('…'),
            "{}",
            first.len()
        );
        assert!(cut.ends_with("\nok\n"));
    }
}
