//! `firstbad watch`'s command line: a cycle (or one every so often), `ack`, `status`.

use super::db::SeriesDb;
use super::{db_path, describe};
use crate::config::SeriesConfig;
use crate::error::exit_code;
use crate::hunt::short;
use crate::report::text::{one_line, terminal};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// What was asked.
pub enum Action {
    /// One cycle, or one every `every`.
    Cycle {
        /// The pause between cycles (`--every`).
        every: Option<Duration>,
    },
    /// Acknowledge a change.
    Ack(u32),
    /// Print the series.
    Status,
}

/// Runs `firstbad watch`; returns the exit code.
pub fn run(series: &Path, action: Action, rt: tokio::runtime::Runtime) -> anyhow::Result<u8> {
    let cfg = match SeriesConfig::load(series) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("firstbad: {e}");
            return Ok(exit_code::BAD_INPUT);
        }
    };
    match action {
        Action::Ack(id) => Ok(match super::acknowledge(&cfg, id) {
            Ok(said) => {
                println!("{said}");
                exit_code::OK
            }
            Err(e) => {
                eprintln!("firstbad: {e}");
                e.exit_code()
            }
        }),
        Action::Status => {
            let path = db_path(&cfg.state_dir);
            if !path.exists() {
                println!("{}: no night yet (no {})", cfg.name, path.display());
                return Ok(exit_code::OK);
            }
            let (state, _) = SeriesDb::read(&path)?;
            print!("{}", status(&cfg, &state));
            Ok(exit_code::OK)
        }
        // A signal (Ctrl-C, or SIGTERM from a service manager) ends a cycle's builds and
        // boots cleanly, and the wait between cycles at once ([`crate::interrupt`]).
        Action::Cycle { every } => loop {
            let code = match crate::interrupt::block_on(&rt, super::cycle(&cfg))? {
                Ok(Ok(_)) => exit_code::OK,
                Ok(Err(e)) => {
                    eprintln!("firstbad: {}: {e}", cfg.name);
                    e.exit_code()
                }
                Err(i) => {
                    let again = format!("firstbad watch {}", series.display());
                    eprintln!("{}", crate::interrupt::message(&i, &again));
                    return Ok(i.exit_code());
                }
            };
            match every {
                // A bad series file stays bad: sleeping on it helps nobody.
                Some(d) if code != exit_code::BAD_INPUT => {
                    tracing::info!("next cycle in {}", show(d));
                    if let Err(i) = crate::interrupt::block_on(&rt, tokio::time::sleep(d))? {
                        eprintln!("firstbad: {i} between two cycles");
                        return Ok(i.exit_code());
                    }
                }
                _ => return Ok(code),
            }
        },
    }
}

/// `firstbad dashboard <series> --out DIR`.
pub fn dashboard(series: &Path, out: &Path) -> anyhow::Result<u8> {
    let cfg = match SeriesConfig::load(series) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("firstbad: {e}");
            return Ok(exit_code::BAD_INPUT);
        }
    };
    Ok(match super::dashboard::write(&cfg, out) {
        Ok(page) => {
            eprintln!("firstbad: wrote {}", page.display());
            exit_code::OK
        }
        Err(e) => {
            eprintln!("firstbad: {e}");
            e.exit_code()
        }
    })
}

/// A series for a person: the reference, the nights, the changes; for a terminal, so text
/// from input (a night's failure, a hunt's end) holds no control character
/// ([`crate::report::text`]).
pub fn status(cfg: &SeriesConfig, state: &super::db::SeriesState) -> String {
    terminal(&status_text(cfg, state)).into_owned()
}

fn status_text(cfg: &SeriesConfig, state: &super::db::SeriesState) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} of {}; reference {}",
        cfg.name,
        cfg.branch,
        cfg.remote,
        state.reference.as_deref().map_or("(none yet)", short)
    );
    for n in &state.nights {
        let what = match (&n.boots, &n.failed) {
            (Some(b), _) if b.is_empty() => "the reference".to_owned(),
            (Some(_), _) => {
                let (h, r) = (n.values(&n.head), n.values(&n.reference));
                format!(
                    "head median {:.3} ({} boots), reference median {:.3} ({} boots)",
                    crate::stats::median(&h),
                    h.len(),
                    crate::stats::median(&r),
                    r.len()
                )
            }
            (None, Some(why)) => format!("failed: {}", one_line(why)),
            (None, None) => "running".into(),
        };
        let what = match n.second_look {
            super::db::SecondLook::None => what,
            super::db::SecondLook::Started => format!("{what}; second look running"),
            super::db::SecondLook::Measured => format!("{what}, with a second look"),
        };
        let _ = writeln!(
            o,
            "night {:>3}: {} vs {}: {what}",
            n.night,
            short(&n.head),
            short(&n.reference)
        );
    }
    for c in &state.changes {
        let _ = writeln!(
            o,
            "change #{}: night {}, {:+.1}% {} of {} between {} and {}: {}{}",
            c.id,
            c.night,
            c.effect * 100.0,
            if c.regression {
                "regression"
            } else {
                "improvement"
            },
            one_line(&c.metric),
            short(&c.good),
            short(&c.bad),
            c.outcome.as_ref().map_or_else(
                || "hunting".to_owned(),
                |o| one_line(&describe(o)).into_owned()
            ),
            if c.acknowledged {
                " (acknowledged)"
            } else {
                ""
            }
        );
    }
    o
}

/// `--every`: `90s`, `30m`, `24h`, `7d`, or seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: give a number and a unit, e.g. 24h, 30m, 90s"))?;
    let secs = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit is s, m, h or d")),
    };
    if n == 0 {
        return Err("--every 0: give a pause longer than nothing".into());
    }
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{s:?} is too long"))
}

fn show(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
