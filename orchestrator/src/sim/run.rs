//! `firstbad run` in the simulator: the product's own driver and executor
//! ([`crate::hunt::driver`], [`crate::exec::drive`]) on a simulated builder and a simulated
//! host that boots the world's commits, with the hunt file's defaults. There is no hunt loop
//! here: every figure of `firstbad-run` is what the product decides.

use super::{Outcome, World, NOTHING, PHASES};
use crate::build::BuildError;
use crate::config::{ClassifyConfig, Direction};
use crate::error::HostError;
use crate::exec::{self, BootJob, Builder, Paths, Task, TestHost};
use crate::hunt::driver::{Driver, Plan, Slot};
use crate::hunt::judge::Settings;
use crate::hunt::HuntState;
use crate::journal::{BootOutcome, BuildOutcome, Event, HuntEnd, MemoryJournal, Verdict};
use crate::search::{Dag, Node};
use rand::Rng;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// World commit `i` as a commit id.
fn id(i: usize) -> String {
    format!("{i:040x}")
}

fn index(id: &str) -> usize {
    usize::from_str_radix(id, 16).expect("the simulator's ids are hex")
}

/// Builds every commit at once (the world counts the build at its first boot).
struct SimBuilder;

impl Builder for SimBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        let release = commit[..12].to_owned();
        Box::pin(async move {
            Ok(BuildOutcome::Built {
                kernel_release: release,
                image: PathBuf::new(),
                log: PathBuf::new(),
                seconds: 0.0,
                kernel_id: None,
            })
        })
    }
}

/// Boots the world's commits. One host: the order of results is the order of boots, and no
/// clock is needed.
struct SimHost(Arc<Mutex<World>>);

impl TestHost for SimHost {
    fn name(&self) -> &str {
        "sim"
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            let v = self
                .0
                .lock()
                .expect("a boot does not panic")
                .boot(index(&job.commit));
            Ok(match v {
                Some(value) => BootOutcome::Measured {
                    kernel_release: job.release,
                    boot_id: String::new(),
                    value,
                    result: firstbad_wire::WorkloadResult::empty("sim", 0.0),
                    console: PathBuf::new(),
                    boot_seconds: 0.0,
                },
                None => BootOutcome::Failed {
                    reason: "simulated boot failure".into(),
                    console: PathBuf::new(),
                    untestable: false,
                },
            })
        })
    }
}

/// The world's line from `good` (excluded) to `bad` as a candidate DAG: world commits
/// `good + 1..=bad` (node 0 is `bad`).
fn line(good: usize, bad: usize) -> Dag {
    let nodes = (good + 1..=bad)
        .rev()
        .enumerate()
        .map(|(k, i)| Node {
            id: id(i),
            parents: if i > good + 1 { vec![k + 1] } else { vec![] },
            commit_time: i as i64,
        })
        .collect();
    Dag::new(nodes).expect("a line is a DAG")
}

/// `firstbad run` on the world's history, one simulated host, the hunt file's defaults: the
/// hunt of the whole line, then of each part of the regression its culprits leave
/// ([`crate::hunt::steps`]), as the product's run goes on.
pub fn firstbad_run(w: &mut World, probe: crate::hunt::judge::RefineProbe) -> Outcome {
    firstbad_run_with(w, probe, &ClassifyConfig::defaults(), None)
}

pub use crate::hunt::phases::forecast::GivenBaselines;

/// [`firstbad_run`] with a hunt file's `[classify]` settings, and, for a forecast, the
/// baselines its first stage starts from.
pub fn firstbad_run_with(
    w: &mut World,
    probe: crate::hunt::judge::RefineProbe,
    classify: &ClassifyConfig,
    given: Option<&GivenBaselines>,
) -> Outcome {
    w.by_phase = [0; PHASES.len()];
    w.verdicts = [0; 2];
    let whole = (id(0), id(w.n));
    // Every stage's journal, in order, by stage: what a later stage carries in of its ends'
    // boots, as the kernel run reads it from its journal ([`crate::hunt::steps::earlier_events`]).
    let (mut first, journal) = stage(w, &whole, probe, classify, given, Vec::new());
    let mut earlier: Vec<(String, Event)> =
        journal.into_iter().map(|e| (String::new(), e)).collect();
    let mut plan = first.steps_plan(&whole.0, &whole.1, classify.max_culprits);
    while let Some((n, part)) = plan.next_part() {
        let carry = crate::hunt::steps::carry(&earlier, &part.good, &part.bad);
        let ends = (part.good.clone(), part.bad.clone());
        let (o, journal) = stage(w, &ends, probe, classify, None, carry);
        let name = crate::hunt::steps::stage(n);
        earlier.extend(journal.into_iter().map(|e| (name.clone(), e)));
        first.add_step(&mut plan, n, part, o);
    }
    let first = first.end_steps(plan);
    let named: Vec<usize> = std::iter::once(&first.end)
        .chain(first.steps.iter().map(|s| &s.outcome.end))
        .filter_map(|e| match e {
            HuntEnd::Found { commit } => Some(index(commit)),
            _ => None,
        })
        .collect();
    let confirmed = Some(
        first
            .confirmed_culprits()
            .iter()
            .map(|c| index(c))
            .collect(),
    );
    match &first.end {
        HuntEnd::Found { commit } => {
            let c = first.confirmation.as_ref();
            Outcome {
                culprit: Some(index(commit)),
                confidence: c.and_then(|c| c.confidence),
                // Whether the re-test's levels put part of the regression elsewhere.
                partial: c.map(|c| c.levels.is_some_and(|l| l.several())),
                culprits: named,
                confirmed,
            }
        }
        // Not reproduced, only skipped commits left, or stopped for a person (drift).
        _ => Outcome {
            confirmed,
            ..NOTHING
        },
    }
}

/// One stage of `firstbad run`: the hunt from `good` to `bad` of the world's line, starting
/// from `carry` (its ends' boots of earlier stages); its outcome and its journal.
fn stage(
    w: &mut World,
    (good, bad): &(String, String),
    probe: crate::hunt::judge::RefineProbe,
    classify: &ClassifyConfig,
    given: Option<&GivenBaselines>,
    carry: Vec<(String, Vec<crate::journal::CarriedBoot>)>,
) -> (crate::hunt::Outcome, Vec<Event>) {
    let seed = w.rng.gen::<u64>();
    let plan = Plan {
        dag: line(index(good), index(bad)),
        good: good.clone(),
        bad: bad.clone(),
        goods: vec![good.clone()],
        settings: Settings {
            classify: classify.clone(),
            direction: Direction::LowerIsBetter,
            metric: "fsync_latency_p50_ms".into(),
            split: true,
            probe,
            // The product's default; the simulator's builds have no identity to share.
            same_kernel: true,
        },
        hosts: vec![Slot {
            name: "sim".into(),
            capacity: 1,
        }],
        build_ahead: false,
        seed,
        first_parent: Box::new(|c| index(c).checked_sub(1).map(id)),
        // Simulated commits have no tree to revert.
        revert: None,
        reverting: None,
        carry,
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        // A simulated hunt is what a forecast runs: it forecasts nothing itself.
        forecast: crate::hunt::driver::Forecasting::Off,
        forecaster: super::forecast::forecast,
        kind: crate::hunt::driver::HuntKind::Measured,
    };
    let mut driver = Driver::new(plan).expect("a line is a valid range");
    // The world counts each boot in its phase 0; the journal places them ([`account`]).
    let by_phase = w.by_phase;
    let world = Arc::new(Mutex::new(w.take()));
    let host = Arc::new(SimHost(Arc::clone(&world)));
    let journal = MemoryJournal::default();
    let mut state = HuntState::default();
    if let Some(b) = given {
        for e in given_events(good, bad, b) {
            state.apply(&e);
            journal.0.borrow_mut().push(e);
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let end =
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            rt.block_on(exec::drive(
                &mut driver,
                &mut state,
                &journal,
                &SimBuilder,
                &[host],
                &Paths {
                    consoles: PathBuf::new(),
                },
            ))
        });
    *w = Arc::try_unwrap(world)
        .ok()
        .expect("the hunt has ended")
        .into_inner()
        .expect("no boot panicked");
    w.by_phase = by_phase;
    if w.baselines.is_none() && state.baselines.is_some() {
        w.baselines = Some(GivenBaselines {
            good: state.values(good),
            bad: state.values(bad),
            boots: state.baseline_boots.unwrap_or(0),
        });
    }
    let journal = journal.0.into_inner();
    account(w, &journal);
    let outcome = match end {
        Ok(end) => crate::hunt::Outcome::of(end, state.confirmation.clone()),
        // Stopped for a person (drift): nothing named.
        Err(e) => crate::hunt::Outcome::of(
            HuntEnd::NotReproduced {
                message: e.to_string(),
            },
            None,
        ),
    };
    (outcome, journal)
}

/// The journal of `b`'s boots of `good` and `bad`, and their confirmation.
fn given_events(good: &str, bad: &str, b: &GivenBaselines) -> Vec<Event> {
    let boots = |commit: &str, values: &[f64]| -> Vec<Event> {
        values
            .iter()
            .zip(1..)
            .flat_map(|(&value, boot)| {
                let (commit, host) = (commit.to_owned(), "sim".to_owned());
                [
                    Event::BootStarted {
                        commit: commit.clone(),
                        boot,
                        host: host.clone(),
                    },
                    Event::BootFinished {
                        commit: commit.clone(),
                        boot,
                        host,
                        outcome: BootOutcome::Measured {
                            kernel_release: commit[..12].to_owned(),
                            boot_id: String::new(),
                            value,
                            result: firstbad_wire::WorkloadResult::empty("sim", 0.0),
                            console: PathBuf::new(),
                            boot_seconds: 0.0,
                        },
                    },
                ]
            })
            .collect()
    };
    let mut events = boots(good, &b.good);
    events.extend(boots(bad, &b.bad));
    events.push(Event::BaselinesConfirmed {
        summary: "given".into(),
        boots: Some(b.boots),
    });
    events
}

/// Adds one stage's boots by phase, and its bisection's wrong verdicts, from its journal: boots
/// started before the baselines were confirmed are the baselines', then the bisection's until
/// its last verdict, the posterior phase's until the re-test began, the re-test's after.
fn account(w: &mut World, events: &[Event]) {
    let last_verdict = events
        .iter()
        .rposition(|e| matches!(e, Event::Verdict { .. }));
    let mut phase = 0;
    for (k, e) in events.iter().enumerate() {
        match e {
            Event::BaselinesConfirmed { .. } => phase = 1,
            Event::ConfirmStarted { .. } => phase = 3,
            Event::BootFinished { .. } => w.by_phase[phase] += 1,
            Event::Verdict {
                commit, verdict, ..
            } => {
                let truth = w.level(index(commit));
                if *verdict != Verdict::Skip && (truth == 0.0 || truth == 1.0) {
                    w.verdicts[0] += 1;
                    w.verdicts[1] += usize::from((*verdict == Verdict::Bad) != (truth == 1.0));
                }
            }
            _ => {}
        }
        if Some(k) == last_verdict && phase == 1 {
            phase = 2;
        }
    }
}
