//! Coarse to fine (issue 22 item 3): a hunt over prebuilt kernels that found and confirmed
//! the first bad one goes on, in the same state directory and the same journal, with a
//! source hunt between the revisions of the last good kernel and the first bad one
//! (`[chain]`). The source stage's events are journalled under [`SOURCE_STAGE`]; its
//! identity is its own, so a changed `[chain]` is refused by field as any hunt file is,
//! while the prebuilt stage, ended, is not measured again.

use super::{engine, Run};
use crate::config::{Build, ChainConfig, HuntConfig};
use crate::hunt::prelude::HuntRange;
use crate::hunt::state::HuntState;
use crate::hunt::{Forecasting, HuntError, Outcome};
use crate::journal::{HuntEnd, Journal, Verdict};
use crate::prebuilt::Candidate;

/// The journal stage of a chained hunt's source hunt.
pub const SOURCE_STAGE: &str = "source";

/// The prebuilt stage's answer, as the chain narrows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The last good kernel's entry (as written in `build.kernels`) and its revision.
    pub good: (String, String),
    /// The first bad kernel's entry and its revision.
    pub bad: (String, String),
}

/// The hunt file of the source stage: `cfg` with the chain's repository, build and the two
/// kernels' revisions as good and bad; `None` (with a warning) when the prebuilt stage's
/// answer has a kernel the chain gives no revision for.
pub fn source_stage(
    cfg: &HuntConfig,
    chain: &ChainConfig,
    kernels: &[Candidate],
) -> Result<Option<HuntConfig>, HuntError> {
    let journal = Journal::open(&crate::hunt::journal_path(&cfg.state_dir))?;
    let state = HuntState::replay(&journal.events()?);
    let Some(narrowed) = narrowed(&state, kernels, chain) else {
        return Ok(None);
    };
    tracing::info!(
        "first bad prebuilt kernel {} ({}), last good {} ({}): bisecting {} between them",
        narrowed.bad.0,
        narrowed.bad.1,
        narrowed.good.0,
        narrowed.good.1,
        chain.repo.display()
    );
    let mut source = source_config(cfg, chain);
    source.goods = vec![narrowed.good.1];
    source.bad = narrowed.bad.1;
    Ok(Some(source))
}

/// `cfg` as the source stage sees it: the chain's repository and build, the whole range (no
/// paths, every parent); its good and bad are the prebuilt stage's answer.
pub fn source_config(cfg: &HuntConfig, chain: &ChainConfig) -> HuntConfig {
    let mut source = cfg.clone();
    source.repo = chain.repo.clone();
    source.paths = Vec::new();
    source.first_parent = false;
    source.build = Build::Source(chain.build.clone());
    source
}

/// The last good and first bad kernel of an ended prebuilt stage, with their revisions.
pub fn narrowed(state: &HuntState, kernels: &[Candidate], chain: &ChainConfig) -> Option<Narrowed> {
    let Some(HuntEnd::Found { commit }) = &state.end else {
        return None;
    };
    let at = kernels.iter().position(|k| k.id == *commit)?;
    // The nearest kernel before it that measured good (skipped ones between do not count),
    // else the list's first: the good endpoint.
    let good_at = (0..at)
        .rev()
        .find(|&i| {
            state
                .verdicts
                .iter()
                .any(|(c, v, _)| *c == kernels[i].id && *v == Verdict::Good)
        })
        .unwrap_or(0);
    let revision = |k: &Candidate| {
        let rev = chain.revisions.get(&k.kernel.entry).cloned();
        if rev.is_none() {
            tracing::warn!(
                "chain.revisions gives no revision for {:?}: the hunt ends at the first bad \
                 kernel",
                k.kernel.entry
            );
        }
        rev.map(|r| (k.kernel.entry.clone(), r))
    };
    Some(Narrowed {
        good: revision(&kernels[good_at])?,
        bad: revision(&kernels[at])?,
    })
}

/// Runs (or resumes) the source stage to its end, in the prebuilt stage's state directory,
/// under [`SOURCE_STAGE`] in its journal.
pub async fn run_source(source: &HuntConfig, restore: &[String]) -> Result<Outcome, HuntError> {
    let range = HuntRange::load(
        &source.source,
        &source.repo,
        &source.goods,
        &source.bad,
        &[],
        false,
    )
    .map_err(|e| match e {
        HuntError::BadInput(m) => HuntError::BadInput(
            m.replace("hunt.repo", "chain.repo")
                .replace("hunt.good", "chain.revisions (the last good kernel's)")
                .replace("hunt.bad", "chain.revisions (the first bad kernel's)"),
        ),
        other => other,
    })?;
    let run = Run {
        stage: SOURCE_STAGE,
        state_dir: &source.state_dir,
        classify: source.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        // Between two kernels the first stage confirmed: its cost was forecast there.
        forecast: Forecasting::Off,
        replay: None,
        restore,
        carried: &[],
        reverting: None,
        // The first stage booted the exported kernels, not these builds of their revisions.
        carry: Vec::new(),
    };
    engine(source, range, &[], run).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Ccache, KernelSource, PrebuiltKernel};

    fn kernels(n: usize) -> Vec<Candidate> {
        (0..n)
            .map(|i| Candidate {
                id: format!("k{i}=1"),
                kernel: PrebuiltKernel {
                    entry: format!("k{i}"),
                    source: KernelSource::Package {
                        name: format!("k{i}"),
                        version: None,
                    },
                },
            })
            .collect()
    }

    fn chain(mapped: &[usize]) -> ChainConfig {
        ChainConfig {
            repo: "linux".into(),
            revisions: mapped
                .iter()
                .map(|i| (format!("k{i}"), format!("v{i}")))
                .collect(),
            build: crate::config::BuildConfig {
                kernel_config: "c".into(),
                cache_dir: "d".into(),
                jobs: 1,
                ccache: Ccache::Off,
                distcc: Vec::new(),
                make_args: Vec::new(),
                timeout_s: 1,
                prune: true,
            },
        }
    }

    fn ended(culprit: &str, verdicts: &[(&str, Verdict)]) -> HuntState {
        HuntState {
            end: Some(HuntEnd::Found {
                commit: culprit.into(),
            }),
            verdicts: verdicts
                .iter()
                .map(|(c, v)| ((*c).to_owned(), *v, String::new()))
                .collect(),
            ..HuntState::default()
        }
    }

    #[test]
    fn the_source_runs_from_the_nearest_good_kernel_past_skipped_ones() {
        let k = kernels(5);
        // k1 good, k2 skipped (did not boot), k3 the first bad.
        let state = ended("k3=1", &[("k1=1", Verdict::Good), ("k2=1", Verdict::Skip)]);
        let n = narrowed(&state, &k, &chain(&[0, 1, 2, 3, 4])).unwrap();
        assert_eq!(n.good, ("k1".into(), "v1".into()));
        assert_eq!(n.bad, ("k3".into(), "v3".into()));
        // No verdict before it: the list's first kernel, the good endpoint.
        let state = ended("k1=1", &[]);
        let n = narrowed(&state, &k, &chain(&[0, 1])).unwrap();
        assert_eq!((n.good.1.as_str(), n.bad.1.as_str()), ("v0", "v1"));
    }

    #[test]
    fn no_chain_without_a_found_kernel_or_a_revision_for_it() {
        let k = kernels(3);
        let mut state = ended("k2=1", &[]);
        assert_eq!(narrowed(&state, &k, &chain(&[0, 1])), None, "k2 unmapped");
        state.end = Some(HuntEnd::NotReproduced {
            message: String::new(),
        });
        assert_eq!(narrowed(&state, &k, &chain(&[0, 1, 2])), None);
    }
}
