//! The posterior phase after the bisection: [`refine_step`] on every boot of the hunt, until
//! one commit alone holds `confidence` of the posterior or `refine_boots` boots per bit of
//! the range are spent; each step boots the commit, tested or not, whose boot tells the most
//! about the culprit. git bisect's answer rests on hard verdicts, each wrong with probability
//! alpha or beta against exact centres, and more often against the baselines' estimates; the
//! posterior, which carries the centres' error, decides. Every choice derives from the
//! journalled boots, so a resumed hunt takes the same steps.

use super::super::driver::{Decision, Driver};
use super::super::evidence::{
    bad_under, evidence_boots, posterior_inputs, reference_due, PosteriorInputs,
};
use super::super::judge::{Judge, RefineProbe};
use super::super::HuntState;
use super::{confirm, drift};
use crate::journal::{BuildOutcome, HuntEnd};
use crate::posterior::{
    dag_posterior, refine_budget, refine_step, Candidate, RefineRule, RefineStep,
};
use crate::sequential::Model;

/// The posterior phase's next step; `end` is what the bisection ended with.
pub fn next(
    d: &mut Driver,
    state: &HuntState,
    judge: &Judge,
    model: &Model,
    end: HuntEnd,
) -> Decision {
    // No verdicts come in this phase: the good endpoint is re-measured every few boots.
    let running = state.running_boots_all();
    if let Some(decision) = drift::check(d, state, judge, Some(state.boots_since_verdict)) {
        return decision;
    }
    let c = &d.plan.settings.classify;
    let rule = RefineRule {
        confidence: c.confidence,
        budget: refine_budget(c.refine_boots as usize, d.hypotheses.len()),
        split: d.plan.settings.split,
        n_baseline: model.n_baseline,
    };
    let dag = &d.plan.dag;
    let PosteriorInputs {
        tested,
        under,
        evidence,
        reference,
        line,
        level,
    } = posterior_inputs(
        &d.plan.settings,
        state,
        &d.plan.good,
        model,
        dag,
        &d.hypotheses,
        &mut d.rows,
    );
    if tested.is_empty() {
        return match end {
            HuntEnd::Found { commit } => confirm::begin(d, state, judge, &commit),
            other => d.finish(state, other),
        };
    }
    let hypotheses = &d.hypotheses;
    let (p, _) = dag_posterior(hypotheses.len(), &under, &evidence, reference.as_ref());
    let settings = &d.plan.settings;
    // What the phase knows of each hypothesis's commit, read once per step: only commits that
    // were built or booted differ from an untested one (usable, not built, no boots).
    let mut known: Vec<Option<Candidate>> = vec![None; dag.len()];
    for id in state.builds.keys().chain(state.boots.keys()) {
        let Some(t) = dag.index_of(id) else { continue };
        if known[t].is_some() {
            continue;
        }
        let boots = evidence_boots(settings, state, dag, id);
        known[t] = Some(Candidate {
            // Commits that cannot give evidence: they do not build, or keep failing to boot
            // without ever giving a value.
            usable: !matches!(state.builds.get(id), Some(BuildOutcome::Failed { .. }))
                && (!boots.is_empty() || state.failures(id).len() < c.max_failed_boots as usize),
            built: matches!(state.builds.get(id), Some(BuildOutcome::Built { .. })),
            boots: boots
                .iter()
                .filter(|b| line.admit(model, b.0, b.1).is_some())
                .count(),
        });
    }
    let candidate = |h: usize| {
        known[hypotheses[h]].unwrap_or(Candidate {
            usable: true,
            built: false,
            boots: 0,
        })
    };
    // P(an untested commit is bad): the mass of the hypotheses it descends from. Its row is
    // kept with the tested commits' rows: the phase asks for the same members again and again.
    let rows = std::cell::RefCell::new(std::mem::take(&mut d.rows));
    let bad_mass = |h: usize| {
        let t = hypotheses[h];
        let mut rows = rows.borrow_mut();
        let row = rows
            .entry(t)
            .or_insert_with(|| bad_under(dag, hypotheses, t));
        p.iter()
            .zip(row.iter())
            .filter(|(_, &b)| b)
            .map(|(x, _)| x)
            .sum()
    };
    // Boots under way count as spent, so that a pool never runs past the budget.
    let spent = state.boots_since_verdict + running;
    let step = refine_step(&p, &tested, &under, spent, &rule, candidate, bad_mass);
    d.rows = rows.into_inner();
    let probe = match step {
        // Boots still running may change the answer: they are waited for.
        RefineStep::Stop { .. } if running > 0 => return Decision::Wait,
        RefineStep::Stop { answer, .. } => {
            let id = dag.id(hypotheses[answer]).to_owned();
            return confirm::begin(d, state, judge, &id);
        }
        RefineStep::Boot(h) => match settings.probe {
            RefineProbe::Information => dag.id(hypotheses[h]).to_owned(),
            RefineProbe::Boundary => {
                let b = boundary(&p, hypotheses, dag, &candidate).unwrap_or(h);
                dag.id(hypotheses[b]).to_owned()
            }
        },
    };
    // A reference boot of an endpoint beside the probes, when the host wanders.
    if let Some(reference) = reference_due(settings, state, &level, &d.plan.good, &d.plan.bad) {
        return d.boots_for(state, |i| (i == 0).then(|| reference.clone()));
    }
    match state.builds.get(&probe) {
        None => d.build(state, &probe),
        Some(BuildOutcome::Built { .. }) => d.boots_for(state, |i| (i == 0).then(|| probe.clone())),
        // Not usable: the next step chooses another.
        Some(BuildOutcome::Failed { .. }) => Decision::Wait,
    }
}

/// The boundary rule's boot ([`RefineProbe::Boundary`]): of the most probable culprit and its
/// first parent (when that is a hypothesis and usable), the one with fewer boots, the parent
/// on a tie.
fn boundary(
    p: &[f64],
    hypotheses: &[usize],
    dag: &crate::search::Dag,
    candidate: &impl Fn(usize) -> Candidate,
) -> Option<usize> {
    let culprit = (0..p.len()).max_by(|&a, &b| p[a].total_cmp(&p[b]).then(b.cmp(&a)))?;
    let parent = dag
        .parents_of(hypotheses[culprit])
        .next()
        .and_then(|t| hypotheses.binary_search(&t).ok())
        .filter(|&h| candidate(h).usable);
    Some(match parent {
        Some(q) if candidate(q).boots <= candidate(culprit).boots => q,
        _ => culprit,
    })
}
