//! Every step of a regression in one run (issue 31 item 1). Kernel bug 12309 had two first-bad
//! commits: one cut the default dirty limits, one changed CFQ's queue depth, and its bisector
//! found them one after the other. A hunt's re-test reads where the culprit and its parent sit
//! between good and bad ([`StepLevels`]); when some of the regression lies before the parent
//! or after the culprit, beyond both intervals and by at least `min_effect`, the same run goes
//! on with a hunt of that part alone: from good to the parent, from the culprit to bad.
//!
//! Each further hunt is a stage of the same journal (`step-2`, `step-3`, …), with its own
//! baselines (its two ends measured beside each other, from the boots the run already has of
//! them, [`carry`]: a part that is not there is refuted as any regression is), its own
//! bisection and its own re-test. Which stages there are follows from the ended ones alone, in
//! a fixed order, so a rerun after `kill -9` takes them up where they were. Pure but for
//! [`together`] and [`earlier_events`], which read the run's journal: the orchestration is in
//! [`crate::engine::run_with`] and the simulator.

use crate::posterior::StepLevels;

/// The journal stage where a run that confirmed two culprits or more reverts them all together
/// on top of bad (issue 34: "each alone and all together"; each alone is its own stage's
/// revert), booted in rounds beside good and bad and read with the first stage's baselines
/// ([`together`]): whether the culprits found explain the whole regression.
pub const TOGETHER: &str = "revert-together";

/// What a run's [`TOGETHER`] stage reverts and reads its rounds with: every culprit `first`
/// (the run's outcome, its further steps in it) confirmed, and the first stage's judge, from
/// its journalled baselines in `state_dir` (the stage does not measure them again); `None`
/// with fewer than two culprits, the revert off (`revert`), or no baselines journalled. The
/// kernel and the command hunts' runs both ask it.
pub fn together(
    first: &super::Outcome,
    revert: bool,
    state_dir: &std::path::Path,
    settings: &super::judge::Settings,
) -> Result<Option<(Vec<String>, super::judge::Judge)>, super::HuntError> {
    let culprits = first.confirmed_culprits();
    if culprits.len() < 2 || !revert {
        return Ok(None);
    }
    let journal = crate::journal::Journal::open(&super::journal_path(state_dir))?.stage("");
    let Some(id) = journal.identity()? else {
        return Ok(None);
    };
    let state = super::HuntState::replay(&journal.events()?);
    if state.baselines.is_none() {
        return Ok(None);
    }
    let (g, b) = (state.values(&id.good), state.values(&id.bad));
    let n = state.baseline_boots.unwrap_or(g.len().min(b.len()));
    tracing::info!(
        "{} culprits confirmed: reverting them together on top of bad",
        culprits.len()
    );
    let judge = super::judge::Judge::from_baselines(settings, &g, &b, n);
    Ok(Some((culprits, judge)))
}

/// What a later stage carries in of its endpoints' boots ([`Event::BootsCarried`]): the
/// measured boots of `good` and of `bad` among `earlier` (`(stage, event)`, in journal order;
/// only `boot-finished` events are read, so a boot is carried from where it was measured,
/// never from a carried copy), the latest of each and as many of each as the other has: the
/// boots nearest in time to one another, balanced as baselines are. Nothing when either
/// endpoint has none: the stage then measures both beside each other. On the demo's two-step
/// branch the second step's ends are the first culprit (5 boots: the bisection's and the
/// re-test's) and bad (14): its 10 baseline boots were of kernels the run had measured.
///
/// [`Event::BootsCarried`]: crate::journal::Event::BootsCarried
pub fn carry(
    earlier: &[(String, crate::journal::Event)],
    good: &str,
    bad: &str,
) -> Vec<(String, Vec<crate::journal::CarriedBoot>)> {
    use crate::journal::{BootOutcome, CarriedBoot, Event};
    let of = |commit: &str| -> Vec<CarriedBoot> {
        earlier
            .iter()
            .filter_map(|(stage, e)| match e {
                Event::BootFinished {
                    commit: c,
                    boot,
                    host,
                    outcome: outcome @ BootOutcome::Measured { .. },
                } if c == commit => Some(CarriedBoot {
                    stage: stage.clone(),
                    boot: *boot,
                    host: host.clone(),
                    outcome: outcome.clone(),
                }),
                _ => None,
            })
            .collect()
    };
    let (g, b) = (of(good), of(bad));
    let n = g.len().min(b.len());
    if n == 0 {
        return Vec::new();
    }
    let latest = |v: Vec<CarriedBoot>| v[v.len() - n..].to_vec();
    vec![(good.to_owned(), latest(g)), (bad.to_owned(), latest(b))]
}

/// The events of a run's stages before its `n`th step (the first stage and steps 2 to
/// `n - 1`), with their stage, from the journal in `state_dir`: what [`carry`] reads.
pub fn earlier_events(
    state_dir: &std::path::Path,
    n: usize,
) -> Result<Vec<(String, crate::journal::Event)>, super::HuntError> {
    let path = super::journal_path(state_dir);
    let mut events = Vec::new();
    for name in std::iter::once(String::new()).chain((2..n).map(stage)) {
        for e in crate::journal::Journal::open(&path)?
            .stage(&name)
            .events()?
        {
            events.push((name.clone(), e.event));
        }
    }
    Ok(events)
}

/// The journal stage of the `n`th step found (the first is the hunt's own stage, "").
pub fn stage(n: usize) -> String {
    format!("step-{n}")
}

/// Which side of a found step the rest of the regression lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Between good and the culprit's parent: the parent is clearly worse than good.
    Before,
    /// Between the culprit and bad: the culprit is clearly short of bad.
    After,
}

/// A part of a regression that a found step leaves unexplained: a range to hunt.
#[derive(Debug, Clone, PartialEq)]
pub struct Rest {
    /// Its good end (the hunt's good, or a culprit).
    pub good: String,
    /// Its bad end (a culprit's parent, or the hunt's bad).
    pub bad: String,
    /// Where it lies against the step that left it.
    pub side: Side,
    /// Where it lies in the whole regression, from good (0) to bad (1): the estimate from the
    /// levels of the steps that left it (their intervals not carried), for the share of the
    /// whole a step found in it is.
    pub span: (f64, f64),
}

/// The whole regression's span: a run's first stage.
pub const WHOLE: (f64, f64) = (0.0, 1.0);

/// A share `x` of the part at `span`, as a share of the whole regression.
pub fn of_whole(span: (f64, f64), x: f64) -> f64 {
    (span.1 - span.0) * x
}

/// The parts of the range from `good` to `bad` that the step from `parent` to `culprit`
/// leaves unexplained, older first, by the re-test's levels: a parent clearly worse than
/// good has part of the regression before it, a culprit clearly short of bad part after it,
/// whether or not the step between them is itself clear (a half step at Δ/σ 4 is not, in the
/// re-test's rounds; a wrong culprit leaves the whole regression on its two sides, and the
/// parts' hunts find it). An end that is already the range's end has no part beside it.
pub fn rest_of(
    (good, bad): (&str, &str),
    span: (f64, f64),
    parent: &str,
    culprit: &str,
    levels: &StepLevels,
) -> Vec<Rest> {
    let r = levels.rest();
    let at = |level: f64| span.0 + of_whole(span, level.clamp(0.0, 1.0));
    let mut out = Vec::new();
    if r.before && !parent.is_empty() && parent != good {
        out.push(Rest {
            good: good.to_owned(),
            bad: parent.to_owned(),
            side: Side::Before,
            span: (span.0, at(levels.parent.level)),
        });
    }
    if r.after && culprit != bad {
        out.push(Rest {
            good: culprit.to_owned(),
            bad: bad.to_owned(),
            side: Side::After,
            span: (at(levels.culprit.level), span.1),
        });
    }
    out
}

/// The order in which a run hunts the parts of a regression: breadth first, the first
/// stage's parts before those its parts leave, each stage's older part first, until
/// `max_culprits` culprits are confirmed (the hunt's own stage's among them). The run and the
/// simulator drive it alike: [`Steps::next_part`] names the next part to hunt, [`Steps::left`]
/// takes what its stage left once it has ended.
///
/// A stage that confirms no culprit (its part holds no regression; its bisection, misled by a
/// host that moved, named a commit its re-test refuted) does not count as a culprit: a wrong
/// commit leaves the regression on both its sides, and the parts' hunts find the real steps
/// (CI, 2026-12-06: a host that sped up by 59σ mid-hunt made the first stage name a commit
/// between the two planted steps; counted as a culprit, it and an empty part used the cap of 3
/// and the second real step went unhunted). So that a misleading host cannot make a run hunt
/// without end, the stages are capped too: at most `2 × max_culprits − 1` in all (5 for the
/// default 3; 1, the first stage alone, for `max_culprits = 1`).
#[derive(Debug, Clone)]
pub struct Steps {
    queue: std::collections::VecDeque<Rest>,
    /// Further parts hunted so far (the first stage not counted).
    hunted: usize,
    /// Culprits confirmed so far, the first stage's included.
    confirmed: usize,
    max_culprits: usize,
    /// Parts not hunted, and why (`max_culprits` culprits confirmed; the stages' cap reached;
    /// its ends make no range): named, as the regression still unexplained.
    pub not_hunted: Vec<(Rest, String)>,
}

impl Steps {
    /// The parts the hunt's own stage left, and whether it confirmed its culprit.
    pub fn new(max_culprits: usize, first: Vec<Rest>, first_confirmed: bool) -> Steps {
        Steps {
            queue: first.into(),
            hunted: 0,
            confirmed: usize::from(first_confirmed),
            max_culprits,
            not_hunted: Vec::new(),
        }
    }

    /// The most stages a run hunts, its first among them: `2 × max_culprits − 1`.
    pub fn max_stages(&self) -> usize {
        (2 * self.max_culprits).saturating_sub(1).max(1)
    }

    /// The next part to hunt (its stage is [`stage`] of the number returned beside it), or
    /// `None` once every part is hunted or past a cap.
    pub fn next_part(&mut self) -> Option<(usize, Rest)> {
        while let Some(part) = self.queue.pop_front() {
            if self.confirmed >= self.max_culprits {
                self.not_hunted.push((
                    part,
                    format!(
                        "classify.max_culprits = {} reached: {} culprits confirmed",
                        self.max_culprits, self.confirmed
                    ),
                ));
                continue;
            }
            if 1 + self.hunted >= self.max_stages() {
                self.not_hunted.push((
                    part,
                    format!(
                        "{} stages hunted, the most a run with classify.max_culprits = {} \
                         hunts (2 × max_culprits − 1; stages that confirmed no culprit \
                         count here)",
                        1 + self.hunted,
                        self.max_culprits
                    ),
                ));
                continue;
            }
            self.hunted += 1;
            return Some((self.hunted + 1, part));
        }
        None
    }

    /// The part just named cannot be hunted (its ends make no range the search takes: a
    /// culprit's first parent off the range's history), for `why`. Its stage number goes to
    /// the next part, so that the stages stay `step-2`, `step-3`, … without a gap.
    pub fn cannot_hunt(&mut self, part: Rest, why: String) {
        self.hunted -= 1;
        self.not_hunted.push((part, why));
    }

    /// The parts that the last part's stage left once it has ended, and whether it confirmed
    /// its culprit.
    pub fn left(&mut self, more: Vec<Rest>, confirmed: bool) {
        self.confirmed += usize::from(confirmed);
        self.queue.extend(more);
    }

    /// Whether a run whose stages so far are known by `ended` has hunted every part: `ended(n)`
    /// gives what stage `n` ([`stage`]) left once it has ended and whether it confirmed its
    /// culprit, `None` while it runs or has not begun. For `firstbad status --follow`, which
    /// follows a run to its last step (a part that cannot be hunted, which no stage records,
    /// reads as not begun).
    pub fn all_hunted(
        mut self,
        mut ended: impl FnMut(usize, &Rest) -> Option<(Vec<Rest>, bool)>,
    ) -> bool {
        while let Some((n, part)) = self.next_part() {
            match ended(n, &part) {
                Some((more, confirmed)) => self.left(more, confirmed),
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(commit: &str, boot: u32, value: Option<f64>) -> crate::journal::Event {
        use crate::journal::{BootOutcome, Event};
        Event::BootFinished {
            commit: commit.into(),
            boot,
            host: "vm".into(),
            outcome: match value {
                Some(value) => BootOutcome::Measured {
                    kernel_release: String::new(),
                    boot_id: String::new(),
                    value,
                    result: firstbad_wire::WorkloadResult::empty("t", 0.0),
                    console: std::path::PathBuf::new(),
                    boot_seconds: 0.0,
                },
                None => BootOutcome::Failed {
                    reason: "timeout".into(),
                    console: std::path::PathBuf::new(),
                    untestable: false,
                },
            },
        }
    }

    /// A later step's ends carry the latest measured boots of each, as many of each as the
    /// other has, from where they were measured; none when one end was never measured.
    #[test]
    fn a_later_step_carries_the_latest_boots_of_its_ends_balanced() {
        let mut earlier: Vec<(String, crate::journal::Event)> = Vec::new();
        for b in 1..=6 {
            earlier.push(("".into(), finished("bad", b, Some(50.0 + f64::from(b)))));
        }
        earlier.push(("".into(), finished("a", 1, Some(20.0))));
        earlier.push(("".into(), finished("a", 2, None)));
        earlier.push(("step-2".into(), finished("a", 3, Some(21.0))));
        earlier.push(("step-2".into(), finished("bad", 7, Some(57.0))));
        let carry = carry(&earlier, "a", "bad");
        let boots = |i: usize| -> Vec<(String, u32)> {
            carry[i]
                .1
                .iter()
                .map(|b| (b.stage.clone(), b.boot))
                .collect()
        };
        assert_eq!((carry[0].0.as_str(), carry[1].0.as_str()), ("a", "bad"));
        assert_eq!(
            boots(0),
            [("".into(), 1), ("step-2".into(), 3)],
            "the failed boot is not a value"
        );
        assert_eq!(
            boots(1),
            [("".into(), 6), ("step-2".into(), 7)],
            "bad's latest two"
        );
        assert!(super::carry(&earlier, "parent", "bad").is_empty());
    }
    use crate::posterior::Level;

    fn levels(parent: f64, culprit: f64) -> StepLevels {
        let at = |level: f64| Level {
            level,
            lo: level - 0.1,
            hi: level + 0.1,
        };
        StepLevels {
            parent: at(parent),
            culprit: at(culprit),
            floor: 0.05,
            ratio: None,
        }
    }

    #[test]
    fn the_rest_lies_where_the_levels_put_it() {
        // A whole step: nothing left.
        assert!(rest_of(("g", "b"), WHOLE, "p", "c", &levels(0.0, 1.0)).is_empty());
        // Half of it after the culprit: culprit..bad.
        let after = rest_of(("g", "b"), WHOLE, "p", "c", &levels(0.0, 0.5));
        assert_eq!(
            after,
            vec![Rest {
                good: "c".into(),
                bad: "b".into(),
                side: Side::After,
                span: (0.5, 1.0),
            }]
        );
        // A part of a part: its span is inside its own.
        let inner = rest_of(("c", "b"), (0.5, 1.0), "c", "d", &levels(0.0, 0.5));
        assert_eq!(inner[0].span, (0.75, 1.0));
        assert!((of_whole(inner[0].span, 1.0) - 0.25).abs() < 1e-12);
        // Some before the parent and some after the culprit: both, the older first.
        let both = rest_of(("g", "b"), WHOLE, "p", "c", &levels(0.3, 0.7));
        assert_eq!(
            both.iter().map(|r| r.side).collect::<Vec<_>>(),
            [Side::Before, Side::After]
        );
        assert_eq!((both[0].good.as_str(), both[0].bad.as_str()), ("g", "p"));
        // A step that is not clear of its parent (a wrong culprit, both half-way): the
        // regression lies on both sides of it.
        assert_eq!(
            rest_of(("g", "b"), WHOLE, "p", "c", &levels(0.5, 0.5)).len(),
            2
        );
        // The parent is good itself, the culprit bad itself: no range beside them.
        assert!(rest_of(("g", "b"), WHOLE, "g", "b", &levels(0.3, 0.7)).is_empty());
    }

    /// A part after a step, from `g` to `b`, over the whole regression.
    fn part(g: &str, b: &str) -> Rest {
        Rest {
            good: g.into(),
            bad: b.into(),
            side: Side::After,
            span: WHOLE,
        }
    }

    #[test]
    fn parts_are_hunted_breadth_first_up_to_the_cap() {
        // Stage 0 leaves two parts; the first of them leaves one more.
        let first = vec![part("g", "p"), part("c", "b")];
        // Every stage confirms its culprit.
        let drive = |max: usize| {
            let mut steps = Steps::new(max, first.clone(), true);
            let mut run = Vec::new();
            while let Some((n, r)) = steps.next_part() {
                assert_eq!(n, run.len() + 2, "stages step-2, step-3, … in order");
                steps.left(
                    if n == 2 {
                        vec![part("c2", "p")]
                    } else {
                        vec![]
                    },
                    true,
                );
                run.push(r.good);
            }
            let past: Vec<Rest> = steps.not_hunted.into_iter().map(|(r, _)| r).collect();
            (run, past)
        };
        let (run, past) = drive(5);
        assert_eq!(run, ["g", "c", "c2"]);
        assert!(past.is_empty());
        // At most two culprits: the hunt's own and one more; the rest is named, not hunted.
        let (run, past) = drive(2);
        assert_eq!(run, ["g"]);
        assert_eq!(past, vec![part("c", "b"), part("c2", "p")]);
        // One culprit: as before this issue, nothing further.
        let (run, past) = drive(1);
        assert!(run.is_empty() && past.len() == 2);
    }

    /// CI, 2026-12-06: the first stage named a commit between two real steps and its re-test
    /// refuted it; the part before it held nothing; the part after it named the first real
    /// step, confirmed, and left the second after it. Counting stages as culprits, the cap of 3
    /// left the second real step unhunted.
    #[test]
    fn stages_that_confirm_nothing_do_not_use_up_the_culprits() {
        let first = vec![part("g", "p"), part("w", "b")];
        // step-2 (g..p): nothing; step-3 (w..b): a culprit c, more after it; step-4 (c..b): the
        // second culprit.
        let mut steps = Steps::new(3, first.clone(), false);
        let mut run = Vec::new();
        while let Some((n, r)) = steps.next_part() {
            let (more, confirmed) = match n {
                2 => (vec![], false),
                3 => (vec![part("c", "b")], true),
                _ => (vec![], true),
            };
            steps.left(more, confirmed);
            run.push(r.good);
        }
        assert_eq!(run, ["g", "w", "c"]);
        assert!(steps.not_hunted.is_empty());
        // A host that misleads every stage: each leaves two parts and confirms nothing. The
        // run stops at 2 × 3 − 1 = 5 stages, and names what it left.
        let mut steps = Steps::new(3, first, false);
        let mut hunted = 0;
        while let Some((_, r)) = steps.next_part() {
            hunted += 1;
            steps.left(vec![part(&r.good, "x"), part("y", &r.bad)], false);
        }
        assert_eq!(1 + hunted, 5);
        assert!(steps
            .not_hunted
            .iter()
            .all(|(_, why)| why.contains("5 stages hunted")));
        assert_eq!(steps.not_hunted.len(), 6);
        // One culprit at most: the first stage alone, confirmed or not.
        let mut steps = Steps::new(1, vec![part("g", "p")], false);
        assert!(steps.next_part().is_none());
    }
}
