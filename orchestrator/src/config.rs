//! Hunt configuration: a TOML file parsed into raw structs, then validated once into types
//! that cannot hold a bad value.
//!
//! Relative paths are relative to the directory of the file that names them; `~/` and
//! `${VAR}` / `${VAR:-default}` are expanded in paths.

use crate::error::ConfigError;
use firstbad_wire::Workload;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Raw `hunt.toml`, as written by the user.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHunt {
    hunt: RawHuntSection,
    build: Option<RawBuild>,
    #[serde(default)]
    hosts: Vec<RawHost>,
    workload: Option<RawWorkloadRef>,
    classify: Option<RawClassify>,
    test: Option<RawTest>,
    #[serde(default)]
    report: RawReport,
}

/// `[test]`: a command run in a checkout of each candidate (a local command hunt).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    command: String,
    timeout_s: Option<u64>,
    jobs: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    web_link: Option<String>,
    bisected_by: Option<String>,
    reported_by: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHuntSection {
    name: String,
    repo: String,
    good: OneOrMany,
    bad: String,
    state_dir: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    first_parent: bool,
}

/// `good = "v1"` or `good = ["v1", "v2"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuild {
    config: String,
    cache_dir: Option<String>,
    jobs: Option<u32>,
    #[serde(default = "default_ccache")]
    ccache: String,
    #[serde(default)]
    make_args: Vec<String>,
    timeout_s: Option<u64>,
}

fn default_ccache() -> String {
    "auto".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Option<String>,
    kind: String,
    memory_mb: Option<u32>,
    cpus: Option<u32>,
    accel: Option<String>,
    boot_timeout_s: Option<u64>,
    scratch_mb: Option<u32>,
    extra_cmdline: Option<String>,
    // kind = "ssh"
    address: Option<String>,
    identity_file: Option<String>,
    known_hosts: Option<String>,
    insecure_ignore_host_key: Option<bool>,
    keepalive_s: Option<u64>,
    connect_timeout_s: Option<u64>,
    command_timeout_s: Option<u64>,
    install: Option<String>,
    kexec_cmdline: Option<String>,
    grub_entry: Option<String>,
    install_commands: Option<Vec<String>>,
    reboot_command: Option<String>,
    power_cycle: Option<String>,
    console: Option<String>,
    agent_port: Option<u16>,
    agent_url: Option<String>,
    remote_dir: Option<String>,
}

impl RawHost {
    /// Names of the fields that only `kind = "ssh"` reads, that are set.
    fn ssh_fields_set(&self) -> Vec<&'static str> {
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

    /// Names of the fields that only `kind = "qemu"` reads, that are set.
    fn qemu_fields_set(&self) -> Vec<&'static str> {
        let set = [
            ("memory_mb", self.memory_mb.is_some()),
            ("cpus", self.cpus.is_some()),
            ("accel", self.accel.is_some()),
            ("scratch_mb", self.scratch_mb.is_some()),
            ("extra_cmdline", self.extra_cmdline.is_some()),
        ];
        set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkloadRef {
    file: String,
    metric: String,
    #[serde(default = "default_direction")]
    direction: String,
    timeout_s: Option<u64>,
}

fn default_direction() -> String {
    "lower-is-better".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClassify {
    /// Refused with a pointer to what replaced it (baselines are now sequential).
    baseline_boots: Option<u32>,
    mode: Option<String>,
    relative: Option<f64>,
    threshold: Option<f64>,
    min_boots: Option<u32>,
    max_boots: Option<u32>,
    min_effect: Option<f64>,
    max_failed_boots: Option<u32>,
    alpha: Option<f64>,
    beta: Option<f64>,
    confidence: Option<f64>,
    drift_check_every: Option<u32>,
    confirm_pairs: Option<u32>,
    refine_boots: Option<u32>,
}

/// A validated hunt: everything `firstbad run` needs, with absolute paths.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    /// The file this came from, for messages.
    pub source: PathBuf,
    /// Short name of the hunt (used for the default state directory).
    pub name: String,
    /// The kernel git repository.
    pub repo: PathBuf,
    /// The known-good revisions (at least one), any syntax git accepts; the first is measured
    /// as the good baseline.
    pub goods: Vec<String>,
    /// Only commits changing these paths are tested (`git bisect start -- <paths>`).
    pub paths: Vec<String>,
    /// Follow only first parents (`git bisect start --first-parent`).
    pub first_parent: bool,
    /// The known-bad revision.
    pub bad: String,
    /// Where the journal, build logs and console logs of this hunt live.
    pub state_dir: PathBuf,
    /// How candidates are built.
    pub build: BuildConfig,
    /// The test hosts (at least one).
    pub hosts: Vec<HostConfig>,
    /// The workload and the metric it is judged by.
    pub workload: WorkloadConfig,
    /// Classification parameters.
    pub classify: ClassifyConfig,
    /// What reports add: a web link for commits and the trailers of the e-mail report.
    pub report: ReportConfig,
}

/// A validated hunt file: a kernel hunt, or a command run on this machine.
#[derive(Debug, Clone)]
pub enum HuntFile {
    /// `[build]`, `[[hosts]]`, `[workload]`: build, boot and measure kernels.
    Kernel(Box<HuntConfig>),
    /// `[test]`: run a command in a checkout of each candidate (see [`crate::local`]).
    Local(Box<LocalConfig>),
}

impl HuntFile {
    /// The hunt's name.
    pub fn name(&self) -> &str {
        match self {
            HuntFile::Kernel(c) => &c.name,
            HuntFile::Local(c) => &c.name,
        }
    }

    /// Where the hunt's journal lives.
    pub fn state_dir(&self) -> &Path {
        match self {
            HuntFile::Kernel(c) => &c.state_dir,
            HuntFile::Local(c) => &c.state_dir,
        }
    }

    /// The repository bisected.
    pub fn repo(&self) -> &Path {
        match self {
            HuntFile::Kernel(c) => &c.repo,
            HuntFile::Local(c) => &c.repo,
        }
    }
}

/// A validated local command hunt: `[hunt]` and `[test]`, no kernel.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The file this came from, for messages.
    pub source: PathBuf,
    /// Short name of the hunt (used for the default state directory).
    pub name: String,
    /// The git repository.
    pub repo: PathBuf,
    /// The known-good revisions (at least one).
    pub goods: Vec<String>,
    /// The known-bad revision.
    pub bad: String,
    /// Only commits changing these paths are tested (`git bisect start -- <paths>`).
    pub paths: Vec<String>,
    /// Follow only first parents (`git bisect start --first-parent`).
    pub first_parent: bool,
    /// Where the journal, the checkouts and the command logs live.
    pub state_dir: PathBuf,
    /// The command and how it runs.
    pub test: TestConfig,
    /// What reports add.
    pub report: ReportConfig,
}

/// The `[test]` table: the command that judges a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestConfig {
    /// Run with `sh -c` in a checkout of the candidate; exit status as `git bisect run`.
    pub command: String,
    /// A run that lasts longer is killed (with its process group); the commit is skipped.
    pub timeout_s: u64,
    /// Checkouts tested at once (the "hosts" of a local hunt).
    pub jobs: u32,
}

/// The optional `[report]` table.
#[derive(Debug, Clone, Default)]
pub struct ReportConfig {
    /// Web link to a commit, with `{commit}` standing for its full id, e.g.
    /// `https://git.kernel.org/torvalds/c/{commit}`.
    pub web_link: Option<String>,
    /// `Bisected-by:` trailer of the e-mail report (`Name <address>`).
    pub bisected_by: Option<String>,
    /// `Reported-by:` trailer of the e-mail report.
    pub reported_by: Option<String>,
}

/// How candidate kernels are built.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// Base kernel config copied to `$O/.config` before `make olddefconfig`.
    pub kernel_config: PathBuf,
    /// Where build directories and kernel artifacts are cached across hunts.
    pub cache_dir: PathBuf,
    /// `make -j`.
    pub jobs: u32,
    /// Whether to build through ccache.
    pub ccache: Ccache,
    /// Extra `make` arguments (`CC=clang`, `LLVM=1`).
    pub make_args: Vec<String>,
    /// A build that runs longer is killed and counted as failed (a skip).
    pub timeout_s: u64,
}

/// ccache use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ccache {
    /// Use it when `ccache` is on PATH.
    Auto,
    /// Always; fail when missing.
    On,
    /// Never.
    Off,
}

/// One test host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Name in logs and the journal.
    pub name: String,
    /// What kind of host it is.
    pub kind: HostKind,
}

/// Host kinds.
#[derive(Debug, Clone)]
pub enum HostKind {
    /// A local qemu VM firstbad boots itself.
    Qemu(QemuConfig),
    /// A machine firstbad reaches over SSH, installs kernels on and reboots.
    Ssh(Box<SshConfig>),
}

/// A machine reached over SSH (`kind = "ssh"`).
#[derive(Debug, Clone)]
pub struct SshConfig {
    /// Who and where, with authentication, host key check and keepalive.
    pub target: crate::hosts::ssh_conn::SshTarget,
    /// Bound on TCP connect, handshake and authentication.
    pub connect_timeout_s: u64,
    /// Bound on any one remote command (uploads get this plus 1 s per MiB).
    pub command_timeout_s: u64,
    /// From the reboot to a verified machine with a healthy agent.
    pub boot_timeout_s: u64,
    /// How a candidate is installed and booted.
    pub install: Install,
    /// Local shell command that power-cycles the machine (`ipmitool ... chassis power
    /// cycle`, a PDU script); without it a host that does not come back needs a person.
    pub power_cycle: Option<String>,
    /// Local shell command whose output is the machine's console (`ipmitool ... sol
    /// activate`, `virsh console`, a serial server); copied to each boot's console log.
    pub console: Option<String>,
    /// Port the agent listens on, on the machine.
    pub agent_port: u16,
    /// Where firstbad reaches the agent (default `http://<host>:<agent_port>`).
    pub agent_url: String,
    /// Directory on the machine for kernels, the agent and its scratch files.
    pub remote_dir: String,
}

/// How an ssh host installs and boots a candidate. Placeholders `{image}`, `{release}` and
/// `{initrd}` in user text are replaced by shell-quoted values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// `kexec -l` the image with this command line (default: the running kernel's
    /// `/proc/cmdline`), then `kexec -e`.
    Kexec {
        /// The candidate's command line, or `None` for the running one.
        cmdline: Option<String>,
    },
    /// Copy to /boot, `update-grub`, `grub-reboot <entry>` (a one-time entry: a kernel that
    /// does not boot falls back to the default on the next power cycle), `reboot`.
    GrubReboot {
        /// The menu entry, e.g. `Advanced options for Debian GNU/Linux>Debian GNU/Linux,
        /// with Linux {release}`.
        entry: String,
    },
    /// The user's own commands, then the reboot command.
    Commands {
        /// Run in order; any failure fails the boot.
        commands: Vec<String>,
        /// Run in the background after them (default `reboot`).
        reboot: String,
    },
}

/// A local qemu VM.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    /// Guest memory in MiB.
    pub memory_mb: u32,
    /// Guest CPUs.
    pub cpus: u32,
    /// Accelerator choice.
    pub accel: Accel,
    /// From qemu start to a healthy agent; past it the boot is a failure (a skip).
    pub boot_timeout_s: u64,
    /// Size of the ext4 scratch disk the workload writes to.
    pub scratch_mb: u32,
    /// Appended to the kernel command line.
    pub extra_cmdline: String,
}

/// qemu accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM when a probe with a timeout shows that it works, TCG otherwise.
    Auto,
    /// Always KVM.
    Kvm,
    /// Always TCG (software emulation).
    Tcg,
}

/// Which way is worse for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Latency: higher is a regression.
    LowerIsBetter,
    /// Throughput: lower is a regression.
    HigherIsBetter,
}

/// The workload and how it is judged.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// The workload file, for messages and reports.
    pub file: PathBuf,
    /// The workload sent to the agent.
    pub workload: Workload,
    /// The per-boot metric compared between commits (a key of `WorkloadResult::metrics`).
    pub metric: String,
    /// Which way is worse.
    pub direction: Direction,
    /// A workload that runs longer is cancelled and the boot counted as failed.
    pub timeout_s: u64,
}

/// What "bad" means for a commit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClassifyMode {
    /// Like the bad endpoint rather than the good one: both endpoints are measured, interleaved,
    /// until the regression is confirmed or refuted (the default).
    Baselines,
    /// Worse than the good endpoint by at least this share (0.2 = 20% slower): for hunts whose
    /// bad endpoint is not worth measuring as a reference.
    Relative(f64),
    /// Worse than this absolute value of the metric (e.g. fsync p99 above 500 ms).
    Absolute(f64),
}

/// Parameters of the statistics (see [`crate::sequential`] and [`crate::posterior`]).
#[derive(Debug, Clone)]
pub struct ClassifyConfig {
    /// What "bad" means.
    pub mode: ClassifyMode,
    /// Boots of a candidate before a verdict may be given, however clear the first ones are.
    pub min_boots: u32,
    /// Boots of a candidate after which it is called undecided (a skip).
    pub max_boots: u32,
    /// Smallest relative difference between good and bad that counts (0.05 = 5%).
    pub min_effect: f64,
    /// Failed boots of a candidate after which it is skipped.
    pub max_failed_boots: u32,
    /// Sequential test: probability of calling a good commit bad (default 0.01).
    pub alpha: f64,
    /// Sequential test: probability of calling a bad commit good (default 0.01).
    pub beta: f64,
    /// The culprit is confirmed when its posterior probability reaches this (default 0.95).
    pub confidence: f64,
    /// Re-measure the good endpoint after every this many verdicts: the posterior's firmest
    /// hold on how the host moves, and a check that stops the hunt on a move the earlier
    /// re-measurements' trend does not explain; 0 turns it off.
    pub drift_check_every: u32,
    /// Interleaved boots of the culprit and its parent, each, in the final re-test; 0 turns
    /// it off.
    pub confirm_pairs: u32,
    /// Boots the posterior phase may spend after the bisection, per bit of the range
    /// (⌈log2(candidates + 1)⌉), re-testing what is in doubt; 0 turns it off (git bisect's
    /// answer stands).
    pub refine_boots: u32,
}

/// Metric keys the `fsync-latency` workload reports.
pub const FSYNC_LATENCY_METRICS: &[&str] = &[
    "fsync_latency_p50_ms",
    "fsync_latency_p90_ms",
    "fsync_latency_p99_ms",
    "fsync_latency_p999_ms",
    "fsync_latency_max_ms",
    "fsync_latency_mean_ms",
    "writer_mb_s",
];

impl HuntConfig {
    /// Reads and validates a hunt file.
    pub fn load(path: &Path) -> Result<HuntConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates hunt-file text; `path` names it in errors and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<HuntConfig, ConfigError> {
        match HuntFile::parse(path, text)? {
            HuntFile::Kernel(cfg) => Ok(*cfg),
            HuntFile::Local(_) => Err(ConfigError::Field {
                path: path.to_owned(),
                field: "test".into(),
                message: "this hunt runs a command on this machine ([test]), it boots no kernel: \
                          `firstbad run` handles it; `try` is for kernel hunts"
                    .into(),
            }),
        }
    }
}

impl HuntFile {
    /// Reads and validates a hunt file of either kind.
    pub fn load(path: &Path) -> Result<HuntFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates hunt-file text of either kind: `[test]` makes a local command hunt,
    /// `[build]` + `[[hosts]]` + `[workload]` a kernel hunt.
    pub fn parse(path: &Path, text: &str) -> Result<HuntFile, ConfigError> {
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
                        format!(
                            "{other:?} is not a host kind this version knows (\"qemu\", \"ssh\")"
                        ),
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
}

fn validate_ssh(
    v: &Validator,
    at: &dyn Fn(&str) -> String,
    h: &RawHost,
) -> Result<SshConfig, ConfigError> {
    use crate::hosts::ssh_conn::{HostKeyCheck, SshAuth, SshTarget};
    let address = h.address.as_deref().ok_or_else(|| {
        v.field(
            &at("address"),
            "is missing: give user@host or user@host:port",
        )
    })?;
    let (user, host, port) = parse_address(address).ok_or_else(|| {
        v.field(
            &at("address"),
            format!("{address:?} is not user@host or user@host:port"),
        )
    })?;
    let auth = match &h.identity_file {
        Some(f) => SshAuth::KeyFile(v.path(&at("identity_file"), f)?),
        None => SshAuth::Agent,
    };
    let host_key = match (h.insecure_ignore_host_key.unwrap_or(false), &h.known_hosts) {
        (true, Some(_)) => {
            return Err(v.field(
                &at("insecure_ignore_host_key"),
                "is true while known_hosts is set: keep one (known_hosts checks the key)",
            ))
        }
        (true, None) => HostKeyCheck::InsecureIgnore,
        (false, k) => HostKeyCheck::KnownHosts(v.path(
            &at("known_hosts"),
            k.as_deref().unwrap_or("~/.ssh/known_hosts"),
        )?),
    };
    let install = match h.install.as_deref().unwrap_or("kexec") {
        "kexec" => Install::Kexec { cmdline: h.kexec_cmdline.clone() },
        "grub-reboot" => Install::GrubReboot {
            entry: h.grub_entry.clone().ok_or_else(|| {
                v.field(
                    &at("grub_entry"),
                    "is missing for install = \"grub-reboot\": give the menu entry, e.g. \"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {release}\"",
                )
            })?,
        },
        "commands" => {
            let commands = h.install_commands.clone().unwrap_or_default();
            if commands.is_empty() {
                return Err(v.field(
                    &at("install_commands"),
                    "is missing or empty for install = \"commands\": list the commands, using {image}, {release}, {initrd}",
                ));
            }
            Install::Commands {
                commands,
                reboot: h.reboot_command.clone().unwrap_or_else(|| "reboot".into()),
            }
        }
        other => {
            return Err(v.field(
                &at("install"),
                format!("{other:?} is not one of \"kexec\", \"grub-reboot\", \"commands\""),
            ))
        }
    };
    for (f, bad) in [
        (
            "kexec_cmdline",
            h.kexec_cmdline.is_some() && !matches!(install, Install::Kexec { .. }),
        ),
        (
            "grub_entry",
            h.grub_entry.is_some() && !matches!(install, Install::GrubReboot { .. }),
        ),
        (
            "install_commands",
            h.install_commands.is_some() && !matches!(install, Install::Commands { .. }),
        ),
        (
            "reboot_command",
            h.reboot_command.is_some() && !matches!(install, Install::Commands { .. }),
        ),
    ] {
        if bad {
            return Err(v.field(
                &at(f),
                "is not read by this install method: remove it, or change install",
            ));
        }
    }
    let agent_port = h.agent_port.unwrap_or(firstbad_wire::GUEST_AGENT_PORT);
    let agent_url = h.agent_url.clone().unwrap_or_else(|| {
        if host.contains(':') {
            format!("http://[{host}]:{agent_port}")
        } else {
            format!("http://{host}:{agent_port}")
        }
    });
    if !agent_url.starts_with("http://") {
        return Err(v.field(
            &at("agent_url"),
            format!("{agent_url:?} is not an http:// URL"),
        ));
    }
    let remote_dir = h
        .remote_dir
        .clone()
        .unwrap_or_else(|| "/var/tmp/firstbad".into());
    if !remote_dir.starts_with('/') {
        return Err(v.field(
            &at("remote_dir"),
            format!("{remote_dir:?} must be an absolute path on the machine"),
        ));
    }
    let positive = |f: &str, x: Option<u64>, default: u64| -> Result<u64, ConfigError> {
        match x {
            Some(0) => Err(v.field(&at(f), "must be at least 1")),
            Some(x) => Ok(x),
            None => Ok(default),
        }
    };
    Ok(SshConfig {
        target: SshTarget {
            user,
            host,
            port,
            auth,
            host_key,
            // 15 s: a dead peer is noticed well inside any command deadline.
            keepalive: std::time::Duration::from_secs(positive("keepalive_s", h.keepalive_s, 15)?),
        },
        connect_timeout_s: positive("connect_timeout_s", h.connect_timeout_s, 15)?,
        command_timeout_s: positive("command_timeout_s", h.command_timeout_s, 120)?,
        // Server firmware alone can take minutes (memory training); kexec skips it.
        boot_timeout_s: positive("boot_timeout_s", h.boot_timeout_s, 600)?,
        install,
        power_cycle: h.power_cycle.clone(),
        console: h.console.clone(),
        agent_port,
        agent_url,
        remote_dir,
    })
}

/// `user@host`, `user@host:port`, `user@[v6]:port`.
fn parse_address(a: &str) -> Option<(String, String, u16)> {
    let (user, rest) = a.split_once('@')?;
    if user.is_empty() || rest.is_empty() {
        return None;
    }
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (h, after) = r.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 22,
            None => return None,
        };
        (h.to_owned(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_owned(), p.parse().ok()?),
            None => (rest.to_owned(), 22),
        }
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    Some((user.to_owned(), host, port))
}

/// The per-user cache directory (`$XDG_CACHE_HOME/firstbad` or `~/.cache/firstbad`).
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FIRSTBAD_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("firstbad");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("firstbad")
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

struct Validator<'a> {
    path: &'a Path,
    base: &'a Path,
}

impl Validator<'_> {
    fn field(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            path: self.path.to_owned(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn path(&self, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let expanded = expand(raw).map_err(|m| self.field(field, m))?;
        let p = PathBuf::from(expanded);
        Ok(if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        })
    }
}

/// Expands a leading `~/` and `${VAR}` / `${VAR:-default}` in a path.
fn expand(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let s = if let Some(rest) = raw.strip_prefix("~/") {
        let home = std::env::var("HOME").map_err(|_| "uses ~/ but HOME is not set".to_owned())?;
        out.push_str(&home);
        out.push('/');
        rest
    } else {
        raw
    };
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{raw:?} has an unclosed ${{"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(name), default) {
            (Ok(v), _) if !v.is_empty() => out.push_str(&v),
            (_, Some(d)) => out.push_str(&expand(d)?),
            _ => return Err(format!("{raw:?} uses ${{{name}}}, which is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn fixture(dir: &Path, hunt_extra: &str) -> PathBuf {
        write(dir, "kernel.config", "CONFIG_64BIT=y\n");
        write(
            dir,
            "fsync.toml",
            "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\nwriter_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
        );
        write(
            dir,
            "hunt.toml",
            &format!(
                "[hunt]\nname = \"t\"\nrepo = \"linux\"\ngood = \"v1\"\nbad = \"v2\"\n\n[build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n{hunt_extra}\n[workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
            ),
        )
    }

    #[test]
    fn a_good_file_validates_with_paths_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        let c = HuntConfig::load(&p).unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(c.repo, base.join("linux"));
        assert_eq!(c.state_dir, base.join("firstbad-state/t"));
        assert_eq!(c.hosts[0].name, "qemu0");
        assert!(matches!(c.workload.workload, Workload::FsyncLatency(ref f) if f.fsyncs == 10));
    }

    #[test]
    fn unknown_field_names_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "memroy_mb = 512\n");
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("hunt.toml"), "{e}");
        assert!(e.contains("memroy_mb"), "{e}");
    }

    #[test]
    fn bad_value_names_the_field_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "accel = \"hvf\"\n");
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("hosts[0].accel"), "{e}");
        assert!(e.contains("\"tcg\""), "{e}");
    }

    #[test]
    fn unknown_metric_lists_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("fsync_latency_p50_ms", "fsync_p50");
        std::fs::write(&p, text).unwrap();
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("workload.metric"), "{e}");
        assert!(e.contains("fsync_latency_p99_ms"), "{e}");
    }

    #[test]
    fn report_table_is_optional_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        assert!(HuntConfig::load(&p).unwrap().report.web_link.is_none());
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}\n[report]\nweb_link = \"https://x/c/{{commit}}\"\nbisected_by = \"A <a@b>\"\n")).unwrap();
        let c = HuntConfig::load(&p).unwrap();
        assert_eq!(c.report.bisected_by.as_deref(), Some("A <a@b>"));
        std::fs::write(&p, format!("{text}\n[report]\nweb_link = \"https://x/\"\n")).unwrap();
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("report.web_link"), "{e}");
        std::fs::write(&p, format!("{text}\n[report]\nreportd_by = \"x\"\n")).unwrap();
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("reportd_by"), "{e}");
    }

    #[test]
    fn classify_modes_are_checked_with_the_fix_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        let text = std::fs::read_to_string(&p).unwrap();
        let with = |classify: &str| {
            std::fs::write(&p, format!("{text}\n[classify]\n{classify}\n")).unwrap();
            HuntConfig::load(&p)
        };
        let c = with("").unwrap().classify;
        assert_eq!(c.mode, ClassifyMode::Baselines);
        assert_eq!((c.alpha, c.beta, c.confidence), (0.01, 0.01, 0.95));
        assert_eq!((c.drift_check_every, c.confirm_pairs), (4, 3));
        let c = with("mode = \"relative\"\nrelative = 0.2")
            .unwrap()
            .classify;
        assert_eq!(c.mode, ClassifyMode::Relative(0.2));
        let c = with("mode = \"absolute\"\nthreshold = 500.0")
            .unwrap()
            .classify;
        assert_eq!(c.mode, ClassifyMode::Absolute(500.0));
        for (bad, field, hint) in [
            ("mode = \"relative\"", "classify.relative", "0.2 means"),
            ("mode = \"absolute\"", "classify.threshold", "500.0"),
            (
                "threshold = 5.0",
                "classify.threshold",
                "mode = \"absolute\"",
            ),
            ("mode = \"vote\"", "classify.mode", "\"relative\""),
            ("baseline_boots = 3", "classify.baseline_boots", "remove it"),
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains(field) && e.contains(hint), "{bad}: {e}");
        }
    }

    #[test]
    fn range_options_one_or_several_goods_paths_first_parent() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        let c = HuntConfig::load(&p).unwrap();
        assert_eq!(c.goods, ["v1"]);
        assert!(c.paths.is_empty() && !c.first_parent);
        let text = std::fs::read_to_string(&p).unwrap().replace(
            "good = \"v1\"\n",
            "good = [\"v1\", \"v0.9\"]\npaths = [\"mm/\", \"fs/ext4/\"]\nfirst_parent = true\n",
        );
        std::fs::write(&p, &text).unwrap();
        let c = HuntConfig::load(&p).unwrap();
        assert_eq!(c.goods, ["v1", "v0.9"]);
        assert_eq!(c.paths, ["mm/", "fs/ext4/"]);
        assert!(c.first_parent);
        std::fs::write(&p, text.replace("\"fs/ext4/\"", "\"fs/*.c\"")).unwrap();
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("hunt.paths[1]") && e.contains("wildcards"),
            "{e}"
        );
        std::fs::write(&p, text.replace("[\"v1\", \"v0.9\"]", "[]")).unwrap();
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("hunt.good") && e.contains("at least one"), "{e}");
    }

    #[test]
    fn a_test_table_makes_a_local_command_hunt_without_kernel_tables() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[hunt]\nname = \"l\"\nrepo = \"r\"\ngood = \"v1\"\nbad = \"v2\"\n\n[test]\ncommand = \"make -s check\"\njobs = 3\n";
        let p = write(dir.path(), "hunt.toml", text);
        let HuntFile::Local(c) = HuntFile::load(&p).unwrap() else {
            panic!("not a local hunt")
        };
        assert_eq!(c.test.command, "make -s check");
        assert_eq!((c.test.jobs, c.test.timeout_s), (3, 3600));
        // HuntConfig (kernel hunts) refuses it, naming the table.
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains(": test:"), "{e}");
        // Mixing it with a kernel table is an error that names the table.
        write(
            dir.path(),
            "hunt.toml",
            &format!("{text}\n[build]\nconfig = \"k\"\n"),
        );
        let e = HuntFile::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("hunt.toml: build:") && e.contains("[test]"),
            "{e}"
        );
        write(
            dir.path(),
            "hunt.toml",
            &text.replace("jobs = 3", "jobs = 0"),
        );
        let e = HuntFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("test.jobs"), "{e}");
        write(
            dir.path(),
            "hunt.toml",
            &text.replace("jobs = 3", "job = 3"),
        );
        let e = HuntFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("job"), "{e}");
        // Neither [test] nor [build]: the message says both ways.
        write(
            dir.path(),
            "hunt.toml",
            text.split("[test]").next().unwrap(),
        );
        let e = HuntFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("build: missing") && e.contains("[test]"), "{e}");
    }

    #[test]
    fn an_ssh_host_validates_and_its_errors_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), "");
        let text = std::fs::read_to_string(&p).unwrap();
        let with = |host: &str| {
            std::fs::write(&p, text.replace("[[hosts]]\nkind = \"qemu\"\n", host)).unwrap();
            HuntConfig::load(&p)
        };
        let c = with("[[hosts]]\nname = \"lab1\"\nkind = \"ssh\"\naddress = \"root@lab1:2222\"\nidentity_file = \"id\"\npower_cycle = \"ipmitool power cycle\"\n").unwrap();
        let HostKind::Ssh(s) = &c.hosts[0].kind else {
            panic!("not ssh")
        };
        assert_eq!(
            (
                s.target.user.as_str(),
                s.target.host.as_str(),
                s.target.port
            ),
            ("root", "lab1", 2222)
        );
        assert_eq!(s.install, Install::Kexec { cmdline: None });
        assert_eq!(
            s.agent_url,
            format!("http://lab1:{}", firstbad_wire::GUEST_AGENT_PORT)
        );
        for (host, field, words) in [
            ("kind = \"ssh\"\naddress = \"lab1\"\n", "hosts[0].address", "user@host"),
            ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"pxe\"\n", "hosts[0].install", "grub-reboot"),
            ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"grub-reboot\"\n", "hosts[0].grub_entry", "menu entry"),
            ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"commands\"\n", "hosts[0].install_commands", "{image}"),
            ("kind = \"ssh\"\naddress = \"r@h\"\nmemory_mb = 512\n", "hosts[0].memory_mb", "not read"),
            ("kind = \"qemu\"\naddress = \"r@h\"\n", "hosts[0].address", "not read"),
            ("kind = \"ssh\"\naddress = \"r@h\"\ninsecure_ignore_host_key = true\nknown_hosts = \"k\"\n", "hosts[0].insecure_ignore_host_key", "keep one"),
        ] {
            let e = with(&format!("[[hosts]]\n{host}")).unwrap_err().to_string();
            assert!(e.contains("hunt.toml") && e.contains(field) && e.contains(words), "{e}");
        }
        let e = with("[[hosts]]\nname = \"a\"\nkind = \"qemu\"\n[[hosts]]\nname = \"a\"\nkind = \"ssh\"\naddress = \"r@h\"\n").unwrap_err().to_string();
        assert!(e.contains("hosts[1].name"), "{e}");
    }

    #[test]
    fn env_and_home_expand() {
        std::env::set_var("FIRSTBAD_TEST_EXPAND", "/x");
        assert_eq!(expand("${FIRSTBAD_TEST_EXPAND}/y").unwrap(), "/x/y");
        assert_eq!(expand("${FIRSTBAD_NOPE_NOPE:-/d}/y").unwrap(), "/d/y");
        assert!(expand("${FIRSTBAD_NOPE_NOPE}")
            .unwrap_err()
            .contains("not set"));
    }
}
