//! A kernel run's later stages: the further steps of a regression of several, each hunted
//! from its own baselines (started from the run's boots of its two ends,
//! [`steps::carry`]), and every confirmed culprit reverted together on top of bad.

use super::{engine, settings, Run};
use crate::config::HuntConfig;
use crate::hunt::driver::Forecasting;
use crate::hunt::prelude::HuntRange;
use crate::hunt::{log_step, part_range, steps, HuntError, Outcome};

/// The parts of the regression that the first stage's culprit leaves (from `good` to `bad`, its
/// range's ends), hunted one after the other in stages of the same journal ([`steps`]), each
/// from its own baselines, which carry in the run's boots of the part's ends; `first` with
/// them.
pub(super) async fn further_steps(
    cfg: &HuntConfig,
    mut first: Outcome,
    (good, bad): &(String, String),
    restore: &[String],
) -> Result<Outcome, HuntError> {
    let mut plan = first.steps_plan(good, bad, cfg.classify.max_culprits);
    // Hosts that left the pool in a stage stay out of the later ones: they need a person.
    let mut retired = first.retired.clone();
    while let Some((n, part)) = plan.next_part() {
        log_step(n, &part);
        let stage = steps::stage(n);
        let Some(range) = part_range(
            &mut plan,
            &part,
            (&cfg.source, &cfg.repo),
            &cfg.paths,
            cfg.first_parent,
        )?
        else {
            continue;
        };
        let earlier = steps::earlier_events(&cfg.state_dir, n)?;
        let carry = steps::carry(&earlier, &range.goods[0], &range.bad);
        let run = Run {
            carry,
            ..later(cfg, &stage, restore, &retired, None)
        };
        let outcome = engine(cfg, range, &[], run).await?;
        for r in &outcome.retired {
            if !retired.iter().any(|(h, _)| *h == r.0) {
                retired.push(r.clone());
            }
        }
        first.add_step(&mut plan, n, part, outcome);
    }
    let mut first = first.end_steps(plan);
    first.together = revert_together(cfg, &first, restore, &retired).await?;
    Ok(first)
}

/// When the run confirmed two culprits or more, all of them reverted together on top of bad
/// and booted in rounds beside good and bad, in the journal's [`steps::TOGETHER`] stage and
/// read with the first stage's baselines: what the culprits found recover of the regression
/// between them. `None` when there are fewer or the revert is off ([`steps::together`]). Only
/// runs over git have further steps ([`super::run_with`]): a prebuilt hunt never comes here.
async fn revert_together(
    cfg: &HuntConfig,
    first: &Outcome,
    restore: &[String],
    retired: &[(String, String)],
) -> Result<Option<crate::hunt::Reverted>, HuntError> {
    let Some(reverting) =
        steps::together(first, cfg.classify.revert, &cfg.state_dir, &settings(cfg))?
    else {
        return Ok(None);
    };
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let run = later(cfg, steps::TOGETHER, restore, retired, Some(reverting));
    Ok(engine(cfg, range, &[], run).await?.reverted)
}

/// A later stage of a run, in the run's journal: the hunt file's settings, no forecast (the
/// first stage made it), hosts an earlier stage retired kept out.
fn later<'a>(
    cfg: &'a HuntConfig,
    stage: &'a str,
    restore: &'a [String],
    carried: &'a [(String, String)],
    reverting: Option<(Vec<String>, crate::hunt::judge::Judge)>,
) -> Run<'a> {
    Run {
        stage,
        state_dir: &cfg.state_dir,
        classify: cfg.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        forecast: Forecasting::Off,
        replay: None,
        restore,
        carried,
        reverting,
        carry: Vec::new(),
    }
}
