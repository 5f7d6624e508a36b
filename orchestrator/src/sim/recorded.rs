//! Recorded real noise (issue 55): boots measured on real hosts, stored in the repository as a
//! corpus (`tests/corpus/*.tsv`, docs/test-suite.md "The corpus of real boots"), and replayed as
//! the `recorded` noise kind, so that the product's loop can be read on this machine's noise in
//! milliseconds and deterministically.
//!
//! A corpus file is one recording: measured boots of one or more kernels in the order they
//! finished, on one or more hosts. Replayed, a boot's value is the recorded boot's residual
//! (its log value less the median log value of its own kernel on its own host) on top of the
//! simulated commit's level: the host's real movement over time and its real boot-to-boot
//! noise, in their real order, with the kernels' own differences taken out.
//!
//! The format (version 1), tab-separated (shown with spaces here), `#` lines are comments:
//!
//! ```text
//! # firstbad boot corpus v1
//! # source: ... (how it was recorded: the command, the machine, what ran beside it)
//! # metric: fsync_latency_p50_ms
//! # columns: t_s host kernel value
//! 0.0   vm1   demo-good   4.31
//! 12.4  vm1   demo-bad    61.70
//! ```
//!
//! `t_s` is seconds from the recording's first boot (non-decreasing), `host` the test host's
//! name, `kernel` what identifies the kernel (a kernel identity, a release or an endpoint's
//! name: boots of one kernel share it), `value` the metric of that boot (finite, > 0).

use std::fmt;

/// The first line of every corpus file.
pub const HEADER: &str = "# firstbad boot corpus v1";

/// One measured boot of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedBoot {
    /// Seconds from the recording's first boot.
    pub t_s: f64,
    /// The test host's name.
    pub host: String,
    /// The kernel's identity within the recording.
    pub kernel: String,
    /// The boot's metric.
    pub value: f64,
}

/// A recording: its name, its comment lines, and its boots in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// The file's name without `.tsv`.
    pub name: String,
    /// The `# key: value` comment lines, in order (source, metric, ...).
    pub notes: Vec<(String, String)>,
    /// Every boot, in the order they finished.
    pub boots: Vec<RecordedBoot>,
}

/// Why a corpus file cannot be read; names the file and the line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {what}")]
pub struct CorpusError {
    /// The corpus's name (or path).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong, and what the line should hold.
    pub what: String,
}

impl Corpus {
    /// Parses a corpus file's text; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Corpus, CorpusError> {
        let err = |line: usize, what: String| CorpusError {
            file: name.to_owned(),
            line,
            what,
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, first)) if first.trim_end() == HEADER => {}
            _ => return Err(err(1, format!("the first line must be `{HEADER}`"))),
        }
        let (mut notes, mut boots) = (Vec::new(), Vec::<RecordedBoot>::new());
        for (i, line) in lines {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(c) = line.strip_prefix('#') {
                if let Some((k, v)) = c.split_once(':') {
                    notes.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let [t, host, kernel, value] = f[..] else {
                return Err(err(
                    n,
                    format!(
                        "{} fields; a boot is 4 tab-separated fields: t_s host kernel value",
                        f.len()
                    ),
                ));
            };
            let num = |s: &str, what: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| err(n, format!("{what} {s:?} is not a finite number")))
            };
            let (t_s, value) = (num(t, "t_s")?, num(value, "value")?);
            if value <= 0.0 {
                return Err(err(
                    n,
                    format!("value {value} must be > 0 (a latency or a rate)"),
                ));
            }
            if let Some(last) = boots.last() {
                if t_s < last.t_s {
                    return Err(err(
                        n,
                        format!(
                            "t_s {t_s} is before the line above's {}: boots go in time order",
                            last.t_s
                        ),
                    ));
                }
            }
            if host.is_empty() || kernel.is_empty() {
                return Err(err(n, "host and kernel must not be empty".into()));
            }
            boots.push(RecordedBoot {
                t_s,
                host: host.to_owned(),
                kernel: kernel.to_owned(),
                value,
            });
        }
        if boots.is_empty() {
            return Err(err(1, "no boots".into()));
        }
        Ok(Corpus {
            name: name.to_owned(),
            notes,
            boots,
        })
    }

    /// The value of the comment `# key: ...`, if any.
    pub fn note(&self, key: &str) -> Option<&str> {
        self.notes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Each boot's residual on the log scale, in time order: its log value less the median
    /// log value of the boots of its own kernel on its own host. What is left is the host's
    /// movement and the boot-to-boot noise, with the kernels' differences (and the hosts'
    /// levels) taken out. A (host, kernel) with a single boot gives a residual of 0.
    pub fn residuals(&self) -> Vec<f64> {
        let mut groups: Vec<((&str, &str), Vec<f64>)> = Vec::new();
        for b in &self.boots {
            let key = (b.host.as_str(), b.kernel.as_str());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(b.value.ln()),
                None => groups.push((key, vec![b.value.ln()])),
            }
        }
        let centres: Vec<((&str, &str), f64)> = groups
            .into_iter()
            .map(|(k, v)| (k, crate::stats::median(&v)))
            .collect();
        self.boots
            .iter()
            .map(|b| {
                let key = (b.host.as_str(), b.kernel.as_str());
                let c = centres
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, c)| *c)
                    .expect("every boot's group has a centre");
                b.value.ln() - c
            })
            .collect()
    }
}

/// A corpus's noise summarised: what a reader of docs/test-suite.md compares recordings by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSummary {
    /// Boots in the recording.
    pub boots: usize,
    /// Standard deviation of the residuals (log scale): boot-to-boot noise and the host's
    /// movement together, the σ of [`Noise::Recorded`](super::Noise::Recorded)'s Δ/σ.
    pub sigma: f64,
    /// The boot-to-boot part alone: the standard deviation of successive residuals'
    /// differences over √2 (a level that moves slowly cancels out of it).
    pub sigma_boot_to_boot: f64,
    /// The largest and smallest rolling median of 9 residuals (log scale): how far the host's
    /// level moved during the recording.
    pub level_range: (f64, f64),
}

impl Corpus {
    /// The recording's noise in a few numbers.
    pub fn summary(&self) -> NoiseSummary {
        let r = self.residuals();
        let sd = |v: &[f64]| {
            let m = crate::stats::mean(v);
            (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len().max(2) - 1) as f64).sqrt()
        };
        let diffs: Vec<f64> = r.windows(2).map(|w| w[1] - w[0]).collect();
        let rolling: Vec<f64> = r
            .windows(9.min(r.len()))
            .map(crate::stats::median)
            .collect();
        let lo = rolling.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rolling.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        NoiseSummary {
            boots: r.len(),
            sigma: sd(&r),
            sigma_boot_to_boot: if diffs.is_empty() {
                0.0
            } else {
                sd(&diffs) / std::f64::consts::SQRT_2
            },
            level_range: (lo, hi),
        }
    }
}

impl fmt::Display for NoiseSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} boots, σ {:.1}% (boot to boot {:.1}%), level {:+.1}% to {:+.1}%",
            self.boots,
            100.0 * self.sigma,
            100.0 * self.sigma_boot_to_boot,
            100.0 * self.level_range.0.exp_m1(),
            100.0 * self.level_range.1.exp_m1(),
        )
    }
}

/// The recordings built into firstbad (`tests/corpus/*.tsv`), which `--noise recorded` and the
/// fast tier's replay tests read.
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "chain-beside-fast-tier",
        include_str!("../../../tests/corpus/chain-beside-fast-tier.tsv"),
    ),
    (
        "pool-two-vms",
        include_str!("../../../tests/corpus/pool-two-vms.tsv"),
    ),
    ("twostep", include_str!("../../../tests/corpus/twostep.tsv")),
    // 16 boots: kept for the record, too short to replay (MIN_REPLAYED_BOOTS).
    (
        "dirty-sata-2009",
        include_str!("../../../tests/corpus/dirty-sata-2009.tsv"),
    ),
];

/// The built-in recordings, parsed; a malformed one is a bug of the repository (its test,
/// `every_built_in_corpus_parses`, says which).
pub fn built_in() -> Vec<Corpus> {
    BUILT_IN
        .iter()
        .map(|(name, text)| Corpus::parse(name, text).expect("built-in corpora parse"))
        .collect()
}

/// One recording as the `recorded` kind replays it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// The recording's name.
    pub name: String,
    /// Its residuals in time order, divided by `sigma`: Δ/σ then means what it means for the
    /// other noise kinds.
    pub z: Vec<f64>,
    /// The recording's σ on the log scale ([`NoiseSummary::sigma`]).
    pub sigma: f64,
}

/// The noise the `recorded` kind replays: every built-in recording of at least
/// [`MIN_REPLAYED_BOOTS`] boots, each a stream of its own.
pub fn streams() -> &'static [Stream] {
    static STREAMS: std::sync::OnceLock<Vec<Stream>> = std::sync::OnceLock::new();
    STREAMS.get_or_init(|| {
        built_in()
            .iter()
            .filter(|c| c.boots.len() >= MIN_REPLAYED_BOOTS)
            .map(|c| {
                let sigma = c.summary().sigma.max(1e-9);
                Stream {
                    name: c.name.clone(),
                    z: c.residuals().iter().map(|x| x / sigma).collect(),
                    sigma,
                }
            })
            .collect()
    })
}

/// A recording shorter than this is not replayed as a host's noise: a hunt of a hundred boots
/// or more wraps around it several times and meets the same few boots again and again. The
/// first recordings are single test hunts of 30-40 boots.
pub const MIN_REPLAYED_BOOTS: usize = 30;

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# firstbad boot corpus v1\n# source: a test\n# metric: m\n\
                         # columns: t_s host kernel value\n\
                         0\tvm1\tgood\t4.0\n1\tvm1\tbad\t40.0\n2\tvm1\tgood\t5.0\n\
                         3\tvm1\tbad\t50.0\n4\tvm1\tgood\t4.5\n";

    #[test]
    fn a_corpus_reads_its_notes_and_boots_in_order() {
        let c = Corpus::parse("small", SMALL).unwrap();
        assert_eq!(c.note("source"), Some("a test"));
        assert_eq!(c.boots.len(), 5);
        assert_eq!(c.boots[1].kernel, "bad");
        // Each kernel's own median taken out: good's middle boot and bad's centre are 0.
        let r = c.residuals();
        assert!(r[4].abs() < 1e-12, "{r:?}");
        assert!((r[0] - (4.0f64 / 4.5).ln()).abs() < 1e-12, "{r:?}");
        // Bad's two boots: their centre is the middle of their logs.
        assert!((r[1] - 0.5 * (40.0f64 / 50.0).ln()).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn a_malformed_corpus_names_the_line_and_what_it_should_hold() {
        let e = Corpus::parse("x", "t_s host kernel value\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().contains(HEADER), "{e}");
        let e = Corpus::parse("x", &format!("{HEADER}\n0\tvm1\tgood\n")).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("x", 2));
        assert!(e.what.contains("4 tab-separated fields"), "{e}");
        let e = Corpus::parse(
            "x",
            &format!("{HEADER}\n5\tvm1\tgood\t1\n4\tvm1\tgood\t1\n"),
        )
        .unwrap_err();
        assert!(e.what.contains("time order"), "{e}");
        let e = Corpus::parse("x", &format!("{HEADER}\n0\tvm1\tgood\tNaN\n")).unwrap_err();
        assert!(e.what.contains("finite"), "{e}");
        let e = Corpus::parse("x", &format!("{HEADER}\n0\tvm1\tgood\t0\n")).unwrap_err();
        assert!(e.what.contains("> 0"), "{e}");
        assert!(Corpus::parse("x", &format!("{HEADER}\n# only notes\n")).is_err());
    }

    #[test]
    fn every_built_in_corpus_parses() {
        for (name, text) in BUILT_IN {
            if let Err(e) = Corpus::parse(name, text) {
                panic!("tests/corpus/{name}.tsv: {e}");
            }
        }
    }
}
