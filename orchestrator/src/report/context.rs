//! What a report is made from besides the journal: the hunt file's settings, read from a
//! kernel hunt file or a metric command hunt's.

use crate::config::{Direction, ReportConfig};
use std::path::Path;

/// What a report is made from besides the journal: the hunt file's settings.
pub struct Context<'a> {
    /// The hunt's name.
    pub name: &'a str,
    /// The hunt file (for "how to reproduce").
    pub hunt_file: &'a Path,
    /// The workload file.
    pub workload_file: &'a Path,
    /// The metric commits are judged by.
    pub metric: &'a str,
    /// Which way is worse.
    pub direction: Direction,
    /// Web link and trailers.
    pub settings: &'a ReportConfig,
    /// The statistics' settings (error rates and the confidence target, for the reasons).
    pub classify: &'a crate::config::ClassifyConfig,
    /// A metric command hunt's command (each "boot" is one run of it); `None` for kernels.
    pub command: Option<&'a str>,
    /// The journal is `firstbad reproduce`'s: two kernels compared, nothing bisected.
    pub reproduction: bool,
}

impl<'a> Context<'a> {
    /// What a kernel hunt's report reads from its hunt file.
    pub fn kernel(cfg: &'a crate::config::HuntConfig, reproduction: bool) -> Context<'a> {
        Context {
            name: &cfg.name,
            hunt_file: &cfg.source,
            workload_file: &cfg.workload.file,
            metric: &cfg.workload.metric,
            direction: cfg.workload.direction,
            settings: &cfg.report,
            classify: &cfg.classify,
            command: None,
            reproduction,
        }
    }

    /// What a report of a measured hunt reads from its hunt file (a kernel hunt, or a metric
    /// command hunt whose command is its workload); `None` for a hunt judged by exit status.
    pub fn of(file: &'a crate::config::HuntFile, reproduction: bool) -> Option<Context<'a>> {
        use crate::config::HuntFile;
        Some(match file {
            HuntFile::Kernel(cfg) => Context::kernel(cfg, reproduction),
            HuntFile::Local(cfg) => {
                let m = cfg.test.measure.as_ref()?;
                Context {
                    name: &cfg.name,
                    hunt_file: &cfg.source,
                    // The command is in the hunt file: it is the workload.
                    workload_file: &cfg.source,
                    metric: &m.metric.field,
                    direction: m.direction,
                    settings: &cfg.report,
                    classify: &m.classify,
                    command: Some(&cfg.test.command),
                    reproduction,
                }
            }
        })
    }
}
