//! Reading a `git bisect log`, so that `firstbad run --replay <file>` starts from verdicts a
//! person already found by hand with git bisect.
//!
//! Accepted lines, as `git bisect log` writes them (and as `git bisect replay` reads them):
//! `git bisect start [options] [<bad> [<good>...]] [-- <paths>...]`, `git bisect good|bad|skip
//! [<rev>...]`, the terms `old`/`new` for good/bad, the old `git-bisect` spelling, `# ...`
//! comments and blank lines. Revisions are kept as written; the hunt resolves them.

use crate::search::Verdict;

/// One verdict read from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayVerdict {
    /// The verdict.
    pub verdict: Verdict,
    /// The revision as written in the log.
    pub rev: String,
    /// Line number in the file, from 1, for messages.
    pub line: usize,
}

/// What a log says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayLog {
    /// The arguments of `git bisect start`, unquoted, if the log has that line.
    pub start: Option<Vec<String>>,
    /// The verdicts in the order given.
    pub verdicts: Vec<ReplayVerdict>,
}

/// Why a log could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}: {text:?}")]
pub struct ReplayError {
    /// Line number, from 1.
    pub line: usize,
    /// The line.
    pub text: String,
    /// What is wrong with it.
    pub message: String,
}

/// Splits a log line into words, undoing the shell single quotes `git bisect log` writes
/// (`'v6.1'`, and `'\''` for a quote inside).
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    cur.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Parses the text of a `git bisect log`.
pub fn parse(text: &str) -> Result<ReplayLog, ReplayError> {
    let mut log = ReplayLog::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let err = |message: &str| ReplayError {
            line,
            text: raw.to_string(),
            message: message.to_string(),
        };
        let w = words(trimmed).map_err(|m| err(&m))?;
        let rest: &[String] = match w.first().map(String::as_str) {
            Some("git") if w.get(1).map(String::as_str) == Some("bisect") => &w[2..],
            Some("git-bisect") => &w[1..],
            _ => return Err(err("not a git bisect command")),
        };
        let Some((command, args)) = rest.split_first() else {
            return Err(err("git bisect without a command"));
        };
        let verdict = match command.as_str() {
            "start" => {
                log.start = Some(args.to_vec());
                continue;
            }
            "good" | "old" => Verdict::Good,
            "bad" | "new" => Verdict::Bad,
            "skip" => Verdict::Skip,
            // Commands that do not change the verdicts.
            "terms" | "log" | "visualize" | "view" => continue,
            other => {
                return Err(err(&format!(
                    "unsupported command {other:?} (expected start, good, bad or skip)"
                )))
            }
        };
        if args.is_empty() {
            return Err(err(
                "a verdict without a revision means HEAD, which a log cannot pin down: name the commit",
            ));
        }
        for rev in args {
            if rev.contains("..") {
                return Err(err(&format!(
                    "revision ranges such as {rev:?} are not supported: list the commits"
                )));
            }
            log.verdicts.push(ReplayVerdict {
                verdict,
                rev: rev.clone(),
                line,
            });
        }
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_bisect_log_with_comments_and_old_spelling() {
        let text = "git bisect start '--first-parent' 'v2' 'v1' '--' 'mm/'\n\
                    # status: waiting for both good and bad commits\n\
                    # bad: [abc] subject\n\
                    git bisect bad abc\n\
                    git bisect good 'v1'\n\
                    \n\
                    git-bisect skip d1 d2\n\
                    git bisect new e5\n\
                    # first bad commit: [e5] x\n";
        let log = parse(text).expect("parses");
        assert_eq!(
            log.start.as_deref(),
            Some(&["--first-parent", "v2", "v1", "--", "mm/"].map(String::from)[..])
        );
        let got: Vec<(Verdict, &str, usize)> = log
            .verdicts
            .iter()
            .map(|v| (v.verdict, v.rev.as_str(), v.line))
            .collect();
        assert_eq!(
            got,
            [
                (Verdict::Bad, "abc", 4),
                (Verdict::Good, "v1", 5),
                (Verdict::Skip, "d1", 7),
                (Verdict::Skip, "d2", 7),
                (Verdict::Bad, "e5", 8),
            ]
        );
    }

    #[test]
    fn quotes_are_undone_and_errors_name_the_line() {
        assert_eq!(words("a 'b c' 'it'\\''s'").unwrap(), ["a", "b c", "it's"]);
        let e = parse("git bisect good a\nhg bisect bad b\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("not a git bisect command"), "{e}");
        let e = parse("git bisect skip a..b\n").unwrap_err();
        assert!(e.to_string().contains("ranges"), "{e}");
        let e = parse("git bisect reset\n").unwrap_err();
        assert!(e.to_string().contains("\"reset\""), "{e}");
    }
}
