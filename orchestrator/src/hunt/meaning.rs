//! What a hunt's results mean: the fields that change a verdict's meaning (a rerun with any of
//! them changed is refused by name) and the tuning that may change between runs.

use super::prelude::content_hash;
use super::{HuntError, HuntRange};
use crate::config::{Build, ClassifyMode, Direction, HuntConfig};
use std::collections::BTreeMap;

/// The fields of a kernel hunt that change what a verdict means, one by one: a rerun with
/// any of them changed is refused by name ([`begin_or_resume`](super::begin_or_resume)).
pub fn meaning(
    cfg: &HuntConfig,
    classify: &crate::config::ClassifyConfig,
    range: &HuntRange,
) -> Result<BTreeMap<String, String>, HuntError> {
    let mut m = range.meaning();
    m.extend(measured_meaning(cfg, classify, |b| match b {
        Build::Prebuilt(_) => Some(range.dag_ids().join(", ")),
        Build::Source(_) => None,
    })?);
    Ok(m)
}

/// What a kernel hunt file's measurements mean, without its range: the workload, the
/// metric, its direction, the kernel config and make arguments (`firstbad watch`'s series
/// is refused on a change of any of these).
pub fn measurement_meaning(cfg: &HuntConfig) -> Result<BTreeMap<String, String>, HuntError> {
    measured_meaning(cfg, &cfg.classify, |_| None)
}

fn measured_meaning(
    cfg: &HuntConfig,
    classify: &crate::config::ClassifyConfig,
    kernels: impl Fn(&Build) -> Option<String>,
) -> Result<BTreeMap<String, String>, HuntError> {
    let mut m = BTreeMap::new();
    judging_meaning(
        &mut m,
        classify,
        ("workload.direction", cfg.workload.direction),
    );
    m.insert("workload.metric".into(), cfg.workload.metric.clone());
    let workload = serde_json::to_string(&cfg.workload.workload).expect("workloads serialise");
    m.insert(
        "workload.file".into(),
        format!("contents {}", content_hash(workload.as_bytes())),
    );
    // A changed disk is a changed measurement (issue 33). Today's page-cache disk adds no
    // field, so journals written before the disk model keep their meaning.
    for h in &cfg.hosts {
        if let crate::config::HostKind::Qemu(q) = &h.kind {
            if !q.disk.is_page_cache() {
                m.insert(format!("hosts.{}.disk", h.name), q.disk.describe());
            }
        }
    }
    match &cfg.build {
        Build::Source(b) => {
            let kconfig = std::fs::read(&b.kernel_config)
                .map_err(|e| HuntError::BadInput(format!("{}: {e}", b.kernel_config.display())))?;
            m.insert(
                "build.config".into(),
                format!("contents {}", content_hash(&kconfig)),
            );
            m.insert("build.make_args".into(), b.make_args.join(" "));
        }
        // The list is the history: another list is another hunt.
        Build::Prebuilt(_) => {
            if let Some(k) = kernels(&cfg.build) {
                m.insert("build.kernels".into(), k);
            }
        }
    }
    Ok(m)
}

/// What `[classify]` and the direction (in the field `direction.0`) make a verdict mean, into
/// a hunt's meaning: shared by kernel and metric command hunts.
pub fn judging_meaning(
    m: &mut BTreeMap<String, String>,
    classify: &crate::config::ClassifyConfig,
    direction: (&str, Direction),
) {
    let (mode, level) = match classify.mode {
        ClassifyMode::Baselines => ("baselines", None),
        ClassifyMode::Relative(r) => ("relative", Some(("classify.relative", r))),
        ClassifyMode::Absolute(t) => ("absolute", Some(("classify.threshold", t))),
    };
    m.insert("classify.mode".into(), mode.into());
    if let Some((field, v)) = level {
        m.insert(field.into(), v.to_string());
    }
    m.insert(
        direction.0.into(),
        match direction.1 {
            Direction::LowerIsBetter => "lower-is-better",
            Direction::HigherIsBetter => "higher-is-better",
        }
        .into(),
    );
}

/// The settings that only tune the search, as this run uses them (journalled with each run).
pub fn tuning(c: &crate::config::ClassifyConfig) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("classify.alpha".into(), c.alpha.to_string()),
        ("classify.beta".into(), c.beta.to_string()),
        ("classify.min_effect".into(), c.min_effect.to_string()),
        ("classify.min_boots".into(), c.min_boots.to_string()),
        ("classify.max_boots".into(), c.max_boots.to_string()),
        (
            "classify.max_failed_boots".into(),
            c.max_failed_boots.to_string(),
        ),
        (
            "classify.drift_check_every".into(),
            c.drift_check_every.to_string(),
        ),
        ("classify.refine_boots".into(), c.refine_boots.to_string()),
        (
            "classify.max_baseline_boots".into(),
            c.max_baseline_boots.to_string(),
        ),
        ("classify.confirm_pairs".into(), c.confirm_pairs.to_string()),
        (
            "classify.confirm_max_pairs".into(),
            c.confirm_max_pairs.to_string(),
        ),
        (
            "classify.drift_lasts_boots".into(),
            c.drift_lasts_boots.to_string(),
        ),
        (
            "classify.drift_lasts_minutes".into(),
            c.drift_lasts_minutes.to_string(),
        ),
        ("classify.confidence".into(), c.confidence.to_string()),
        ("classify.max_culprits".into(), c.max_culprits.to_string()),
        ("classify.revert".into(), c.revert.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: a disk preset is part of what a measurement means; today's disk adds
    /// nothing, so journals written before the disk model resume.
    #[test]
    fn a_disk_preset_is_in_the_meaning_and_today_s_disk_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kernel.config"), "CONFIG_64BIT=y\n").unwrap();
        std::fs::write(
            dir.path().join("fsync.toml"),
            "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\n\
             writer_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
        )
        .unwrap();
        let meaning = |host: &str| {
            let text = format!(
                "[hunt]\nname = \"t\"\nrepo = \"linux\"\ngood = \"v1\"\nbad = \"v2\"\n\n\
                 [build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n{host}\n\
                 [workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
            );
            let cfg = HuntConfig::parse(&dir.path().join("hunt.toml"), &text).unwrap();
            measurement_meaning(&cfg).unwrap()
        };
        assert!(!meaning("").keys().any(|k| k.starts_with("hosts.")));
        assert_eq!(
            meaning("disk = \"sata-2009\"\n")
                .get("hosts.qemu0.disk")
                .map(String::as_str),
            Some("sata-2009: cache=none, 90 MB/s, 120 IOPS, 1 queue(s) of 32")
        );
    }
}
