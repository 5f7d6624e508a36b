//! From raw structs to validated types: every check, every default, once.

use super::expand::expand;
use super::hosts::validate_ssh;
use super::raw::{OneOrMany, RawHunt};
use super::*;
use crate::error::ConfigError;
use firstbad_wire::Workload;
use std::path::{Path, PathBuf};

/// Validates hunt-file text of either kind.
pub(super) fn hunt_file(path: &Path, text: &str) -> Result<HuntFile, ConfigError> {
    let raw: RawHunt = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    let v = Validator { path, base: &base };

    let name = raw.hunt.name.trim().to_owned();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(v.field(
            "hunt.name",
            format!("{name:?} must be non-empty and use only letters, digits, '-', '_', '.'"),
        ));
    }
    let repo = v.path("hunt.repo", &raw.hunt.repo)?;
    let goods = match raw.hunt.good {
        OneOrMany::One(g) => vec![g],
        OneOrMany::Many(gs) => gs,
    };
    if goods.is_empty() {
        return Err(v.field(
            "hunt.good",
            "is an empty list: give at least one good revision",
        ));
    }
    let mut revs: Vec<(String, &String)> = goods
        .iter()
        .enumerate()
        .map(|(i, g)| (format!("hunt.good[{i}]"), g))
        .collect();
    revs.push(("hunt.bad".into(), &raw.hunt.bad));
    for (field, rev) in revs {
        if rev.trim().is_empty() {
            return Err(v.field(&field, "is empty: give a revision (commit, tag, branch)"));
        }
    }
    for (i, p) in raw.hunt.paths.iter().enumerate() {
        let why = if p.trim().is_empty() || p.trim() == "." {
            Some("is empty: give a path from the top of the tree, such as \"mm/\"")
        } else if p.contains(['*', '?', '[']) || p.starts_with(':') {
            Some("wildcards and pathspec magic are not supported: list literal paths such as \"fs/ext4/\"")
        } else if p.starts_with('/') || p.split('/').any(|c| c == "..") {
            Some("must be relative to the top of the tree, such as \"fs/ext4/\"")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(v.field(&format!("hunt.paths[{i}]"), format!("{p:?} {why}")));
        }
    }
    let state_dir = match &raw.hunt.state_dir {
        Some(s) => v.path("hunt.state_dir", s)?,
        None => base.join("firstbad-state").join(&name),
    };
    if let Some(link) = &raw.report.web_link {
        if !link.contains("{commit}") {
            return Err(v.field(
                "report.web_link",
                format!("{link:?} has no {{commit}}: e.g. \"https://git.kernel.org/torvalds/c/{{commit}}\""),
            ));
        }
    }
    let report = ReportConfig {
        web_link: raw.report.web_link,
        bisected_by: raw.report.bisected_by,
        reported_by: raw.report.reported_by,
    };
    let goods_and_bad = (goods, raw.hunt.bad);

    if let Some(test) = raw.test {
        // A command hunt has no kernel to build or boot: a kernel table beside [test] is a
        // mistake (which of the two tests was meant?), not something to ignore.
        let kernel_tables = [
            ("build", raw.build.is_some()),
            ("hosts", !raw.hosts.is_empty()),
            ("workload", raw.workload.is_some()),
            ("classify", raw.classify.is_some()),
        ];
        if let Some((table, _)) = kernel_tables.iter().find(|(_, present)| *present) {
            return Err(v.field(
                table,
                "a hunt with [test] runs a command and boots no kernel: remove this table, \
                 or remove [test] to bisect with kernel builds and boots",
            ));
        }
        if test.command.trim().is_empty() {
            return Err(v.field(
                "test.command",
                "is empty: give a shell command, e.g. \"make -s check\"",
            ));
        }
        // An hour: a test suite that runs longer is rarely what one bisects with.
        let timeout_s = test.timeout_s.unwrap_or(3600);
        if timeout_s == 0 {
            return Err(v.field("test.timeout_s", "must be at least 1 (seconds)"));
        }
        let jobs = test.jobs.unwrap_or(1);
        if !(1..=64).contains(&jobs) {
            return Err(v.field(
                "test.jobs",
                format!("{jobs} is not between 1 and 64 (checkouts tested at once)"),
            ));
        }
        let (goods, bad) = goods_and_bad;
        return Ok(HuntFile::Local(Box::new(LocalConfig {
            source: path.to_owned(),
            name,
            repo,
            goods,
            bad,
            paths: raw.hunt.paths,
            first_parent: raw.hunt.first_parent,
            state_dir,
            test: TestConfig {
                command: test.command,
                timeout_s,
                jobs,
            },
            report,
        })));
    }
    let missing = |table: &str| {
        v.field(
            table,
            "missing: a kernel hunt needs [build], [[hosts]] and [workload]; a hunt that \
             runs a command in a checkout of each candidate needs [test] instead",
        )
    };
    let raw_build = raw.build.ok_or_else(|| missing("build"))?;
    let raw_workload = raw.workload.ok_or_else(|| missing("workload"))?;

    let kernel_config = v.path("build.config", &raw_build.config)?;
    if !kernel_config.is_file() {
        return Err(v.field(
            "build.config",
            format!(
                "{} does not exist: point it at a kernel .config (configs/kernel/ has one)",
                kernel_config.display()
            ),
        ));
    }
    let cache_dir = match &raw_build.cache_dir {
        Some(s) => v.path("build.cache_dir", s)?,
        None => default_cache_dir().join("builds"),
    };
    let ccache = match raw_build.ccache.as_str() {
        "auto" => Ccache::Auto,
        "on" | "true" => Ccache::On,
        "off" | "false" => Ccache::Off,
        other => {
            return Err(v.field(
                "build.ccache",
                format!("{other:?} is not one of \"auto\", \"on\", \"off\""),
            ))
        }
    };
    let jobs = raw_build.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    });
    if jobs == 0 {
        return Err(v.field("build.jobs", "must be at least 1"));
    }
    let build = BuildConfig {
        kernel_config,
        cache_dir,
        jobs,
        ccache,
        make_args: raw_build.make_args,
        // A clean tinyconfig build takes ~4.5 min on 2 cores; an hour is generous.
        timeout_s: raw_build.timeout_s.unwrap_or(3600),
    };

    if raw.hosts.is_empty() {
        return Err(v.field(
            "hosts",
            "no test host: add a [[hosts]] table, e.g. kind = \"qemu\"",
        ));
    }
    let mut hosts = Vec::new();
    for (i, h) in raw.hosts.into_iter().enumerate() {
        let at = |f: &str| format!("hosts[{i}].{f}");
        let kind = match h.kind.as_str() {
            "qemu" => {
                let accel = match h.accel.as_deref().unwrap_or("auto") {
                    "auto" => Accel::Auto,
                    "kvm" => Accel::Kvm,
                    "tcg" => Accel::Tcg,
                    other => {
                        return Err(v.field(
                            &at("accel"),
                            format!("{other:?} is not one of \"auto\", \"kvm\", \"tcg\""),
                        ))
                    }
                };
                let memory_mb = h.memory_mb.unwrap_or(1024);
                if memory_mb < 128 {
                    return Err(v.field(&at("memory_mb"), "must be at least 128"));
                }
                let scratch_mb = h.scratch_mb.unwrap_or(1024);
                if scratch_mb < 64 {
                    return Err(v.field(&at("scratch_mb"), "must be at least 64"));
                }
                HostKind::Qemu(QemuConfig {
                    memory_mb,
                    cpus: h.cpus.unwrap_or(1).max(1),
                    accel,
                    // TCG boots the tiny kernel in ~3 s; 3 min leaves room for a loaded box.
                    boot_timeout_s: h.boot_timeout_s.unwrap_or(180),
                    scratch_mb,
                    extra_cmdline: h.extra_cmdline.clone().unwrap_or_default(),
                })
            }
            "ssh" => HostKind::Ssh(Box::new(validate_ssh(&v, &at, &h)?)),
            other => {
                return Err(v.field(
                    &at("kind"),
                    format!("{other:?} is not a host kind this version knows (\"qemu\", \"ssh\")"),
                ))
            }
        };
        let wrong = match &kind {
            HostKind::Qemu(_) => h.ssh_fields_set(),
            HostKind::Ssh(_) => h.qemu_fields_set(),
        };
        if let Some(f) = wrong.first() {
            return Err(v.field(
                &at(f),
                format!(
                    "is not read by kind = {:?}: remove it, or change the kind",
                    h.kind
                ),
            ));
        }
        if hosts
            .iter()
            .any(|x: &HostConfig| Some(&x.name) == h.name.as_ref())
        {
            return Err(v.field(
                &at("name"),
                "is used by an earlier host: give each host its own name",
            ));
        }
        hosts.push(HostConfig {
            name: h.name.unwrap_or_else(|| format!("{}{i}", h.kind)),
            kind,
        });
    }

    let wl_path = v.path("workload.file", &raw_workload.file)?;
    let workload = load_workload(&wl_path)?;
    let metric = raw_workload.metric;
    // fio and command workloads name their metrics after the job file or script, so they
    // can only be checked once a run has reported.
    let known: Option<&[&str]> = match &workload {
        Workload::FsyncLatency(_) => Some(FSYNC_LATENCY_METRICS),
        Workload::Sequential(_) => Some(firstbad_wire::SEQUENTIAL_METRICS),
        Workload::Threads(_) => Some(firstbad_wire::THREADS_METRICS),
        Workload::Fio(_) | Workload::Command(_) => None,
    };
    if let Some(known) = known.filter(|k| !k.contains(&metric.as_str())) {
        return Err(v.field(
            "workload.metric",
            format!(
                "{metric:?} is not reported by {} workloads; use one of {}",
                workload.kind(),
                known.join(", ")
            ),
        ));
    }
    let direction = match raw_workload.direction.as_str() {
        "lower-is-better" => Direction::LowerIsBetter,
        "higher-is-better" => Direction::HigherIsBetter,
        other => {
            return Err(v.field(
                "workload.direction",
                format!("{other:?} is not \"lower-is-better\" or \"higher-is-better\""),
            ))
        }
    };
    let workload = WorkloadConfig {
        file: wl_path,
        workload,
        metric,
        direction,
        timeout_s: raw_workload.timeout_s.unwrap_or(600),
    };

    let c = raw.classify.unwrap_or_default();
    if c.baseline_boots.is_some() {
        return Err(v.field(
            "classify.baseline_boots",
            "is no longer used: the endpoints are now booted, interleaved, until the \
             regression is confirmed or refuted (8, 16, 32 or 64 boots each); remove it",
        ));
    }
    let mode = match (c.mode.as_deref().unwrap_or("baselines"), c.relative, c.threshold) {
        ("baselines", None, None) => ClassifyMode::Baselines,
        ("relative", Some(r), None) if r > 0.0 && r < 10.0 => ClassifyMode::Relative(r),
        ("relative", _, None) => {
            return Err(v.field(
                "classify.relative",
                "mode \"relative\" needs relative = a share above 0 (0.2 means bad when 20% worse than good)",
            ))
        }
        ("absolute", None, Some(t)) if t.is_finite() && t > 0.0 => ClassifyMode::Absolute(t),
        ("absolute", None, _) => {
            return Err(v.field(
                "classify.threshold",
                "mode \"absolute\" needs threshold = a positive value of the metric (e.g. 500.0 for fsync p99 in ms)",
            ))
        }
        (m @ ("baselines" | "relative" | "absolute"), _, _) => {
            let (field, fits) = if c.relative.is_some() && m != "relative" {
                ("classify.relative", "relative")
            } else {
                ("classify.threshold", "absolute")
            };
            return Err(v.field(
                field,
                format!("belongs to mode = \"{fits}\", not mode = \"{m}\": remove it or change classify.mode"),
            ));
        }
        (other, _, _) => {
            return Err(v.field(
                "classify.mode",
                format!("{other:?} is not a mode: use \"baselines\", \"relative\" or \"absolute\""),
            ))
        }
    };
    let classify = ClassifyConfig {
        mode,
        // One boot may decide when it is clear enough: the sequential test's error rates
        // already account for how much one boot proves.
        min_boots: c.min_boots.unwrap_or(1),
        // At Δ/σ = 1 the sequential test needs ~10-15 boots on average; in `firstbad sim` a
        // cap of 16 left 40% of hunts with undecided commits next to the culprit, 30 12%.
        // A clear regression decides in one boot, so the cap only costs on noisy ones.
        max_boots: c.max_boots.unwrap_or(30),
        min_effect: c.min_effect.unwrap_or(0.05),
        max_failed_boots: c.max_failed_boots.unwrap_or(2),
        // Issue 4's defaults: 1% error each way per commit, 95% on the culprit.
        alpha: c.alpha.unwrap_or(0.01),
        beta: c.beta.unwrap_or(0.01),
        confidence: c.confidence.unwrap_or(0.95),
        // `firstbad sim`: a host slowing 1σ per 100 boots defeats an unchecked hunt; one
        // good boot every 4 verdicts costs ~10% more boots at Δ/σ = 1.
        drift_check_every: c.drift_check_every.unwrap_or(4),
        confirm_pairs: c.confirm_pairs.unwrap_or(3),
        // `firstbad sim`, Δ/σ = 1: 74% right at N = 64 without the posterior phase, 85%
        // with 60 boots in all; 60 per bit (docs/simulation.md) ends on the confidence,
        // not the budget, in 99% of the hunts at N = 64 and 1024.
        refine_boots: c.refine_boots.unwrap_or(60),
    };
    if classify.min_boots == 0 || classify.min_boots > classify.max_boots {
        return Err(v.field(
            "classify.min_boots",
            format!(
                "must be between 1 and classify.max_boots ({})",
                classify.max_boots
            ),
        ));
    }
    if !(classify.min_effect > 0.0 && classify.min_effect < 10.0) {
        return Err(v.field(
            "classify.min_effect",
            "must be a relative difference above 0 (0.2 means 20%)",
        ));
    }
    if classify.max_failed_boots == 0 {
        return Err(v.field("classify.max_failed_boots", "must be at least 1"));
    }
    for (name, x) in [
        ("classify.alpha", classify.alpha),
        ("classify.beta", classify.beta),
    ] {
        // Above 0.5 the test would call a commit bad on evidence that it is good.
        if !(x > 0.0 && x < 0.5) {
            return Err(v.field(
                name,
                "must be an error rate above 0 and below 0.5 (e.g. 0.01)",
            ));
        }
    }
    if !(classify.confidence > 0.5 && classify.confidence < 1.0) {
        return Err(v.field(
            "classify.confidence",
            "must be a probability above 0.5 and below 1 (e.g. 0.95)",
        ));
    }

    let (goods, bad) = goods_and_bad;
    Ok(HuntFile::Kernel(Box::new(HuntConfig {
        source: path.to_owned(),
        name,
        repo,
        goods,
        bad,
        paths: raw.hunt.paths,
        first_parent: raw.hunt.first_parent,
        state_dir,
        build,
        hosts,
        workload,
        classify,
        report,
    })))
}

/// Raw workload file: a `kind` and that kind's parameters.
fn load_workload(path: &Path) -> Result<Workload, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let value: toml::Value = toml::from_str(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    // The TOML maps one to one onto the wire type, which refuses unknown fields.
    let json = serde_json::to_value(&value).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    serde_json::from_value(json).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        message: format!("{e} (known kinds: fsync-latency, sequential, threads, fio, command; see workloads/ for examples)"),
    })
}

pub(super) struct Validator<'a> {
    path: &'a Path,
    base: &'a Path,
}

impl Validator<'_> {
    pub(super) fn field(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            path: self.path.to_owned(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(super) fn path(&self, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let expanded = expand(raw).map_err(|m| self.field(field, m))?;
        let p = PathBuf::from(expanded);
        Ok(if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        })
    }
}
