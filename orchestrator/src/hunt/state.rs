//! The hunt's state: a fold of its journal with one [`HuntState::apply`].
//!
//! Nothing else changes a [`HuntState`]: the executor journals an event, then applies it, and
//! a resumed hunt applies the same events in the same order. So the state a rerun starts from
//! is, field for field, the state the killed run had after its last journalled event.

use crate::journal::Checkpoint;
use crate::journal::{
    BootOutcome, BuildOutcome, Entry, Event, HuntEnd, RangeInfo, TestOutcome, Verdict,
};
use crate::sequential::HostFailures;
use std::collections::{BTreeMap, HashMap};

pub use super::records::{
    BootRecord, ConfirmStart, Confirmation, DriftRecord, RevertStart, Reverted,
};

/// A step begun and not yet finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Running {
    /// A build of a commit.
    Build {
        /// The commit.
        commit: String,
    },
    /// A boot of a commit on a host.
    Boot {
        /// The commit.
        commit: String,
        /// Its boot number.
        boot: u32,
        /// The host.
        host: String,
        /// Place among the hunt's started boots.
        started: usize,
    },
    /// A run of a command hunt's command in a checkout.
    Test {
        /// The commit.
        commit: String,
        /// The checkout.
        job: u32,
        /// Whether its kill was journalled (`TestCancelled`).
        cancelled: bool,
    },
}

impl Running {
    /// The step, for a person.
    pub fn describe(&self) -> String {
        match self {
            Running::Build { commit } => format!("building {commit}"),
            Running::Boot {
                commit, boot, host, ..
            } => format!("boot {boot} of {commit} on {host}"),
            Running::Test { commit, job, .. } => format!("test of {commit} on checkout {job}"),
        }
    }
}

/// Everything the journal says about a hunt.
#[derive(Debug, Default, Clone)]
pub struct HuntState {
    /// Finished builds by commit.
    pub builds: HashMap<String, BuildOutcome>,
    /// Finished boots by commit, in order.
    pub boots: HashMap<String, Vec<BootRecord>>,
    /// Verdicts in the order they were given.
    pub verdicts: Vec<(String, Verdict, String)>,
    /// The baseline summary, once confirmed.
    pub baselines: Option<String>,
    /// Measured boots of each endpoint behind the confirmed model (the first this many).
    pub baseline_boots: Option<usize>,
    /// The forecast made once the baselines were in, when the hunt made one, and the boots
    /// finished when it was made (what the hunt spent after it is set beside it).
    pub forecast: Option<crate::journal::Forecast>,
    pub forecast_after_boots: usize,
    /// Drift checks of the good endpoint, in order.
    pub drift_checks: Vec<DriftRecord>,
    /// A drift check under way: boots started from this place on re-measure for it.
    pub drift_started: Option<usize>,
    /// The last drift check found the host moved, and no run has begun since: the hunt stops
    /// for a person (a rerun repeats the check first).
    pub drift_stop: bool,
    /// The final re-test under way: culprit, parent, and their measured boots before it.
    pub confirm: Option<ConfirmStart>,
    /// The final re-test's result.
    pub confirmation: Option<Confirmation>,
    /// The culprit's revert on top of bad under way.
    pub revert: Option<RevertStart>,
    /// What the revert recovers.
    pub reverted: Option<Reverted>,
    /// Boots (failed ones too) since the last verdict: what the posterior phase has spent.
    pub boots_since_verdict: usize,
    /// How the hunt ended, if it did.
    pub end: Option<HuntEnd>,
    /// Number of candidates at the start.
    pub candidates: Option<usize>,
    /// The steps begun and not finished, oldest first (several boots run at once on a pool).
    pub running: Vec<Running>,
    /// What the previous run was doing when it stopped, as the last `RunStarted` found it.
    pub interrupted: Vec<Running>,
    /// Boots started so far (every `BootStarted`).
    pub boots_started: usize,
    /// Range options and notes, when the hunt has any.
    pub range: Option<RangeInfo>,
    /// The commits that cannot change the kernel, once decided for this stage.
    pub pruned: Option<crate::journal::Pruning>,
    /// Hosts that left the pool, with the error that took them out.
    pub retired: Vec<(String, String)>,
    /// Finished boots of the whole hunt, carried ones included (they have their places).
    pub boots_finished: usize,
    /// Of them, boots carried in from earlier stages ([`Event::BootsCarried`]): spent there.
    pub boots_carried: usize,
    /// Runs of a command hunt's command that ended by themselves and await their verdict,
    /// oldest first: commit, checkout, how the run ended.
    pub tests_unjudged: Vec<(String, u32, TestOutcome)>,
    /// Runs of the command finished in the hunt, cancelled ones too.
    pub tests_finished: usize,
    /// Host checkpoints of boots not finished (an interrupted run's too, for taking them up
    /// again), by commit and boot number: the last of each.
    pub checkpoints: BTreeMap<(String, u32), Checkpoint>,
    /// The hosts that measured a boot, in the order of their first: more than one is a pool,
    /// whose hosts' levels [`HuntState::host_offsets`] aligns.
    pub hosts: Vec<String>,
}

impl HuntState {
    /// Derives the state from journal events: [`HuntState::apply`] on each, in order.
    pub fn replay(events: &[Entry]) -> HuntState {
        let mut s = HuntState::default();
        for e in events {
            s.apply(&e.event);
        }
        s
    }

    /// The parent the final re-test measured `culprit` against, once it has.
    pub fn retested_parent(&self, culprit: &str) -> Option<&str> {
        self.confirmation
            .as_ref()
            .filter(|c| c.commit == culprit && !c.parent.is_empty())
            .map(|c| c.parent.as_str())
    }

    /// The one way the state changes: by an event, live or replayed.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::HuntStarted { candidates } => self.candidates = Some(*candidates),
            Event::BuildStarted { commit } => self.running.push(Running::Build {
                commit: commit.clone(),
            }),
            Event::BuildFinished { commit, outcome } => {
                self.builds.insert(commit.clone(), outcome.clone());
                self.running
                    .retain(|r| !matches!(r, Running::Build { commit: c } if c == commit));
            }
            Event::BootStarted { commit, boot, host } => {
                self.running.push(Running::Boot {
                    commit: commit.clone(),
                    boot: *boot,
                    host: host.clone(),
                    started: self.boots_started,
                });
                self.boots_started += 1;
            }
            Event::BootFinished {
                commit,
                boot,
                host,
                outcome,
            } => {
                let at = self.running.iter().position(
                    |r| matches!(r, Running::Boot { commit: c, boot: b, .. } if c == commit && b == boot),
                );
                // A boot journalled as finished without a start (journals of older versions
                // always had one) counts as started where it finished.
                let started = match at.map(|i| self.running.remove(i)) {
                    Some(Running::Boot { started, .. }) => started,
                    _ => self.boots_started.saturating_sub(1),
                };
                self.checkpoints.remove(&(commit.clone(), *boot));
                self.note_host(host, outcome);
                let seq = self.boots_finished;
                self.boots_finished += 1;
                self.boots
                    .entry(commit.clone())
                    .or_default()
                    .push(BootRecord {
                        boot: *boot,
                        seq,
                        started,
                        host: host.clone(),
                        outcome: outcome.clone(),
                        pressure: None,
                    });
                self.boots_since_verdict += 1;
            }
            Event::BootsCarried { commit, boots } => {
                // The stage's first boots of `commit`, in the order they finished.
                for b in boots {
                    self.note_host(&b.host, &b.outcome);
                    let (seq, started) = (self.boots_finished, self.boots_started);
                    self.boots_finished += 1;
                    self.boots_started += 1;
                    self.boots_carried += 1;
                    self.boots
                        .entry(commit.clone())
                        .or_default()
                        .push(BootRecord {
                            boot: b.boot,
                            seq,
                            started,
                            host: b.host.clone(),
                            outcome: b.outcome.clone(),
                            pressure: None,
                        });
                }
            }
            Event::BaselinesConfirmed { summary, boots } => {
                self.baselines = Some(summary.clone());
                self.baseline_boots = *boots;
            }
            Event::Forecast(f) => {
                self.forecast = Some(f.clone());
                self.forecast_after_boots = self.boots_finished;
            }
            Event::DriftCheckStarted => self.drift_started = Some(self.boots_started),
            Event::DriftCheck {
                after_verdicts,
                in_refine_after,
                drifted,
                summary,
            } => {
                self.drift_started = None;
                self.drift_stop = *drifted;
                self.drift_checks.push(DriftRecord {
                    after_verdicts: *after_verdicts,
                    in_refine_after: *in_refine_after,
                    drifted: *drifted,
                    summary: summary.clone(),
                })
            }
            Event::ConfirmStarted { commit, parent } => {
                self.confirm = Some(ConfirmStart {
                    commit: commit.clone(),
                    parent: parent.clone(),
                    commit_before: self.values(commit).len(),
                    parent_before: self.values(parent).len(),
                    started_before: self.boots_started,
                })
            }
            Event::Confirmation {
                commit,
                parent,
                confidence,
                confirmed,
                summary,
                levels,
            } => {
                self.confirmation = Some(Confirmation {
                    commit: commit.clone(),
                    confidence: *confidence,
                    confirmed: *confirmed,
                    summary: summary.clone(),
                    parent: parent.clone(),
                    levels: *levels,
                })
            }
            Event::RevertStarted {
                commit, with, made, ..
            } => {
                self.revert = Some(RevertStart {
                    commit: commit.clone(),
                    with: with.clone(),
                    made: made.clone(),
                    started_before: self.boots_started,
                })
            }
            Event::Reverted {
                commit,
                with,
                revert,
                level,
                recovers,
                summary,
            } => {
                self.reverted = Some(Reverted {
                    commit: commit.clone(),
                    with: with.clone(),
                    revert: revert.clone(),
                    level: *level,
                    recovers: *recovers,
                    summary: summary.clone(),
                })
            }
            Event::Verdict {
                commit,
                verdict,
                reason,
            } => {
                self.verdicts
                    .push((commit.clone(), *verdict, reason.clone()));
                self.boots_since_verdict = 0;
                self.tests_unjudged.retain(|(c, ..)| c != commit);
            }
            Event::Finished { end } => self.end = Some(end.clone()),
            Event::Range(r) => self.range = Some(r.clone()),
            Event::Pruned(p) => self.pruned = Some(p.clone()),
            Event::BootPressure {
                commit,
                boot,
                host,
                pressure,
            } => {
                if let Some(r) = self.boots.get_mut(commit).and_then(|b| {
                    b.iter_mut()
                        .rev()
                        .find(|r| r.boot == *boot && r.host == *host)
                }) {
                    r.pressure = Some(*pressure);
                }
            }
            Event::HostRetired { host, reason } => {
                self.retired.push((host.clone(), reason.clone()))
            }
            Event::HostRestored { host } => self.retired.retain(|(h, _)| h != host),
            Event::HostCheckpoint {
                commit,
                boot,
                host,
                data,
            } => {
                self.checkpoints.insert(
                    (commit.clone(), *boot),
                    Checkpoint {
                        host: host.clone(),
                        data: data.clone(),
                    },
                );
            }
            Event::FarmJob {
                commit,
                boot,
                host,
                token,
                job,
            } => {
                self.checkpoints.insert(
                    (commit.clone(), *boot),
                    Checkpoint {
                        host: host.clone(),
                        data: serde_json::json!({ "token": token, "job": job }),
                    },
                );
            }
            Event::RunStarted { .. } => {
                // Nothing of the earlier run is still running: its steps are redone.
                self.interrupted = std::mem::take(&mut self.running);
                // A drift check cut short goes on with the boots it has; one that found the
                // host moved is repeated first (a person has looked at the host).
                self.drift_stop = false;
                // A run that said nothing about its commit (the command not found, killed
                // from outside) stopped the last run; this one tests that commit again.
                self.tests_unjudged
                    .retain(|(_, _, o)| super::phases::exact::speaks(o));
            }
            Event::TestStarted { commit, job } => self.running.push(Running::Test {
                commit: commit.clone(),
                job: *job,
                cancelled: false,
            }),
            Event::TestCancelled { commit, job } => {
                for r in &mut self.running {
                    if let Running::Test {
                        commit: c,
                        job: j,
                        cancelled,
                    } = r
                    {
                        if c == commit && j == job {
                            *cancelled = true;
                        }
                    }
                }
            }
            Event::TestFinished {
                commit,
                job,
                outcome,
            } => {
                self.running.retain(
                    |r| !matches!(r, Running::Test { commit: c, job: j, .. } if c == commit && j == job),
                );
                self.tests_finished += 1;
                if !outcome.cancelled {
                    self.tests_unjudged
                        .push((commit.clone(), *job, outcome.clone()));
                }
            }
        }
    }

    /// The steps begun and not finished, joined, for a person.
    pub fn in_flight(&self) -> Option<String> {
        let steps = if self.running.is_empty() {
            &self.interrupted
        } else {
            &self.running
        };
        (!steps.is_empty()).then(|| {
            steps
                .iter()
                .map(Running::describe)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// The measured values of a commit's boots, as the statistics read them: on a pool, each
    /// host's level aligned to the reference host's ([`HuntState::host_offsets`]).
    pub fn values(&self, commit: &str) -> Vec<f64> {
        self.timed(commit).into_iter().map(|b| b.0).collect()
    }

    /// The measured values of a commit's boots as the hosts reported them: what a report
    /// shows beside each boot.
    pub fn raw_values(&self, commit: &str) -> Vec<f64> {
        self.measured(commit).map(|(v, _, _)| v).collect()
    }

    /// The measured boots of a commit as (value, boot time): the time is the boot's place
    /// among all of the hunt's finished boots, which the posterior's trend model reads. On a
    /// pool, each value is read on the reference host's level ([`HuntState::host_offsets`]).
    pub fn timed(&self, commit: &str) -> Vec<(f64, f64)> {
        let offsets = self.host_offsets();
        self.measured(commit)
            .map(|(v, t, host)| {
                let off = offsets
                    .iter()
                    .find(|(h, _)| h == host)
                    .map_or(0.0, |(_, o)| *o);
                (if off == 0.0 { v } else { v * (-off).exp() }, t)
            })
            .collect()
    }

    /// A commit's measured boots: value, boot time (place among the finished boots), host.
    fn measured<'a>(&'a self, commit: &str) -> impl Iterator<Item = (f64, f64, &'a str)> + 'a {
        self.boots
            .get(commit)
            .into_iter()
            .flatten()
            .filter_map(|r| match &r.outcome {
                BootOutcome::Measured { value, .. } => {
                    Some((*value, r.seq as f64, r.host.as_str()))
                }
                BootOutcome::Failed { .. } => None,
            })
    }

    /// Each host's level against the reference host's, on the log scale (issue 56): the
    /// median, over the commits measured on both, of the difference of their medians there
    /// (the endpoints' interleaved baselines give every host of a pool such commits). The
    /// reference is the host with the most measured boots (the first on a tie). Two VMs of a
    /// pool beside each other on one machine differed by 3.8 against 6.8 ms for one kernel;
    /// read as one host, that difference looked like the host moving and the posterior gave a
    /// ×17 regression's culprit 56%. Empty for one host (no alignment), and when a value is
    /// not positive (a metric that is not a time or a rate: nothing to take a log of).
    pub fn host_offsets(&self) -> Vec<(String, f64)> {
        if self.hosts.len() < 2 {
            return Vec::new();
        }
        // Per commit, per host: the median log value.
        let mut centres: Vec<(&str, &str, f64)> = Vec::new();
        let mut counts: Vec<usize> = vec![0; self.hosts.len()];
        let mut commits: Vec<&String> = self.boots.keys().collect();
        commits.sort();
        for c in commits {
            for (i, h) in self.hosts.iter().enumerate() {
                let logs: Option<Vec<f64>> = self
                    .measured(c)
                    .filter(|(_, _, host)| *host == h)
                    .map(|(v, _, _)| (v > 0.0 && v.is_finite()).then(|| v.ln()))
                    .collect();
                let Some(logs) = logs else {
                    return Vec::new();
                };
                counts[i] += logs.len();
                if !logs.is_empty() {
                    centres.push((c, h, crate::stats::median(&logs)));
                }
            }
        }
        let reference = (0..self.hosts.len())
            .max_by_key(|&i| (counts[i], std::cmp::Reverse(i)))
            .map(|i| self.hosts[i].as_str())
            .expect("two hosts or more");
        self.hosts
            .iter()
            .filter(|h| h.as_str() != reference)
            .map(|h| {
                let diffs: Vec<f64> = centres
                    .iter()
                    .filter(|(_, host, _)| host == h)
                    .filter_map(|(c, _, m)| {
                        centres
                            .iter()
                            .find(|(c2, host2, _)| c2 == c && *host2 == reference)
                            .map(|(_, _, r)| m - r)
                    })
                    .collect();
                let off = if diffs.is_empty() {
                    0.0
                } else {
                    crate::stats::median(&diffs)
                };
                (h.clone(), off)
            })
            .collect()
    }

    /// Notes a host that measured a boot ([`HuntState::hosts`]).
    fn note_host(&mut self, host: &str, outcome: &BootOutcome) {
        if matches!(outcome, BootOutcome::Measured { .. }) && !self.hosts.iter().any(|h| h == host)
        {
            self.hosts.push(host.to_owned());
        }
    }

    /// The failure reasons of a commit's boots.
    pub fn failures(&self, commit: &str) -> Vec<String> {
        self.boots
            .get(commit)
            .map(|b| {
                b.iter()
                    .filter_map(|r| match &r.outcome {
                        BootOutcome::Failed { reason, .. } => Some(reason.clone()),
                        BootOutcome::Measured { .. } => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Why `commit` cannot be tested, if one of its runs said so (exit 125).
    pub fn untestable(&self, commit: &str) -> Option<String> {
        self.boots
            .get(commit)?
            .iter()
            .find_map(|r| match &r.outcome {
                BootOutcome::Failed {
                    reason,
                    untestable: true,
                    ..
                } => Some(reason.clone()),
                _ => None,
            })
    }

    /// The endpoints' failed boots and all their boots: how often the hosts fail a boot
    /// whatever is booted, which sets how many failures skip a commit
    /// ([`crate::sequential::failures_allowed`]).
    pub fn host_failures(&self, endpoints: &[&str]) -> HostFailures {
        endpoints
            .iter()
            .fold(HostFailures::default(), |mut host, endpoint| {
                host.failed += self.failures(endpoint).len();
                host.boots += self.boots.get(*endpoint).map_or(0, Vec::len);
                host
            })
    }

    /// The number of the next boot of `commit` on `host`: the number of a boot an earlier run
    /// left a checkpoint of there and nobody runs now (the host takes that boot up again),
    /// else [`HuntState::next_boot_number`].
    pub fn boot_number_on(&self, commit: &str, host: &str) -> u32 {
        self.checkpoints
            .iter()
            .find(|((c, b), r)| {
                c == commit
                    && r.host == host
                    && !self.running.iter().any(|x| {
                        matches!(x, Running::Boot { commit: rc, boot: rb, .. } if rc == c && rb == b)
                    })
            })
            .map(|((_, b), _)| *b)
            .unwrap_or_else(|| self.next_boot_number(commit))
    }

    /// The number the next boot of `commit` gets: one past the highest boot finished or
    /// running, so that boots finishing out of order (several hosts) never share a number, and
    /// a boot cut by `kill -9` is redone under its own number.
    pub fn next_boot_number(&self, commit: &str) -> u32 {
        let finished = self
            .boots
            .get(commit)
            .and_then(|b| b.iter().map(|r| r.boot).max())
            .unwrap_or(0);
        let running = self
            .running
            .iter()
            .filter_map(|r| match r {
                Running::Boot {
                    commit: c, boot, ..
                } if c == commit => Some(*boot),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        finished.max(running) + 1
    }

    /// Every boot this stage finished (boots carried in were spent where they were measured).
    pub fn total_boots(&self) -> usize {
        self.boots_finished - self.boots_carried
    }

    /// Boots finished since the forecast was made (failed ones too): what the hunt spent
    /// against it.
    pub fn boots_since_forecast(&self) -> usize {
        self.boots_finished - self.forecast_after_boots
    }

    /// The place among the hunt's started boots of the last boot of `commit` started, finished
    /// or running.
    pub fn last_started(&self, commit: &str) -> Option<usize> {
        let done = self
            .boots
            .get(commit)
            .into_iter()
            .flatten()
            .map(|r| r.started);
        let running = self.running.iter().filter_map(|r| match r {
            Running::Boot {
                commit: c, started, ..
            } if c == commit => Some(*started),
            _ => None,
        });
        done.chain(running).max()
    }

    /// Boots of `commit` running now.
    pub fn running_boots(&self, commit: &str) -> usize {
        self.running
            .iter()
            .filter(|r| matches!(r, Running::Boot { commit: c, .. } if c == commit))
            .count()
    }

    /// Boots running now, of any commit.
    pub fn running_boots_all(&self) -> usize {
        self.running
            .iter()
            .filter(|r| matches!(r, Running::Boot { .. }))
            .count()
    }

    /// Boots running now on `host`.
    pub fn running_on(&self, host: &str) -> usize {
        self.running
            .iter()
            .filter(|r| matches!(r, Running::Boot { host: h, .. } if h == host))
            .count()
    }

    /// The runs of a command hunt's command under way: commit, checkout, and whether their
    /// kill is journalled.
    pub fn running_tests(&self) -> impl Iterator<Item = (&str, u32, bool)> + '_ {
        self.running.iter().filter_map(|r| match r {
            Running::Test {
                commit,
                job,
                cancelled,
            } => Some((commit.as_str(), *job, *cancelled)),
            _ => None,
        })
    }

    /// Whether a build is running, and of which commit.
    pub fn building(&self) -> Option<&str> {
        self.running.iter().find_map(|r| match r {
            Running::Build { commit } => Some(commit.as_str()),
            Running::Boot { .. } | Running::Test { .. } => None,
        })
    }

    /// Whether any boot is running.
    pub fn booting(&self) -> bool {
        self.running
            .iter()
            .any(|r| matches!(r, Running::Boot { .. }))
    }

    /// The boots of `commit` started at or after place `from` (finished ones), and how many
    /// of them are still running.
    pub fn boots_since(&self, commit: &str, from: usize) -> (Vec<&BootRecord>, usize) {
        let done = self
            .boots
            .get(commit)
            .into_iter()
            .flatten()
            .filter(|r| r.started >= from)
            .collect();
        let running = self
            .running
            .iter()
            .filter(|r| {
                matches!(r, Running::Boot { commit: c, started, .. } if c == commit && *started >= from)
            })
            .count();
        (done, running)
    }

    /// Whether `commit` already has a verdict.
    pub fn has_verdict(&self, commit: &str) -> bool {
        self.verdicts.iter().any(|(c, _, _)| c == commit)
    }
}

#[cfg(test)]
impl HuntState {
    /// A boot of `commit` on host "h" that measured `value`, started and finished as the
    /// journal records one: for the tests of what reads a hunt's boots.
    pub(crate) fn record_boot(&mut self, commit: &str, value: f64) {
        let boot = self.boots.get(commit).map_or(1, |b| b.len() as u32 + 1);
        self.apply(&Event::BootStarted {
            commit: commit.into(),
            boot,
            host: "h".into(),
        });
        self.apply(&Event::BootFinished {
            commit: commit.into(),
            boot,
            host: "h".into(),
            outcome: BootOutcome::Measured {
                kernel_release: String::new(),
                boot_id: String::new(),
                value,
                result: firstbad_wire::WorkloadResult::empty("test", 0.0),
                console: std::path::PathBuf::new(),
                boot_seconds: 0.0,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    // Issue 30: a farm's job is the boot's host checkpoint, one event kind for every host; a
    // journal written before (farm-job events) resumes with the same checkpoints.
    #[test]
    fn host_checkpoints_and_the_farm_jobs_of_older_journals_are_one_record_per_boot() {
        let mut s = HuntState::default();
        s.apply(&Event::FarmJob {
            commit: "c1".into(),
            boot: 2,
            host: "farm".into(),
            token: "fb-c1-2-x".into(),
            job: None,
        });
        s.apply(&Event::HostCheckpoint {
            commit: "c2".into(),
            boot: 1,
            host: "farm".into(),
            data: serde_json::json!({ "token": "fb-c2-1-y", "job": "12" }),
        });
        let c1 = &s.checkpoints[&("c1".to_owned(), 2)];
        assert_eq!(c1.data["token"], "fb-c1-2-x");
        assert_eq!(c1.job(), None, "no id yet");
        assert_eq!(s.checkpoints[&("c2".to_owned(), 1)].job(), Some("12"));
        // The boot is taken up again under its number on its host, and nowhere else.
        assert_eq!(s.boot_number_on("c1", "farm"), 2);
        assert_eq!(s.boot_number_on("c1", "vm1"), 1);
        s.apply(&Event::BootFinished {
            commit: "c2".into(),
            boot: 1,
            host: "farm".into(),
            outcome: failed("farm"),
        });
        assert!(
            !s.checkpoints.contains_key(&("c2".to_owned(), 1)),
            "a finished boot needs none"
        );
    }

    fn failed(host: &str) -> BootOutcome {
        BootOutcome::Failed {
            reason: format!("boot timeout on {host}"),
            console: PathBuf::new(),
            untestable: false,
        }
    }

    #[test]
    fn a_resume_forgets_what_was_running_and_numbers_the_redone_boot_anew() {
        let mut s = HuntState::default();
        for e in [
            Event::BootStarted {
                commit: "a".into(),
                boot: 1,
                host: "vm1".into(),
            },
            Event::BootStarted {
                commit: "a".into(),
                boot: 2,
                host: "vm2".into(),
            },
            Event::BootFinished {
                commit: "a".into(),
                boot: 2,
                host: "vm2".into(),
                outcome: failed("vm2"),
            },
        ] {
            s.apply(&e);
        }
        assert_eq!(s.running_boots("a"), 1);
        assert_eq!(
            s.next_boot_number("a"),
            3,
            "past the running boot 1 and the finished 2"
        );
        assert_eq!(s.boots["a"][0].started, 1, "boot 2 was the second started");
        s.apply(&Event::RunStarted {
            tuning: Default::default(),
        });
        assert!(s.running.is_empty());
        assert_eq!(s.in_flight().as_deref(), Some("boot 1 of a on vm1"));
        assert_eq!(s.next_boot_number("a"), 3);
    }

    /// A boot's pressure lands on its record, and a pool is aligned on its reference host.
    #[test]
    fn a_boot_s_pressure_lands_on_its_record_and_a_pool_s_levels_are_aligned() {
        use crate::journal::HostPressure;
        let mut s = HuntState::default();
        let measured = |value: f64| BootOutcome::Measured {
            kernel_release: "r".into(),
            boot_id: "b".into(),
            value,
            result: firstbad_wire::WorkloadResult::empty("fsync-latency", 1.0),
            console: "c".into(),
            boot_seconds: 1.0,
        };
        let boot = |s: &mut HuntState, c: &str, n: u32, h: &str, v: f64| {
            s.apply(&Event::BootStarted {
                commit: c.into(),
                boot: n,
                host: h.into(),
            });
            s.apply(&Event::BootFinished {
                commit: c.into(),
                boot: n,
                host: h.into(),
                outcome: measured(v),
            });
        };
        // One host: values as measured.
        boot(&mut s, "good", 1, "vm1", 4.0);
        boot(&mut s, "good", 2, "vm1", 4.4);
        assert!(s.host_offsets().is_empty());
        assert_eq!(s.values("good"), vec![4.0, 4.4]);
        let p = HostPressure {
            cpu: Some(0.5),
            io: Some(0.1),
            memory: None,
            seconds: 12.0,
        };
        s.apply(&Event::BootPressure {
            commit: "good".into(),
            boot: 2,
            host: "vm1".into(),
            pressure: p,
        });
        assert_eq!(s.boots["good"][1].pressure, Some(p));
        assert_eq!(s.boots["good"][0].pressure, None);
        // A second host twice as slow: read on vm1's level, reported as measured.
        boot(&mut s, "good", 3, "vm2", 8.0);
        boot(&mut s, "good", 4, "vm2", 8.8);
        boot(&mut s, "bad", 1, "vm1", 40.0);
        boot(&mut s, "bad", 2, "vm2", 80.0);
        let offsets = s.host_offsets();
        assert_eq!(offsets.len(), 1);
        assert!((offsets[0].1 - 2f64.ln()).abs() < 1e-9, "{offsets:?}");
        let aligned = s.values("good");
        assert!(
            (aligned[2] - 4.0).abs() < 1e-9 && (aligned[3] - 4.4).abs() < 1e-9,
            "{aligned:?}"
        );
        assert_eq!(s.raw_values("good"), vec![4.0, 4.4, 8.0, 8.8]);
    }
}
