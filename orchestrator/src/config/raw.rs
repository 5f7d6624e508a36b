//! The hunt file as written: serde structs that refuse unknown fields, before any check.
//!
//! Every integer is an `i64` (what TOML holds), so that a negative or huge value reaches
//! validation and gets its range in the error, not serde's "expected u32".

use serde::Deserialize;

/// Raw `hunt.toml`, as written by the user.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHunt {
    pub(super) hunt: RawHuntSection,
    pub(super) build: Option<RawBuild>,
    #[serde(default)]
    pub(super) hosts: Vec<RawHost>,
    pub(super) workload: Option<RawWorkloadRef>,
    pub(super) classify: Option<RawClassify>,
    pub(super) test: Option<RawTest>,
    #[serde(default)]
    pub(super) report: RawReport,
    pub(super) chain: Option<RawChain>,
}

/// `[chain]`: a prebuilt hunt's source stage.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChain {
    pub(super) repo: Option<String>,
    #[serde(default)]
    pub(super) revisions: std::collections::BTreeMap<String, String>,
    pub(super) config: Option<String>,
    pub(super) jobs: Option<i64>,
    pub(super) ccache: Option<String>,
    pub(super) distcc: Option<Vec<String>>,
    pub(super) make_args: Option<Vec<String>>,
    pub(super) timeout_s: Option<i64>,
    /// Leave out the commits that cannot change the kernel (issue 35); default true.
    pub(super) prune: Option<bool>,
}

/// `[test]`: a command run in a checkout of each candidate (a local command hunt).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTest {
    pub(super) command: String,
    pub(super) timeout_s: Option<i64>,
    pub(super) jobs: Option<i64>,
    // A metric hunt: `metric` set, the rest optional.
    pub(super) metric: Option<RawMetric>,
    pub(super) build: Option<String>,
    pub(super) build_timeout_s: Option<i64>,
    pub(super) output: Option<String>,
    pub(super) format: Option<String>,
    pub(super) pattern: Option<String>,
    pub(super) direction: Option<String>,
}

/// `metric = "mean"`, or `metric = { benchmark = "./bench", field = "mean" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawMetric {
    Field(String),
    Table(RawMetricTable),
}

/// `metric = { benchmark = "./bench", field = "mean" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetricTable {
    pub(super) benchmark: Option<String>,
    pub(super) field: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    pub(super) web_link: Option<String>,
    pub(super) bisected_by: Option<String>,
    pub(super) reported_by: Option<String>,
    pub(super) closes: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHuntSection {
    pub(super) name: String,
    // Required unless `[build] kind = "prebuilt"`: checked in validation.
    pub(super) repo: Option<String>,
    pub(super) good: Option<OneOrMany>,
    pub(super) bad: Option<String>,
    pub(super) state_dir: Option<String>,
    #[serde(default)]
    pub(super) paths: Vec<String>,
    #[serde(default)]
    pub(super) first_parent: bool,
}

/// `good = "v1"` or `good = ["v1", "v2"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuild {
    /// `"source"` (the default: build each commit) or `"prebuilt"` (boot `kernels`).
    pub(super) kind: Option<String>,
    pub(super) kernels: Option<Vec<String>>,
    pub(super) config: Option<String>,
    pub(super) cache_dir: Option<String>,
    pub(super) jobs: Option<i64>,
    pub(super) ccache: Option<String>,
    /// distcc hosts, each `host[:port][/slots]`.
    pub(super) distcc: Option<Vec<String>>,
    pub(super) make_args: Option<Vec<String>>,
    pub(super) timeout_s: Option<i64>,
    /// Leave out the commits that cannot change the kernel (issue 35); default true.
    pub(super) prune: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) name: Option<String>,
    pub(super) kind: String,
    pub(super) memory_mb: Option<i64>,
    pub(super) cpus: Option<i64>,
    pub(super) accel: Option<String>,
    pub(super) boot_timeout_s: Option<i64>,
    pub(super) scratch_mb: Option<i64>,
    pub(super) extra_cmdline: Option<String>,
    pub(super) disk: Option<String>,
    pub(super) disk_cache: Option<String>,
    pub(super) disk_mb_s: Option<i64>,
    pub(super) disk_iops: Option<i64>,
    pub(super) disk_queues: Option<i64>,
    pub(super) disk_queue_size: Option<i64>,
    // kind = "ssh"
    pub(super) address: Option<String>,
    pub(super) identity_file: Option<String>,
    pub(super) known_hosts: Option<String>,
    pub(super) insecure_ignore_host_key: Option<bool>,
    pub(super) keepalive_s: Option<i64>,
    pub(super) connect_timeout_s: Option<i64>,
    pub(super) command_timeout_s: Option<i64>,
    pub(super) install: Option<String>,
    pub(super) kexec_cmdline: Option<String>,
    pub(super) grub_entry: Option<String>,
    pub(super) install_commands: Option<Vec<String>>,
    pub(super) reboot_command: Option<String>,
    pub(super) power_cycle: Option<String>,
    pub(super) console: Option<String>,
    pub(super) agent_port: Option<i64>,
    pub(super) agent_url: Option<String>,
    pub(super) remote_dir: Option<String>,
    // kind = "lava"
    pub(super) server: Option<String>,
    pub(super) token_file: Option<String>,
    pub(super) token_env: Option<String>,
    /// Read only to refuse it: a secret does not go in a hunt file.
    pub(super) token: Option<toml::Value>,
    pub(super) device_type: Option<String>,
    pub(super) tags: Option<Vec<String>>,
    pub(super) jobs: Option<i64>,
    pub(super) job_timeout_s: Option<i64>,
    pub(super) server_deadline_s: Option<i64>,
    pub(super) images_url: Option<String>,
}

impl RawHost {
    /// Names of the fields that only `kind = "ssh"` reads, that are set.
    pub(super) fn ssh_fields_set(&self) -> Vec<&'static str> {
        let set = [
            ("address", self.address.is_some()),
            ("identity_file", self.identity_file.is_some()),
            ("known_hosts", self.known_hosts.is_some()),
            (
                "insecure_ignore_host_key",
                self.insecure_ignore_host_key.is_some(),
            ),
            ("keepalive_s", self.keepalive_s.is_some()),
            ("connect_timeout_s", self.connect_timeout_s.is_some()),
            ("command_timeout_s", self.command_timeout_s.is_some()),
            ("install", self.install.is_some()),
            ("kexec_cmdline", self.kexec_cmdline.is_some()),
            ("grub_entry", self.grub_entry.is_some()),
            ("install_commands", self.install_commands.is_some()),
            ("reboot_command", self.reboot_command.is_some()),
            ("power_cycle", self.power_cycle.is_some()),
            ("console", self.console.is_some()),
            ("agent_port", self.agent_port.is_some()),
            ("agent_url", self.agent_url.is_some()),
            ("remote_dir", self.remote_dir.is_some()),
        ];
        set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }

    /// Names of the fields that only `kind = "lava"` reads, that are set.
    pub(super) fn lava_fields_set(&self) -> Vec<&'static str> {
        let set = [
            ("server", self.server.is_some()),
            ("token_file", self.token_file.is_some()),
            ("token_env", self.token_env.is_some()),
            ("device_type", self.device_type.is_some()),
            ("tags", self.tags.is_some()),
            ("jobs", self.jobs.is_some()),
            ("job_timeout_s", self.job_timeout_s.is_some()),
            ("server_deadline_s", self.server_deadline_s.is_some()),
            ("images_url", self.images_url.is_some()),
        ];
        set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }

    /// Names of the fields that only `kind = "qemu"` reads, that are set.
    pub(super) fn qemu_fields_set(&self) -> Vec<&'static str> {
        let set = [
            ("memory_mb", self.memory_mb.is_some()),
            ("cpus", self.cpus.is_some()),
            ("accel", self.accel.is_some()),
            ("scratch_mb", self.scratch_mb.is_some()),
            ("extra_cmdline", self.extra_cmdline.is_some()),
            ("disk", self.disk.is_some()),
            ("disk_cache", self.disk_cache.is_some()),
            ("disk_mb_s", self.disk_mb_s.is_some()),
            ("disk_iops", self.disk_iops.is_some()),
            ("disk_queues", self.disk_queues.is_some()),
            ("disk_queue_size", self.disk_queue_size.is_some()),
        ];
        set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkloadRef {
    pub(super) file: String,
    pub(super) metric: String,
    #[serde(default = "default_direction")]
    pub(super) direction: String,
    pub(super) timeout_s: Option<i64>,
}

pub(super) fn default_direction() -> String {
    "lower-is-better".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClassify {
    /// Refused with a pointer to what replaced it (baselines are now sequential).
    pub(super) baseline_boots: Option<toml::Value>,
    pub(super) mode: Option<String>,
    pub(super) relative: Option<f64>,
    pub(super) threshold: Option<f64>,
    pub(super) min_boots: Option<i64>,
    pub(super) max_boots: Option<i64>,
    pub(super) min_effect: Option<f64>,
    pub(super) max_failed_boots: Option<i64>,
    pub(super) alpha: Option<f64>,
    pub(super) beta: Option<f64>,
    pub(super) confidence: Option<f64>,
    pub(super) drift_check_every: Option<i64>,
    pub(super) drift_lasts_boots: Option<i64>,
    pub(super) drift_lasts_minutes: Option<i64>,
    pub(super) confirm_pairs: Option<i64>,
    pub(super) confirm_max_pairs: Option<i64>,
    pub(super) refine_boots: Option<i64>,
    pub(super) max_baseline_boots: Option<i64>,
    pub(super) max_culprits: Option<i64>,
    pub(super) revert: Option<bool>,
}
