//! `firstbad status [--follow]`: where a running hunt is, read from its journal (read-only,
//! safe beside the running hunt): the current step, the candidate and the hosts, boots done
//! and expected, the remaining range and an estimate of the time left.

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
    /// Mean seconds of a finished build (failed ones included: they cost time too).
    pub build_s: Option<f64>,
    /// Mean seconds of a finished boot, from qemu start to the workload's end.
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
        build_s: mean(&builds),
        boot_s: mean(&boots),
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

/// Remaining candidates and steps, from the repository and the verdicts so far.
fn remaining(cfg: &HuntConfig, id: &HuntIdentity, state: &HuntState) -> Option<(usize, u32)> {
    let history = History::open(&cfg.repo).ok()?;
    let dag = history
        .load_range(&id.bad, std::slice::from_ref(&id.good))
        .ok()?;
    let mut b = Bisection::new(&dag, &id.bad, std::slice::from_ref(&id.good)).ok()?;
    for (c, v, _) in &state.verdicts {
        b.mark(c, *v).ok()?;
    }
    Some((b.remaining(), b.steps_left()))
}

/// The status text of a hunt at time `now_ms` (Unix milliseconds).
pub fn render(cfg: &HuntConfig, id: &HuntIdentity, entries: &[Entry], now_ms: i64) -> String {
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
                writeln!(o, "ended: regression not reproduced: {message}")
            }
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
    match (&state.in_flight, &last_start) {
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
    for h in &cfg.hosts {
        let busy = match (&state.in_flight, &last_start) {
            (Some(_), Some((c, Some((boot, host)), at))) if host == &h.name => {
                format!(
                    "running boot {boot} of {} for {}",
                    short(c),
                    duration((now_ms - at) as f64 / 1000.0)
                )
            }
            _ => "idle".to_owned(),
        };
        let _ = writeln!(o, "host {}: {busy}", h.name);
    }
    // Boots done and expected, for the endpoints and for the candidate under test.
    let n = cfg.classify.baseline_boots;
    let _ = writeln!(
        o,
        "baselines: good {}/{n} boots, bad {}/{n} boots; {}",
        state.values(&id.good).len(),
        state.values(&id.bad).len(),
        state.baselines.as_deref().unwrap_or("not yet confirmed")
    );
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
    let _ = writeln!(o, "verdicts: {}", state.verdicts.len());
    for (c, v, reason) in &state.verdicts {
        let _ = writeln!(o, "  {} {:<4} {reason}", short(c), v.as_str());
    }
    if state.end.is_none() {
        match remaining(cfg, id, &state) {
            Some((left, steps)) => {
                let _ = writeln!(o, "remaining range: {left} candidate(s), ~{steps} step(s)");
                let per_commit = t.build_s.unwrap_or(0.0)
                    + t.boot_s.unwrap_or(0.0)
                        * t.boots_per_commit.unwrap_or(cfg.classify.min_boots as f64);
                let baseline_left = if state.baselines.is_none() {
                    let done = state.values(&id.good).len() + state.values(&id.bad).len();
                    (2 * n as usize).saturating_sub(done) as f64 * t.boot_s.unwrap_or(0.0)
                } else {
                    0.0
                };
                if t.boot_s.is_some() {
                    let _ = writeln!(
                        o,
                        "estimated time left: ~{} (per commit: build ~{}, {:.1} boots x ~{})",
                        duration(steps as f64 * per_commit + baseline_left),
                        duration(t.build_s.unwrap_or(0.0)),
                        t.boots_per_commit.unwrap_or(cfg.classify.min_boots as f64),
                        duration(t.boot_s.unwrap_or(0.0))
                    );
                } else {
                    let _ = writeln!(o, "estimated time left: unknown until a boot has finished");
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
