//! The hunt engine on fake parts, in the manner of syzkaller's pkg/bisect test environment:
//! the real driver and the real executor, a real SQLite journal, and a fake builder and fake
//! hosts on tokio's virtual clock (so that the order in which results arrive reproduces).
//! The fakes stand for what cannot be booted in milliseconds; tests/e2e.rs runs the same
//! engine on real kernels and qemu.
//!
//! A fake commit `i` of a line of `N` commits is good below the culprit and bad from it on;
//! a boot's value depends only on the commit and its boot number, so a resumed hunt that
//! boots the same commit under the same number sees the same value.

use firstbad::build::revert::RevertMade;
use firstbad::build::BuildError;
use firstbad::config::{ClassifyConfig, ClassifyMode, Direction};
use firstbad::exec::{self, BootJob, Builder, Paths, Task, TestHost};
use firstbad::hosts::HostError;
use firstbad::hunt::driver::{Driver, Forecasting, HuntKind, Plan, Slot, StopReason};
use firstbad::hunt::judge::Settings;
use firstbad::hunt::prelude::begin_or_resume;
use firstbad::hunt::{end_code, HuntError, HuntState};
use firstbad::journal::{
    BootOutcome, BuildOutcome, Event, HuntEnd, HuntIdentity, Journal, Recovers,
};
use firstbad::search::{Dag, Node};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const N: usize = 40;

/// Commit `i` of the fake line (0 is the good endpoint, `N` the bad one).
fn id(i: usize) -> String {
    format!("{:040x}", 0x00c0_ffee_0000_usize + i)
}

fn index(id: &str) -> usize {
    usize::from_str_radix(id, 16).expect("hex") - 0x00c0_ffee_0000
}

/// The fake revert of commit `c` on top of the bad endpoint is commit `REVERTS + c`: it
/// measures like good when `c` is the culprit, like bad otherwise.
const REVERTS: usize = 1000;

/// The reverter of the plan's: every revert applies (a fake of `build::revert`, which
/// tests/e2e.rs runs on the real tree).
fn fake_revert(culprits: &[String], _onto: &str) -> RevertMade {
    RevertMade::Applied {
        revert: id(REVERTS + index(&culprits[0])),
    }
}

/// What the fake commits measure like.
#[derive(Clone)]
struct World {
    culprit: usize,
    /// Δ/σ of the regression.
    d: f64,
    /// Commits that do not build.
    broken: HashSet<usize>,
    /// Commits whose every boot fails.
    unbootable: HashSet<usize>,
    /// From this many finished boots of the good endpoint on, it measures like bad (a host
    /// that moved).
    good_moves_after: Option<usize>,
    /// The commits that change the kernel, when builds have identities: every other commit
    /// builds its parent's kernel (apart from the release string). `None`: no identities.
    kernel_changes: Option<Vec<usize>>,
    /// A commit whose boots the host runs this share of the way to bad slower (a loaded host in
    /// the minutes it is booted).
    slow: Option<(usize, f64)>,
    /// A second step: from this commit on the line measures like bad, and between the culprit
    /// and it at this share of the way (a regression in two steps).
    second: Option<(usize, f64)>,
}

impl World {
    fn new(culprit: usize) -> World {
        World {
            culprit,
            d: 8.0,
            broken: HashSet::new(),
            unbootable: HashSet::new(),
            good_moves_after: None,
            kernel_changes: None,
            slow: None,
            second: None,
        }
    }

    /// The identity of commit `i`'s kernel: the kernel changes at or below it; a revert's,
    /// those of the bad endpoint but the reverted commit's.
    fn kernel_id(&self, i: usize) -> Option<String> {
        let changes = self.kernel_changes.as_ref()?;
        let has = |c: usize| match i.checked_sub(REVERTS) {
            Some(reverted) => c != reverted,
            None => c <= i,
        };
        Some(
            changes
                .iter()
                .filter(|&&c| has(c))
                .map(|c| format!("{c}."))
                .collect(),
        )
    }

    /// Boot `boot` of commit `i`: a value with 10% noise, the same for the same boot.
    fn value(&self, i: usize, boot: u32) -> f64 {
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64((i as u64) << 20 | u64::from(boot));
        let z: f64 = (0..12).map(|_| rng.gen::<f64>()).sum::<f64>() - 6.0;
        let moved = i == 0 && self.good_moves_after.is_some_and(|k| boot as usize > k);
        let level = if i >= REVERTS {
            f64::from(u8::from(i - REVERTS != self.culprit))
        } else {
            match self.second {
                Some((at, share)) if i >= self.culprit && i < at => share,
                _ => f64::from(u8::from(i >= self.culprit || moved)),
            }
        };
        let slow = self.slow.filter(|&(c, _)| c == i).map_or(0.0, |(_, x)| x);
        35.0 * (1.0 + 0.1 * (self.d * (level + slow) + z))
    }
}

struct FakeBuilder {
    world: World,
    dir: PathBuf,
    builds: AtomicUsize,
}

impl Builder for FakeBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        let i = index(commit);
        self.builds.fetch_add(1, Ordering::SeqCst);
        let broken = self.world.broken.contains(&i);
        let image = self.dir.join(format!("{commit}.bzImage"));
        let log = self.dir.join(format!("{commit}.log"));
        let kernel_release = format!("6.1.0-{}", &commit[..12]);
        let kernel_id = self.world.kernel_id(i);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(if broken {
                BuildOutcome::Failed {
                    log,
                    error_lines: vec!["fs/ext4/fsync.c:1:1: error: expected ';'".into()],
                }
            } else {
                std::fs::write(&image, b"kernel").expect("temp dir");
                BuildOutcome::Built {
                    kernel_release,
                    image,
                    log,
                    seconds: 30.0,
                    kernel_id,
                }
            })
        })
    }
}

struct FakeHost {
    name: String,
    world: World,
    /// Virtual seconds a boot takes.
    seconds: u64,
    /// After this many boots the host fails with a host error (it needs a person).
    dies_after: Option<usize>,
    /// Every value this host measures is this many times the world's (a VM of a pool whose
    /// level is its own: beside the other VM on one machine, 3.8 against 6.8 ms for one kernel).
    scale: f64,
    boots: AtomicUsize,
    busy: Mutex<Duration>,
}

impl FakeHost {
    fn new(name: &str, world: &World, seconds: u64) -> Arc<FakeHost> {
        Arc::new(FakeHost {
            name: name.into(),
            world: world.clone(),
            seconds,
            dies_after: None,
            scale: 1.0,
            boots: AtomicUsize::new(0),
            busy: Mutex::new(Duration::ZERO),
        })
    }
}

impl TestHost for FakeHost {
    fn name(&self) -> &str {
        &self.name
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            let n = self.boots.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(self.seconds)).await;
            *self.busy.lock().unwrap() += Duration::from_secs(self.seconds);
            if self.dies_after.is_some_and(|k| n >= k) {
                return Err(HostError::NeedsPerson {
                    host: self.name.clone(),
                    why: "no answer on its console after a power cycle".into(),
                });
            }
            let i = index(&job.commit);
            if self.world.unbootable.contains(&i) {
                return Ok(BootOutcome::Failed {
                    reason: "kernel panic: VFS: Unable to mount root fs".into(),
                    console: job.console,
                    untestable: false,
                });
            }
            let value = self.scale * self.world.value(i, job.boot);
            Ok(BootOutcome::Measured {
                kernel_release: job.release,
                boot_id: format!("{}-{}", job.commit, job.boot),
                value,
                result: firstbad_wire::WorkloadResult {
                    kind: "fsync-latency".into(),
                    series: Default::default(),
                    metrics: BTreeMap::from([("p50".to_owned(), value)]),
                    unavailable: Default::default(),
                    duration_s: 1.0,
                    system: None,
                    vmstat: Vec::new(),
                },
                console: job.console,
                boot_seconds: 1.0,
            })
        })
    }
}

fn classify(mode: ClassifyMode) -> ClassifyConfig {
    ClassifyConfig {
        mode,
        ..ClassifyConfig::defaults()
    }
}

/// A line of `N` candidates after the good endpoint (commit 0): node 0 is the bad commit.
fn line() -> Dag {
    let nodes = (1..=N)
        .rev()
        .enumerate()
        .map(|(k, i)| Node {
            id: id(i),
            parents: if i > 1 { vec![k + 1] } else { vec![] },
            commit_time: 1_700_000_000 + i as i64,
        })
        .collect();
    Dag::new(nodes).expect("a line is a DAG")
}

fn plan(classify: ClassifyConfig, hosts: &[&FakeHost]) -> Plan {
    Plan {
        dag: line(),
        good: id(0),
        bad: id(N),
        goods: vec![id(0)],
        settings: Settings {
            classify,
            direction: Direction::LowerIsBetter,
            metric: "p50".into(),
            split: true,
            probe: Default::default(),
            same_kernel: true,
        },
        hosts: hosts
            .iter()
            .map(|h| Slot {
                name: h.name.clone(),
                capacity: 1,
            })
            .collect(),
        build_ahead: false,
        seed: 42,
        first_parent: Box::new(|c| index(c).checked_sub(1).map(id)),
        revert: Some(Box::new(fake_revert)),
        reverting: None,
        carry: Vec::new(),
        kind: HuntKind::Measured,
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        forecast: Forecasting::Off,
        forecaster: firstbad::sim::forecast::forecast,
    }
}

/// A hunt's parts: the journal in a temp dir, the builder, the hosts.
struct Bench {
    dir: tempfile::TempDir,
    builder: FakeBuilder,
    hosts: Vec<Arc<FakeHost>>,
    classify: ClassifyConfig,
    build_ahead: bool,
    forecast: Forecasting,
    revert: fn(&[String], &str) -> RevertMade,
}

impl Bench {
    fn new(world: &World, hosts: Vec<Arc<FakeHost>>, classify: ClassifyConfig) -> Bench {
        let dir = tempfile::tempdir().expect("temp dir");
        Bench {
            builder: FakeBuilder {
                world: world.clone(),
                dir: dir.path().to_owned(),
                builds: AtomicUsize::new(0),
            },
            dir,
            hosts,
            classify,
            build_ahead: false,
            forecast: Forecasting::Off,
            revert: fake_revert,
        }
    }

    fn journal(&self) -> PathBuf {
        self.dir.path().join("journal.sqlite")
    }

    /// Forecasts the journal holds.
    fn forecasts(&self) -> usize {
        Journal::open(&self.journal())
            .expect("journal")
            .events()
            .expect("events")
            .iter()
            .filter(|e| matches!(e.event, Event::Forecast(_)))
            .count()
    }

    /// Runs (or resumes) the hunt on the journal: its end and exit code, and the state.
    async fn run(&self) -> (Result<HuntEnd, HuntError>, u8, HuntState) {
        let journal = Journal::open(&self.journal()).expect("journal");
        let plan = plan(
            self.classify.clone(),
            &self.hosts.iter().map(|h| h.as_ref()).collect::<Vec<_>>(),
        );
        let mut plan = plan;
        plan.build_ahead = self.build_ahead;
        plan.forecast = self.forecast;
        plan.revert = Some(Box::new(self.revert));
        let mut meaning = BTreeMap::new();
        meaning.insert("classify.mode".to_owned(), "fake".to_owned());
        let identity = HuntIdentity {
            good: id(0),
            bad: id(N),
            fingerprint: "fake".into(),
            meaning,
        };
        begin_or_resume(
            &journal,
            &identity,
            self.dir.path(),
            &plan.dag,
            &plan.goods,
            None,
        )
        .expect("a fresh or matching journal");
        let mut state = HuntState::replay(&journal.events().expect("events"));
        let run = Event::RunStarted {
            tuning: BTreeMap::new(),
        };
        journal.append(&run).expect("append");
        state.apply(&run);
        let mut driver = Driver::new(plan).expect("a valid range");
        let paths = Paths {
            consoles: self.dir.path().to_owned(),
        };
        let end = exec::drive(
            &mut driver,
            &mut state,
            &journal,
            &self.builder,
            &self.hosts,
            &paths,
        )
        .await;
        let code = match &end {
            Ok(end) => end_code(end, state.confirmation.as_ref()),
            Err(e) => e.exit_code(),
        };
        (end, code, state)
    }
}

fn found(end: &Result<HuntEnd, HuntError>) -> Option<usize> {
    match end {
        Ok(HuntEnd::Found { commit }) => Some(index(commit)),
        _ => None,
    }
}

async fn hunt(world: &World, mode: ClassifyMode) -> (Result<HuntEnd, HuntError>, u8, HuntState) {
    let bench = Bench::new(world, vec![FakeHost::new("vm1", world, 10)], classify(mode));
    bench.run().await
}

#[tokio::test(start_paused = true)]
async fn baselines_mode_names_and_confirms_the_culprit() {
    let world = World::new(23);
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!(found(&end), Some(23), "{end:?}");
    assert_eq!(code, 0, "{:?}", state.confirmation);
    let c = state.confirmation.as_ref().expect("confirmed");
    assert!(
        c.confirmed && c.confidence.unwrap() >= 0.95,
        "{}",
        c.summary
    );
    assert!(
        c.summary.contains("each beside a boot of good and of bad"),
        "{}",
        c.summary
    );
    // Issue 34: the culprit reverted on top of bad measures like good, in rounds beside good
    // and bad after the re-test, and the hunt ends after it.
    let r = state
        .reverted
        .as_ref()
        .expect("the culprit was reverted on top of bad");
    assert_eq!(r.revert, Some(id(REVERTS + 23)));
    assert_eq!(r.recovers, Recovers::All, "{}", r.summary);
    assert!(
        r.level.is_some_and(|l| l.level.abs() < 0.5),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("all of it"), "{}", r.summary);
    let rounds = state.values(&id(REVERTS + 23)).len();
    assert!((3..=8).contains(&rounds), "{rounds} boots of the revert");
}

/// A revert that builds good's kernel recovers all of the regression with no boot of its
/// own (issue 33: never boot a commit that cannot change the kernel); one whose kernel is
/// neither endpoint's is booted in rounds as before.
#[tokio::test(start_paused = true)]
async fn a_revert_that_builds_good_s_kernel_is_not_booted() {
    let mut world = World::new(23);
    world.kernel_changes = Some(vec![23]);
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    let revert = id(REVERTS + 23);
    let r = state.reverted.as_ref().expect("the revert's outcome");
    assert_eq!(r.recovers, Recovers::All, "{}", r.summary);
    assert_eq!(r.level.map(|l| (l.lo, l.hi)), Some((0.0, 0.0)));
    assert!(
        r.summary.contains("builds the kernel of the good endpoint")
            && r.summary.contains("not booted"),
        "{}",
        r.summary
    );
    assert!(state.builds.contains_key(&revert), "built for its identity");
    assert!(!state.boots.contains_key(&revert), "and never booted");

    world.kernel_changes = Some(vec![10, 23]);
    let (end, _, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!(found(&end), Some(23), "{end:?}");
    let r = state.reverted.as_ref().expect("the revert's outcome");
    assert_eq!(r.recovers, Recovers::All, "{}", r.summary);
    assert!(r.summary.contains("interleaved round"), "{}", r.summary);
    assert!(state.values(&revert).len() >= 3);
}

/// A culprit's parent that builds good's kernel sits at good by identity: its re-test rounds,
/// run slow by the host (30% of the way to bad), place no part of the regression before it.
/// The demo's parent is good's kernel, and under load its three boots once read 10% of the
/// way and sent a run after a part that is not there (tests/e2e.rs, exit 4).
/// (With a later commit that changes the kernel, so that the culprit is not bad's kernel and
/// the re-test runs: see the next test.)
#[tokio::test(start_paused = true)]
async fn a_parent_that_builds_good_s_kernel_leaves_no_part_before_it() {
    let mut world = World::new(23);
    world.kernel_changes = Some(vec![23, 30]);
    world.slow = Some((22, 0.3));
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    let c = state.confirmation.as_ref().expect("the re-test");
    let levels = c.levels.expect("levels read");
    assert_eq!(levels.parent.level, 0.0, "{}", c.summary);
    assert!(!levels.several(), "{}", c.summary);
    assert!(
        c.summary.contains("it sits at good by identity"),
        "{}",
        c.summary
    );
    assert!(state.values(&id(22)).len() >= 3, "the parent was booted");
}

/// The first step of two, 65% of the way from good to bad: its re-test separates it from its
/// parent (after seven rounds here) while its level's interval still reaches bad. The rounds
/// go on until the level shows the rest after it (tests/e2e.rs on 2026-12-07 stopped at three
/// with the culprit at 68%, interval 32 to 105%, and the one-step posterior then gave the
/// right culprit 0.0%: NOT confirmed). Red when the re-test stops once the step is separated.
#[tokio::test(start_paused = true)]
async fn a_step_short_of_bad_is_re_tested_until_its_level_shows_the_rest() {
    let mut world = World::new(23);
    world.second = Some((30, 0.65));
    let (end, _, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!(found(&end), Some(23), "{end:?}");
    let c = state.confirmation.as_ref().expect("the re-test");
    let levels = c.levels.expect("levels read");
    assert!(levels.rest().after, "{}", c.summary);
    assert!(c.confirmed, "{}", c.summary);
    let rounds = state.values(&id(22)).len();
    assert!(rounds > 3, "{rounds} rounds: {}", c.summary);
}

/// A culprit that builds bad's kernel over a parent that builds good's is confirmed without
/// a re-test (#31 item 5): the step is the regression from good to bad, kernel for kernel,
/// and the endpoints' boots of the whole hunt are its evidence. The demo's culprit is one.
/// Red when `confirm::begin` re-tests it: the parent's rounds appear in the journal.
#[tokio::test(start_paused = true)]
async fn a_culprit_with_the_endpoints_kernels_is_confirmed_without_a_re_test() {
    let mut world = World::new(23);
    world.kernel_changes = Some(vec![23]);
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    assert!(state.confirm.is_none(), "no re-test began");
    let c = state.confirmation.as_ref().expect("a confirmation");
    assert!(
        c.confirmed && c.confidence.is_some_and(|p| p >= 0.95),
        "{}",
        c.summary
    );
    assert!(
        c.summary.starts_with("no re-test: the parent")
            && c.summary.contains(&format!(
                "builds the kernel of the good end {}",
                &id(0)[..12]
            )),
        "{}",
        c.summary
    );
    let levels = c.levels.expect("levels by identity");
    assert_eq!((levels.parent.level, levels.culprit.level), (0.0, 1.0));
    assert!(!levels.several(), "{}", c.summary);
    // Neither twin was booted for the confirmation (the parent is judged good by its kernel).
    assert!(state.values(&id(22)).is_empty(), "{}", c.summary);
}

/// A revert that does not apply is said with its files, and nothing is built or booted for
/// it; with the setting off there is no revert at all. Both end as the hunt would without.
#[tokio::test(start_paused = true)]
async fn a_revert_that_does_not_apply_is_named_and_one_turned_off_is_not_made() {
    let world = World::new(23);
    let mut bench = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        classify(ClassifyMode::Baselines),
    );
    bench.revert = |_, _| RevertMade::Conflicts {
        files: vec!["fs/ext4/fsync.c".into()],
    };
    let (end, code, state) = bench.run().await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    let r = state.reverted.expect("the revert's outcome is journalled");
    assert_eq!(
        (r.revert, r.level, r.recovers),
        (None, None, Recovers::NotMeasured)
    );
    assert!(
        r.summary.contains("does not apply cleanly") && r.summary.contains("fs/ext4/fsync.c"),
        "{}",
        r.summary
    );
    assert!(!state.builds.contains_key(&id(REVERTS + 23)));
    let off = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        ClassifyConfig {
            revert: false,
            ..classify(ClassifyMode::Baselines)
        },
    );
    let (end, code, state) = off.run().await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    assert!(state.revert.is_none() && state.reverted.is_none());
}

/// Issue 34, item 3: `firstbad plan` measures the baselines, forecasts and stops (exit 0 for a
/// go); `firstbad run` then goes on from those baselines and spends, in all, what a run alone
/// spends: nothing measured twice.
#[tokio::test(start_paused = true)]
async fn a_plan_forecasts_and_the_run_goes_on_from_its_baselines() {
    let world = World::new(23);
    let mut bench = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        classify(ClassifyMode::Baselines),
    );
    bench.forecast = Forecasting::Only;
    let (end, code, state) = bench.run().await;
    assert!(
        matches!(
            end,
            Err(HuntError::Forecast(StopReason::Planned { go: true }))
        ),
        "{end:?}"
    );
    assert_eq!(code, 0);
    let f = state.forecast.clone().expect("the forecast is journalled");
    assert!(f.go && f.right >= 0.9, "{:?}", f.lines());
    assert!(state.verdicts.is_empty(), "nothing past the baselines ran");
    let baseline_boots = state.total_boots();
    // Planned again: the same forecast, nothing booted.
    let (_, code, again) = bench.run().await;
    assert_eq!((code, again.total_boots()), (0, baseline_boots));

    bench.forecast = Forecasting::Gate;
    let (end, code, state) = bench.run().await;
    assert_eq!((found(&end), code), (Some(23), 0), "{end:?}");
    assert_eq!(bench.forecasts(), 1);
    // The same hunt run at once, with its forecast: the same boots.
    let mut alone = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        classify(ClassifyMode::Baselines),
    );
    alone.forecast = Forecasting::Gate;
    let (_, _, direct) = alone.run().await;
    assert_eq!(state.total_boots(), direct.total_boots());
    // The forecast, beside what the hunt spent after it, as the report gives it.
    let spent = state.boots_since_forecast();
    assert!(
        spent > 0 && (spent as f64) <= 2.0 * f.boots.p90,
        "{spent} against {f:?}"
    );
}

/// Issue 34, item 3: a hunt whose statistics cannot name the culprit in most simulated hunts
/// (here a regression of 0.6 σ, 3 boots a commit at most and no posterior phase) stops before
/// its first candidate with exit 4 and what would help; `--despite-forecast` goes on.
#[tokio::test(start_paused = true)]
async fn a_no_go_stops_before_the_first_candidate_unless_told_to_go_on() {
    let mut world = World::new(23);
    world.d = 0.6;
    let mut bench = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        ClassifyConfig {
            min_boots: 1,
            max_boots: 3,
            refine_boots: 0,
            min_effect: 0.01,
            ..classify(ClassifyMode::Baselines)
        },
    );
    bench.forecast = Forecasting::Gate;
    let (end, code, state) = bench.run().await;
    let f = state.forecast.clone().expect("the forecast is journalled");
    assert!(
        matches!(&end, Err(HuntError::Forecast(StopReason::NoGo(_)))),
        "{end:?}: {:?}",
        f.lines()
    );
    assert_eq!(code, 4);
    assert!(!f.go && f.right < 0.8, "{:?}", f.lines());
    assert!(
        f.advice
            .iter()
            .any(|a| a.starts_with("classify.max_boots = 12:")),
        "{:?}",
        f.advice
    );
    let message = end.unwrap_err().to_string();
    assert!(message.contains("--despite-forecast"), "{message}");
    assert!(state.verdicts.is_empty());
    let endpoints = [id(0), id(N)];
    assert!(
        state.boots.keys().all(|c| endpoints.contains(c)),
        "no candidate was booted"
    );

    // The advice followed: a rerun with a larger boot cap is forecast again (and a rerun with
    // the same settings is not).
    let (_, code, _) = bench.run().await;
    assert_eq!(code, 4);
    bench.classify.max_boots = 12;
    let (_, _, state) = bench.run().await;
    let again = state.forecast.clone().expect("forecast again");
    assert_eq!(again.tuning["classify.max_boots"], "12");
    assert_ne!(again, f);
    assert_eq!(bench.forecasts(), 2);

    bench.forecast = Forecasting::Advise;
    let (end, _, state) = bench.run().await;
    assert!(end.is_ok(), "{end:?}");
    assert!(!state.verdicts.is_empty());
}

/// Issue 35, item 2: identical kernels share their boots. Of the 40 commits only four change
/// the kernel (the culprit one of them); the others build their parent's kernel apart from
/// the release string. A candidate whose kernel is an endpoint's or a judged commit's takes
/// that verdict unbooted, and the hunt names the same culprit on fewer boots than when
/// builds have no identity.
#[tokio::test(start_paused = true)]
async fn identical_kernels_share_their_boots() {
    let plain = World::new(23);
    let mut twins = World::new(23);
    twins.kernel_changes = Some(vec![5, 12, 23, 30]);
    let (_, _, alone) = hunt(&plain, ClassifyMode::Baselines).await;
    let (end, code, state) = hunt(&twins, ClassifyMode::Baselines).await;
    assert_eq!(found(&end), Some(23), "{end:?}");
    assert_eq!(code, 0, "{:?}", state.confirmation);
    let shared: Vec<&(String, firstbad::journal::Verdict, String)> = state
        .verdicts
        .iter()
        .filter(|(_, _, why)| why.contains("the same kernel as"))
        .collect();
    assert!(!shared.is_empty(), "{:?}", state.verdicts);
    for (c, v, why) in &shared {
        let truth = if index(c) >= 23 {
            firstbad::journal::Verdict::Bad
        } else {
            firstbad::journal::Verdict::Good
        };
        assert_eq!(*v, truth, "{c}: {why}");
        // Unbooted when judged (the culprit's parent is booted later, in the re-test).
        assert!(why.contains("not booted"), "{c}: {why}");
    }
    eprintln!(
        "boots: {} with identities ({} verdicts shared), {} without",
        state.boots_finished,
        shared.len(),
        alone.boots_finished
    );
    assert!(state.boots_finished < alone.boots_finished);
}

#[tokio::test(start_paused = true)]
async fn relative_mode_names_the_culprit() {
    let world = World::new(7);
    let (end, code, _) = hunt(&world, ClassifyMode::Relative(0.3)).await;
    assert_eq!((found(&end), code), (Some(7), 0), "{end:?}");
}

#[tokio::test(start_paused = true)]
async fn absolute_mode_names_the_culprit() {
    let world = World::new(31);
    // Good measures about 35, bad about 63.
    let (end, code, _) = hunt(&world, ClassifyMode::Absolute(49.0)).await;
    assert_eq!((found(&end), code), (Some(31), 0), "{end:?}");
}

#[tokio::test(start_paused = true)]
async fn a_host_that_moves_stops_the_hunt_for_a_person() {
    let mut world = World::new(23);
    // The baselines take 5 boots of good (Δ/σ ≈ 7: the first look decides); the first drift
    // check's re-measurements move, and stay moved.
    world.good_moves_after = Some(5);
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    let err = end.expect_err("the hunt stops");
    assert_eq!(code, 5, "{err}");
    assert!(err.to_string().contains("drifted"), "{err}");
    assert!(state.drift_checks.last().is_some_and(|d| d.drifted));
}

#[tokio::test(start_paused = true)]
async fn a_culprit_below_the_confidence_asked_for_is_not_confirmed() {
    let mut world = World::new(23);
    world.d = 2.0;
    let mut c = classify(ClassifyMode::Baselines);
    c.confidence = 0.999_999;
    c.refine_boots = 0;
    let bench = Bench::new(&world, vec![FakeHost::new("vm1", &world, 10)], c);
    let (end, code, state) = bench.run().await;
    assert!(found(&end).is_some(), "{end:?}");
    let c = state.confirmation.expect("a confirmation");
    assert_eq!(code, 4, "{}", c.summary);
    assert!(!c.confirmed, "{}", c.summary);
}

#[tokio::test(start_paused = true)]
async fn only_skipped_commits_left_is_ambiguous_with_the_range() {
    let mut world = World::new(23);
    world.broken = HashSet::from([22, 23]);
    // With the posterior phase, no commit of the three can hold the confidence: not confirmed.
    let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
    let said = state.confirmation.map(|c| c.summary).unwrap_or_default();
    assert_eq!(code, 4, "{end:?}: {said}");
    // Without it, git bisect's answer: the range.
    let mut c = classify(ClassifyMode::Baselines);
    c.refine_boots = 0;
    let (end, code, _) = Bench::new(&world, vec![FakeHost::new("vm1", &world, 10)], c)
        .run()
        .await;
    match end {
        Ok(HuntEnd::OnlySkippedLeft { commits }) => {
            let mut left: Vec<usize> = commits.iter().map(|c| index(c)).collect();
            left.sort();
            assert_eq!(
                left,
                [22, 23, 24],
                "as git: the first bad commit could be any of these"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(code, 4);
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_that_does_not_build_or_boot_is_an_infrastructure_stop() {
    for broken_build in [true, false] {
        let mut world = World::new(23);
        if broken_build {
            world.broken.insert(N);
        } else {
            world.unbootable.insert(0);
        }
        let (end, code, state) = hunt(&world, ClassifyMode::Baselines).await;
        let err = end.expect_err("the hunt stops");
        assert_eq!(code, 5, "{err}");
        let what = if broken_build {
            "bad endpoint"
        } else {
            "good endpoint"
        };
        assert!(err.to_string().contains(what), "{err}");
        assert!(state.verdicts.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_host_that_dies_mid_batch_leaves_the_pool_and_the_hunt_goes_on() {
    let world = World::new(13);
    let vm1 = FakeHost::new("vm1", &world, 10);
    let mut vm2 = FakeHost::new("vm2", &world, 10);
    Arc::get_mut(&mut vm2).expect("one owner").dies_after = Some(5);
    let bench = Bench::new(&world, vec![vm1, vm2], classify(ClassifyMode::Baselines));
    let (end, code, state) = bench.run().await;
    assert_eq!((found(&end), code), (Some(13), 0), "{end:?}");
    assert_eq!(state.retired.len(), 1);
    assert_eq!(state.retired[0].0, "vm2");
    let failed_by_host = state
        .boots
        .values()
        .flatten()
        .filter(|r| matches!(&r.outcome, BootOutcome::Failed { reason, .. } if reason.contains("left the pool")))
        .count();
    assert_eq!(
        failed_by_host, 1,
        "the boot it died in is a failed boot, never a verdict"
    );
}

/// Issue 56: a pool's hosts each have their level. Two VMs on one machine measured one kernel
/// at 3.8 and 6.8 ms (tests/e2e.rs's pool hunt, which then ended NOT confirmed at 56% on a ×17
/// regression): read as one host, the difference looked like the host moving. Here the second
/// host measures everything 1.8× the first until it leaves the pool: the culprit is named and
/// confirmed, and the report's numbers are what each host measured.
#[tokio::test(start_paused = true)]
async fn a_pool_whose_hosts_differ_in_level_names_and_confirms_the_culprit() {
    let world = World::new(21);
    let vm1 = FakeHost::new("vm1", &world, 10);
    let mut vm2 = FakeHost::new("vm2", &world, 10);
    let second = Arc::get_mut(&mut vm2).expect("one owner");
    second.scale = 1.8;
    // It leaves the pool after 30 boots: from then on the mix of hosts changes, which a
    // one-host reading takes for the host moving (without the alignment: commit 13 named and
    // NOT confirmed, exit 4).
    second.dies_after = Some(30);
    let bench = Bench::new(&world, vec![vm1, vm2], classify(ClassifyMode::Baselines));
    let (end, code, state) = bench.run().await;
    assert_eq!((found(&end), code), (Some(21), 0), "{end:?}");
    // The good endpoint's boots on vm2, as the statistics read them, stand where vm1's do.
    let offsets = state.host_offsets();
    assert_eq!(offsets.len(), 1, "{offsets:?}");
    assert_eq!(offsets[0].0, "vm2");
    assert!((offsets[0].1 - 1.8f64.ln()).abs() < 0.1, "{offsets:?}");
    // A report shows what the hosts measured, not the aligned values.
    let raw = state.raw_values(&id(0));
    assert!(raw.iter().any(|v| *v > 1.5 * 35.0), "{raw:?}");
}

#[tokio::test(start_paused = true)]
async fn a_slow_host_does_not_hold_the_fast_one_back() {
    let world = World::new(29);
    for build_ahead in [false, true] {
        let fast = FakeHost::new("fast", &world, 10);
        let slow = FakeHost::new("slow", &world, 30);
        let mut bench = Bench::new(
            &world,
            vec![fast.clone(), slow.clone()],
            classify(ClassifyMode::Baselines),
        );
        bench.build_ahead = build_ahead;
        let started = tokio::time::Instant::now();
        let (end, code, _) = bench.run().await;
        let wall = started.elapsed().as_secs();
        assert_eq!((found(&end), code), (Some(29), 0), "{end:?}");
        let (f, s) = (
            fast.boots.load(Ordering::SeqCst),
            slow.boots.load(Ordering::SeqCst),
        );
        // Fed as it frees, the fast host boots about three times as often as the slow one.
        assert!(f >= 2 * s, "fast {f} boots, slow {s}");
        let builds = bench.builder.builds.load(Ordering::SeqCst);
        let busy = |h: &FakeHost| h.busy.lock().unwrap().as_secs();
        // Printed for docs/engine.md (virtual seconds; builds take 30 s, boots 10 s and 30 s).
        println!(
            "build_ahead {build_ahead}: wall {wall} s; {builds} builds; fast host busy {} s \
             ({f} boots), slow host busy {} s ({s} boots)",
            busy(&fast),
            busy(&slow)
        );
    }
}

/// The journal's first `k` events, as a hunt killed after its `k`-th append leaves it.
fn cut(from: &Path, to: &Path, k: usize) {
    let events = Journal::open(from)
        .expect("journal")
        .events()
        .expect("events");
    let identity = Journal::open(from).unwrap().identity().unwrap().unwrap();
    let j = Journal::open(to).expect("journal");
    j.set_identity(&identity).unwrap();
    for e in &events[..k] {
        j.append(&e.event).unwrap();
    }
}

/// Each (commit, boot number) finishes once: nothing finished is measured twice.
fn finished_once(journal: &Path) {
    let mut seen = HashSet::new();
    for e in Journal::open(journal).unwrap().events().unwrap() {
        if let Event::BootFinished { commit, boot, .. } = &e.event {
            assert!(
                seen.insert((commit.clone(), *boot)),
                "boot {boot} of {commit} finished twice"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_kill_at_every_journal_append_resumes_to_the_same_answer() {
    let world = World::new(19);
    let whole = Bench::new(
        &world,
        vec![FakeHost::new("vm1", &world, 10)],
        classify(ClassifyMode::Baselines),
    );
    let (end, _, state) = whole.run().await;
    assert_eq!(found(&end), Some(19));
    let events = Journal::open(&whole.journal()).unwrap().events().unwrap();
    let builds = whole.builder.builds.load(Ordering::SeqCst);
    for k in 1..events.len() {
        let resumed = Bench::new(
            &world,
            vec![FakeHost::new("vm1", &world, 10)],
            classify(ClassifyMode::Baselines),
        );
        cut(&whole.journal(), &resumed.journal(), k);
        // The kernels built before the kill are still in the cache.
        for (c, b) in &state.builds {
            if let BuildOutcome::Built { .. } = b {
                std::fs::write(resumed.dir.path().join(format!("{c}.bzImage")), b"kernel").unwrap();
            }
        }
        let (again, code, after) = resumed.run().await;
        assert_eq!(
            found(&again),
            Some(19),
            "killed after append {k}: {again:?}"
        );
        assert_eq!(code, 0, "killed after append {k}");
        assert_eq!(
            after.confirmation.as_ref().map(|c| c.confirmed),
            Some(true),
            "killed after append {k}"
        );
        finished_once(&resumed.journal());
        // One host, a virtual clock and values fixed by boot number: the resumed hunt takes
        // the uninterrupted one's steps, so it measures exactly what that one measured.
        assert_eq!(
            after.boots_finished, state.boots_finished,
            "killed after append {k}"
        );
        assert_eq!(
            after.verdicts.len(),
            state.verdicts.len(),
            "killed after append {k}"
        );
        // A build cut by the kill is redone; none that finished is.
        let rebuilt = resumed.builder.builds.load(Ordering::SeqCst);
        assert!(
            rebuilt <= builds,
            "killed after append {k}: {rebuilt} builds of {builds}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_kill_on_a_pool_of_two_resumes_without_measuring_anything_twice() {
    let world = World::new(11);
    let hosts = || {
        vec![
            FakeHost::new("vm1", &world, 10),
            FakeHost::new("vm2", &world, 13),
        ]
    };
    let whole = Bench::new(&world, hosts(), classify(ClassifyMode::Baselines));
    let (end, _, _) = whole.run().await;
    assert_eq!(found(&end), Some(11));
    let events = Journal::open(&whole.journal())
        .unwrap()
        .events()
        .unwrap()
        .len();
    for k in (1..events).step_by(7) {
        let resumed = Bench::new(&world, hosts(), classify(ClassifyMode::Baselines));
        cut(&whole.journal(), &resumed.journal(), k);
        let (again, code, _) = resumed.run().await;
        assert_eq!(
            (found(&again), code),
            (Some(11), 0),
            "killed after append {k}"
        );
        finished_once(&resumed.journal());
    }
}

#[test]
fn a_changed_meaning_is_refused_by_field_and_tuning_may_change() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&dir.path().join("journal.sqlite")).unwrap();
    let meaning = |mode: &str| HuntIdentity {
        good: id(0),
        bad: id(N),
        fingerprint: "f".into(),
        meaning: BTreeMap::from([
            ("classify.mode".to_owned(), mode.to_owned()),
            ("workload.metric".to_owned(), "p50".to_owned()),
        ]),
    };
    let dag = line();
    begin_or_resume(
        &journal,
        &meaning("baselines"),
        dir.path(),
        &dag,
        &[id(0)],
        None,
    )
    .unwrap();
    begin_or_resume(
        &journal,
        &meaning("baselines"),
        dir.path(),
        &dag,
        &[id(0)],
        None,
    )
    .expect("the same hunt resumes");
    let err = begin_or_resume(
        &journal,
        &meaning("relative"),
        dir.path(),
        &dag,
        &[id(0)],
        None,
    )
    .expect_err("another mode is another hunt");
    assert_eq!(err.exit_code(), 2);
    let msg = err.to_string();
    assert!(
        msg.contains("classify.mode: was \"baselines\", now \"relative\"")
            && msg.contains("another hunt.state_dir"),
        "{msg}"
    );
    // A journal of an earlier firstbad, without the fields, is refused with a message that
    // says so.
    let old = tempfile::tempdir().unwrap();
    let j = Journal::open(&old.path().join("journal.sqlite")).unwrap();
    let mut id0 = meaning("baselines");
    id0.meaning.clear();
    j.set_identity(&id0).unwrap();
    let err = begin_or_resume(&j, &meaning("baselines"), old.path(), &dag, &[id(0)], None)
        .expect_err("refused");
    assert!(err.to_string().contains("earlier firstbad"), "{err}");
}
