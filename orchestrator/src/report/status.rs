//! `firstbad status [--follow]`: where a running hunt is, read from its journal (read-only,
//! safe beside the running hunt): the current step, the candidate and the hosts, boots done
//! and expected, the remaining range and an estimate of the time left.

use super::text::{one_line, terminal};
use crate::config::HuntConfig;
use crate::history::History;
use crate::hunt::{short, HuntState};
use crate::journal::{BuildOutcome, Entry, Event, HuntEnd, HuntIdentity};
use crate::search::Bisection;
use std::collections::HashMap;
use std::fmt::Write;

/// Time figures from the journal's timestamps.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Timings {
    /// Median seconds of a finished build (failed ones included: they cost time too). The
    /// median, because the first build of a hunt is a clean one (~14 min for the demo
    /// kernel here) and the rest are incremental (~40 s).
    pub build_s: Option<f64>,
    /// Median seconds of a finished boot, from qemu start to the workload's end.
    pub boot_s: Option<f64>,
    /// Mean boots per decided candidate (endpoints excluded).
    pub boots_per_commit: Option<f64>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Durations of builds and boots from the journal's Started/Finished pairs.
pub fn timings(entries: &[Entry], id: &HuntIdentity) -> Timings {
    let mut build_start = HashMap::new();
    let mut boot_start = HashMap::new();
    let (mut builds, mut boots) = (Vec::new(), Vec::new());
    let mut boots_of: HashMap<&str, usize> = HashMap::new();
    let mut decided = Vec::new();
    for e in entries {
        match &e.event {
            Event::BuildStarted { commit } => {
                build_start.insert(commit.clone(), e.at_ms);
            }
            Event::BuildFinished { commit, .. } => {
                if let Some(s) = build_start.remove(commit) {
                    builds.push((e.at_ms - s) as f64 / 1000.0);
                }
            }
            Event::BootStarted { commit, boot, .. } => {
                boot_start.insert((commit.clone(), *boot), e.at_ms);
            }
            Event::BootFinished { commit, boot, .. } => {
                if let Some(s) = boot_start.remove(&(commit.clone(), *boot)) {
                    boots.push((e.at_ms - s) as f64 / 1000.0);
                }
                *boots_of.entry(commit.as_str()).or_default() += 1;
            }
            Event::Verdict { commit, .. } if commit != &id.good && commit != &id.bad => {
                decided.push(*boots_of.get(commit.as_str()).unwrap_or(&0) as f64);
            }
            _ => {}
        }
    }
    Timings {
        build_s: (!builds.is_empty()).then(|| crate::stats::median(&builds)),
        boot_s: (!boots.is_empty()).then(|| crate::stats::median(&boots)),
        boots_per_commit: mean(&decided),
    }
}

fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", (s + 30) / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// Seconds left: `steps` more bisection steps (one commit each on one host) and the endpoint
/// boots still missing, on `hosts` hosts. K hosts test K commits a round, and a round splits
/// the candidates K + 1 ways, so the steps shrink to `steps · ln 2 / ln(K + 1)` rounds; each
/// round builds its K commits one after the other (one builder) and boots them at once.
/// `None` until a boot has been timed.
pub fn estimate_left(
    t: &Timings,
    steps: u32,
    baseline_boots_left: usize,
    min_boots: u32,
    hosts: usize,
) -> Option<f64> {
    let boot = t.boot_s?;
    let k = hosts.max(1) as f64;
    let rounds = (steps as f64 * 2f64.ln() / (k + 1.0).ln()).ceil();
    let per_round =
        k * t.build_s.unwrap_or(0.0) + boot * t.boots_per_commit.unwrap_or(min_boots as f64);
    let baseline_rounds = (baseline_boots_left as f64 / k).ceil();
    Some(rounds * per_round + baseline_rounds * boot)
}

/// Remaining candidates and steps, from the repository and the verdicts so far, over the
/// range the hunt bisects: the journal's goods, `paths` and `first_parent` when it recorded
/// them ([`HuntState::range`]), else the identity's good alone. (Reading the range as
/// `good..bad` counted every commit of a path-limited hunt, not the ones it tests.)
fn remaining(cfg: &Hunt, id: &HuntIdentity, state: &HuntState) -> Option<(usize, u32)> {
    if let Some(line) = id.meaning.get("build.kernels") {
        // A prebuilt hunt: its candidates, bad first, are in its meaning; each one's parent
        // is the next.
        let ids: Vec<&str> = line.split(", ").collect();
        let nodes = ids
            .iter()
            .enumerate()
            .map(|(i, c)| crate::search::Node {
                id: (*c).to_owned(),
                parents: if i + 1 < ids.len() {
                    vec![i + 1]
                } else {
                    vec![]
                },
                commit_time: (ids.len() - i) as i64,
            })
            .collect();
        let dag = crate::search::Dag::new(nodes).ok()?;
        let mut b = Bisection::new(&dag, &id.bad, &[&id.good]).ok()?;
        for (c, v, _) in &state.verdicts {
            b.mark(c, *v).ok()?;
        }
        return Some((b.remaining(), b.steps_left()));
    }
    let history = History::open(cfg.repo).ok()?;
    let goods = state
        .range
        .as_ref()
        .map_or_else(|| vec![id.good.clone()], |r| r.goods.clone());
    let options = crate::hunt::prune::range_options(state.range.as_ref(), state.pruned.as_ref());
    let range = history.range(&id.bad, &goods, &options).ok()?;
    let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
    let mut b = Bisection::new(&range.dag, &range.bad.id, &goods).ok()?;
    for (c, v, _) in &state.verdicts {
        b.mark(c, *v).ok()?;
    }
    Some((b.remaining(), b.steps_left()))
}

/// What the status of a measured hunt reads from its hunt file: a kernel hunt's, or a metric
/// command hunt's (whose hosts are its runners).
pub struct Hunt<'a> {
    /// The hunt's name.
    pub name: &'a str,
    /// The repository.
    pub repo: &'a std::path::Path,
    /// The hosts' names, in the hunt file's order.
    pub hosts: Vec<String>,
    /// The statistics' settings.
    pub classify: &'a crate::config::ClassifyConfig,
}

impl<'a> From<&'a HuntConfig> for Hunt<'a> {
    fn from(cfg: &'a HuntConfig) -> Hunt<'a> {
        Hunt {
            name: &cfg.name,
            repo: &cfg.repo,
            hosts: cfg.hosts.iter().map(|h| h.name.clone()).collect(),
            classify: &cfg.classify,
        }
    }
}

/// The status text of a kernel hunt at time `now_ms` (Unix milliseconds).
pub fn render(cfg: &HuntConfig, id: &HuntIdentity, entries: &[Entry], now_ms: i64) -> String {
    render_hunt(&Hunt::from(cfg), id, entries, now_ms)
}

/// The status text of a measured hunt (kernel or metric command) at time `now_ms`, for a
/// terminal: text from input (reasons, hosts' names, messages) holds no control character
/// ([`terminal`]).
pub fn render_hunt(cfg: &Hunt, id: &HuntIdentity, entries: &[Entry], now_ms: i64) -> String {
    terminal(&render_text(cfg, id, entries, now_ms)).into_owned()
}

fn render_text(cfg: &Hunt, id: &HuntIdentity, entries: &[Entry], now_ms: i64) -> String {
    let state = HuntState::replay(entries);
    let t = timings(entries, id);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "hunt {}: good {} bad {}",
        cfg.name,
        short(&id.good),
        short(&id.bad)
    );
    if let Some(end) = &state.end {
        let _ = match end {
            HuntEnd::Found { commit } => writeln!(o, "ended: first bad commit {}", short(commit)),
            HuntEnd::OnlySkippedLeft { commits } => writeln!(
                o,
                "ended: only skipped commits left ({})",
                commits
                    .iter()
                    .map(|c| short(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            HuntEnd::NotReproduced { message } => {
                writeln!(o, "ended: regression not reproduced: {}", one_line(message))
            }
            HuntEnd::Reproduced { summary } => {
                writeln!(o, "ended: reproduced: {}", one_line(summary))
            }
            HuntEnd::Measured { summary } => writeln!(o, "ended: measured: {}", one_line(summary)),
        };
    }
    // The last step begun: which commit, which host, since when.
    let last_start = entries.iter().rev().find_map(|e| match &e.event {
        Event::BuildStarted { commit } => Some((commit.clone(), None, e.at_ms)),
        Event::BootStarted { commit, boot, host } => {
            Some((commit.clone(), Some((*boot, host.clone())), e.at_ms))
        }
        _ => None,
    });
    let ended_at = entries.last().map_or(now_ms, |e| e.at_ms);
    match (&state.in_flight(), &last_start) {
        (Some(step), Some((_, _, at))) if state.end.is_none() => {
            let _ = writeln!(
                o,
                "now: {step} (for {})",
                duration((now_ms - at) as f64 / 1000.0)
            );
        }
        _ if state.end.is_none() => {
            let _ = writeln!(
                o,
                "now: between steps (last event {} ago)",
                duration((now_ms - ended_at) as f64 / 1000.0)
            );
        }
        _ => {}
    }
    for name in &cfg.hosts {
        // The host's boots begun and not finished (a farm runs several at once).
        let running: Vec<String> = state
            .running
            .iter()
            .filter_map(|r| match r {
                crate::hunt::state::Running::Boot {
                    commit, boot, host, ..
                } if host == name => {
                    let at = entries.iter().rev().find_map(|e| match &e.event {
                        Event::BootStarted {
                            commit: c, boot: b, ..
                        } if c == commit && b == boot => Some(e.at_ms),
                        _ => None,
                    })?;
                    let job = state
                        .checkpoints
                        .get(&(commit.clone(), *boot))
                        .and_then(|c| c.job())
                        .map(|id| format!(" (job {id})"))
                        .unwrap_or_default();
                    Some(format!(
                        "running boot {boot} of {} for {}{job}",
                        short(commit),
                        duration((now_ms - at) as f64 / 1000.0)
                    ))
                }
                _ => None,
            })
            .collect();
        let busy = match state.retired.iter().find(|(n, _)| n == name) {
            Some((_, why)) => format!("left the pool: {}", one_line(why)),
            None if !running.is_empty() && state.end.is_none() => running.join("; "),
            None => "idle".to_owned(),
        };
        let _ = writeln!(o, "host {name}: {busy}");
    }
    // Boots done and expected, for the endpoints and for the candidate under test.
    // The baselines are looked at after 5 (a large regression only), 8, 16, 32 and 64 boots
    // of each endpoint, up to `max_baseline_boots`, where they decide.
    let (g, b) = (state.values(&id.good).len(), state.values(&id.bad).len());
    let last = cfg.classify.max_baseline_boots as usize;
    let n = crate::sequential::BASELINE_LOOKS
        .iter()
        .copied()
        .find(|&l| l > g.min(b))
        .map_or(g.min(b), |l| l.min(last).max(g.min(b)));
    let _ = writeln!(
        o,
        "baselines: good {g} boots, bad {b} boots (next look at {n} each); {}",
        state.baselines.as_deref().unwrap_or("not yet confirmed")
    );
    if let Some(f) = &state.forecast {
        let _ = writeln!(
            o,
            "forecast: {}; median {:.0} boots after the baselines, 90% within {:.0}; spent {}",
            f.verdict(),
            f.boots.median,
            f.boots.p90,
            state.boots_since_forecast()
        );
    }
    if let Some(r) = super::phases::revert_report(&state, &id.bad) {
        let under_way = if r.recovers == super::phases::IN_PROGRESS {
            "under way, "
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "revert on top of bad: {under_way}{}",
            one_line(&r.summary)
        );
    }
    let candidate = last_start.as_ref().map(|(c, _, _)| c.clone()).filter(|c| {
        c != &id.good && c != &id.bad && !state.verdicts.iter().any(|(v, _, _)| v == c)
    });
    if let Some(c) = &candidate {
        let build = match state.builds.get(c) {
            Some(BuildOutcome::Built { seconds, .. }) => format!("built in {seconds:.0} s"),
            Some(BuildOutcome::Failed { .. }) => "build failed".to_owned(),
            None => "building".to_owned(),
        };
        let _ = writeln!(
            o,
            "candidate {}: {build}; {} boots measured, {} failed; expected {}..{} boots",
            short(c),
            state.values(c).len(),
            state.failures(c).len(),
            cfg.classify.min_boots,
            cfg.classify.max_boots
        );
    }
    if let Some(p) = &state.pruned {
        match (&p.note, p.commits(&id.bad).count()) {
            (Some(note), _) => {
                let _ = writeln!(o, "pruning: {}", one_line(note));
            }
            (None, n) => {
                let _ = writeln!(
                    o,
                    "pruning: {n} commit(s) left out, changing no file the kernel is built \
                     from (`firstbad report` lists them)"
                );
            }
        }
    }
    let _ = writeln!(o, "verdicts: {}", state.verdicts.len());
    for (c, v, reason) in &state.verdicts {
        let _ = writeln!(o, "  {} {:<4} {}", short(c), v.as_str(), one_line(reason));
    }
    if state.end.is_none() {
        match remaining(cfg, id, &state) {
            Some((left, steps)) => {
                let _ = writeln!(o, "remaining range: {left} candidate(s), ~{steps} step(s)");
                let baseline_left = if state.baselines.is_none() {
                    (2 * n).saturating_sub(g + b)
                } else {
                    0
                };
                let hosts = cfg
                    .hosts
                    .iter()
                    .filter(|h| !state.retired.iter().any(|(r, _)| r == *h))
                    .count();
                match estimate_left(&t, steps, baseline_left, cfg.classify.min_boots, hosts) {
                    Some(left) => {
                        let _ = writeln!(
                            o,
                            "estimated time left: ~{} (per commit: build ~{}, {:.1} boots x ~{})",
                            duration(left),
                            duration(t.build_s.unwrap_or(0.0)),
                            t.boots_per_commit.unwrap_or(cfg.classify.min_boots as f64),
                            duration(t.boot_s.unwrap_or(0.0))
                        );
                    }
                    None => {
                        let _ =
                            writeln!(o, "estimated time left: unknown until a boot has finished");
                    }
                }
            }
            None => {
                let _ = writeln!(
                    o,
                    "remaining range: unknown (repository {} not readable)",
                    cfg.repo.display()
                );
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{BootOutcome, Verdict};
    use std::path::PathBuf;

    fn at(at_ms: i64, event: Event) -> Entry {
        Entry {
            seq: 0,
            at_ms,
            event,
        }
    }

    /// Issue 32, finding 4: a verdict's reason, a retired host's error and an end's message
    /// come from input (a command's output, an agent's answer); their escape sequences reached
    /// the terminal of `firstbad status`.
    #[test]
    fn status_text_from_the_journal_holds_no_control_character() {
        let id = HuntIdentity {
            good: "g".into(),
            bad: "b".into(),
            fingerprint: String::new(),
            meaning: Default::default(),
        };
        let entries = [
            at(
                0,
                Event::HostRetired {
                    host: "q".into(),
                    reason: "agent said \x1b]0;owned\x07\x1b[2J".into(),
                },
            ),
            at(
                1,
                Event::Verdict {
                    commit: "c".into(),
                    verdict: Verdict::Skip,
                    reason: "exit 3: \x1b[31mred\r\u{9b}2J".into(),
                },
            ),
            at(
                2,
                Event::Finished {
                    end: HuntEnd::NotReproduced {
                        message: "ms: \x1b[8mhidden".into(),
                    },
                },
            ),
        ];
        let classify = crate::config::ClassifyConfig::defaults();
        let hunt = Hunt {
            name: "h\x1b[5m",
            repo: std::path::Path::new("/nonexistent"),
            hosts: vec!["q".into()],
            classify: &classify,
        };
        let s = render_hunt(&hunt, &id, &entries, 3);
        let control: Vec<char> = s.chars().filter(|c| c.is_control() && *c != '\n').collect();
        assert!(control.is_empty(), "{control:?} in:\n{s}");
        assert!(
            s.contains("host q: left the pool: agent said \u{FFFD}]0;owned"),
            "{s}"
        );
        assert!(s.contains("hidden"), "{s}");
    }

    #[test]
    fn time_left_uses_median_build_and_boot_times_and_boots_per_commit() {
        let id = HuntIdentity {
            good: "g".into(),
            bad: "b".into(),
            fingerprint: String::new(),
            meaning: Default::default(),
        };
        let built = |_: &str| BuildOutcome::Failed {
            log: PathBuf::new(),
            error_lines: vec![],
        };
        let boot = |c: &str, n: u32| Event::BootFinished {
            commit: c.into(),
            boot: n,
            host: "q".into(),
            outcome: BootOutcome::Failed {
                reason: String::new(),
                console: PathBuf::new(),
                untestable: false,
            },
        };
        let started = |c: &str, n: u32| Event::BootStarted {
            commit: c.into(),
            boot: n,
            host: "q".into(),
        };
        let mut e = vec![
            // A clean first build of 840 s, then incremental ones of 40 s.
            at(0, Event::BuildStarted { commit: "g".into() }),
            at(
                840_000,
                Event::BuildFinished {
                    commit: "g".into(),
                    outcome: built("g"),
                },
            ),
            at(840_000, Event::BuildStarted { commit: "b".into() }),
            at(
                880_000,
                Event::BuildFinished {
                    commit: "b".into(),
                    outcome: built("b"),
                },
            ),
            at(880_000, Event::BuildStarted { commit: "c".into() }),
            at(
                920_000,
                Event::BuildFinished {
                    commit: "c".into(),
                    outcome: built("c"),
                },
            ),
        ];
        // Three boots of c, 20 s each, then its verdict.
        for n in 1..=3 {
            let t = 920_000 + (n as i64 - 1) * 20_000;
            e.push(at(t, started("c", n)));
            e.push(at(t + 20_000, boot("c", n)));
        }
        e.push(at(
            980_000,
            Event::Verdict {
                commit: "c".into(),
                verdict: Verdict::Good,
                reason: String::new(),
            },
        ));
        let t = timings(&e, &id);
        assert_eq!(t.build_s, Some(40.0));
        assert_eq!(t.boot_s, Some(20.0));
        assert_eq!(t.boots_per_commit, Some(3.0));
        // 4 steps x (40 s + 3 x 20 s) + 2 endpoint boots x 20 s.
        assert_eq!(estimate_left(&t, 4, 2, 2, 1), Some(440.0));
        assert_eq!(duration(440.0), "7 min");
        assert_eq!(estimate_left(&Timings::default(), 4, 0, 2, 1), None);
        // Three hosts: 4 binary steps are 2 rounds of a 4-way split, each building 3 commits
        // (120 s) and booting them at once (3 x 20 s); the 2 endpoint boots are one round.
        assert_eq!(estimate_left(&t, 4, 2, 2, 3), Some(2.0 * 180.0 + 20.0));
    }
}
