//! A series file (`firstbad watch`): a branch to follow, night after night, measured with the
//! tables of a kernel hunt file, or with a metric command hunt's `[test]` table (a benchmark
//! of any repository, built and run in a checkout of each head).
//!
//! ```toml
//! [series]
//! name = "ext4-nightly"
//! remote = "https://git.example.org/linux.git"   # or a path
//! branch = "master"
//! repo = "~/src/linux-watch"                     # the local repository it is fetched into
//! boots = 4                                      # boots of the head and of the reference, a night
//! second_look = 4                                # more of each on a suspicious night (0: none)
//!
//! [[series.workloads]]   # more workloads a night, each in boots of its own (kernel series)
//! name = "seqread"       # its metrics are named seqread/<metric>
//! file = "workloads/sequential-read-bs6144.toml"
//! metric = "mb_s"
//! direction = "higher-is-better"
//!
//! [build]    # [[hosts]], [workload], [classify], [report]: as in a hunt file
//! # or, for a benchmark of any repository instead of kernels:
//! # [test]   # build, command, metric, format: as in a metric command hunt
//! ```
//!
//! The hunt tables are validated by the hunt file's own code: the series' `[hunt]` table is
//! made from `[series]` (the night's two commits come in later), so that every field of
//! them has one definition, one set of bounds and one error message.

use super::bounds::{self, Bound};
use super::read;
use super::{HuntConfig, HuntFile, LocalConfig, MeasureConfig};
use crate::error::ConfigError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A validated series file.
#[derive(Debug, Clone)]
pub struct SeriesConfig {
    /// The file this came from, for messages.
    pub source: PathBuf,
    /// The series' name (its default state directory, the subject of its mails).
    pub name: String,
    /// Where the branch is fetched from: a path or a URL, as git takes it.
    pub remote: String,
    /// The branch followed.
    pub branch: String,
    /// The local repository fetched into and built from (created when missing).
    pub repo: PathBuf,
    /// The series database, the nights' journals, the hunts it starts.
    pub state_dir: PathBuf,
    /// Measured boots of the head and of the reference, each, a night.
    pub boots: usize,
    /// Boots of the head and of the reference, each, of a second look the same night when the
    /// night's boots are suspicious but not decisive ([`crate::changepoint::second_look`]); 0
    /// turns second looks off.
    pub second_look: usize,
    /// Nights in a row whose head does not build or boot before that raises its own alert.
    pub failure_nights: u32,
    /// Boots an automatic hunt may spend in all before it stops for a person.
    pub hunt_boots: u32,
    /// The first reference (any revision); without it, the head of the first night.
    pub reference: Option<String>,
    /// How an ssh remote is reached: its key (a cron job has no ssh agent), its host keys.
    pub ssh: SshSettings,
    /// Commits whose changes are known: a change they fall in is acknowledged at once.
    pub ignore: Vec<String>,
    /// Every metric judged, the workload's own first, with which way is worse; an extra
    /// workload's (`[[series.workloads]]`) is named `<name>/<metric>`.
    pub metrics: Vec<(String, super::Direction)>,
    /// Workloads measured every night besides `[workload]`, each in boots of its own
    /// (issue 36, item 5): a kernel series only.
    pub workloads: Vec<NamedWorkload>,
    /// Detection settings.
    pub detect: DetectSettings,
    /// Who is told, and how (`[notify]`, docs/notify.md); none without the table.
    pub notify: Option<super::notify::NotifyConfig>,
    /// The hunt file the nights and the automatic hunts are run with: `goods` and `bad` are
    /// empty here and set per night and per hunt. A kernel hunt, or a metric command hunt
    /// (never an exit-status one: [`SeriesConfig::parse`] refuses a `[test]` with no metric).
    pub hunt: HuntFile,
}

/// `[detect]`: when a move of the series is a regression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectSettings {
    /// Smallest relative move that counts (0.05 = 5%).
    pub min_effect: f64,
    /// The night's alarm: the chance of calling an unchanged head worse than its reference.
    pub alpha: f64,
    /// E-divisive's significance: the largest p-value of a change point (Otava's 0.001).
    pub max_p_value: f64,
    /// E-divisive's window, in nights (Otava's 50).
    pub window: usize,
    /// The accumulating test: quiet nights between two false alarms, on average.
    pub false_alarm_nights: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: String,
    remote: String,
    branch: Option<String>,
    repo: String,
    state_dir: Option<String>,
    boots: Option<i64>,
    second_look: Option<i64>,
    failure_nights: Option<i64>,
    hunt_boots: Option<i64>,
    reference: Option<String>,
    ssh_key: Option<String>,
    known_hosts: Option<String>,
    #[serde(default)]
    ignore: Vec<String>,
    #[serde(default)]
    metrics: Vec<RawSeriesMetric>,
    #[serde(default)]
    workloads: Vec<toml::Table>,
}

/// One of `[[series.workloads]]`: a `[workload]` table with a name.
#[derive(Debug, Clone)]
pub struct NamedWorkload {
    /// Its name: its metrics are `<name>/<metric>`, its boots are in `workloads/<name>/`.
    pub name: String,
    /// The workload, validated as a hunt file's `[workload]`.
    pub workload: super::WorkloadConfig,
}

/// `metrics = [{ name = "writer_mb_s", direction = "higher-is-better" }]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeriesMetric {
    name: String,
    direction: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDetect {
    min_effect: Option<f64>,
    alpha: Option<f64>,
    max_p_value: Option<f64>,
    window: Option<i64>,
    false_alarm_nights: Option<i64>,
}

/// `[series] boots`.
pub const SERIES_BOOTS: Bound = bounds::int(
    "series.boots",
    2,
    64,
    4,
    "boots of the head and of the reference a night; two is the least a spread comes from",
);
/// `[series] second_look`.
pub const SERIES_SECOND_LOOK: Bound = bounds::int(
    "series.second_look",
    0,
    64,
    4,
    "boots of the head and of the reference more on a suspicious night; 0 turns second looks off",
);
/// `[series] failure_nights`.
pub const SERIES_FAILURE_NIGHTS: Bound = bounds::int(
    "series.failure_nights",
    1,
    365,
    3,
    "nights in a row a head may fail to build or boot before that is an alert of its own",
);
/// `[series] hunt_boots`.
pub const SERIES_HUNT_BOOTS: Bound = bounds::int(
    "series.hunt_boots",
    16,
    100_000,
    400,
    "boots an automatic hunt may spend; 16 is the least its baselines take",
);
/// `[detect] min_effect`.
pub const DETECT_MIN_EFFECT: Bound = bounds::open(
    "detect.min_effect",
    0.0,
    10.0,
    bounds::Default::Float(0.05),
    "the smallest relative move that counts (0.05 = 5%)",
);
/// `[detect] alpha`.
pub const DETECT_ALPHA: Bound = bounds::open(
    "detect.alpha",
    0.0,
    0.5,
    bounds::Default::Float(0.01),
    "a probability: the night's false alarm rate",
);
/// `[detect] max_p_value`.
pub const DETECT_MAX_P_VALUE: Bound = bounds::open(
    "detect.max_p_value",
    0.0,
    0.5,
    bounds::Default::Float(0.001),
    "a probability: E-divisive's significance (Otava's default 0.001)",
);
/// `[detect] window`.
pub const DETECT_WINDOW: Bound = bounds::int(
    "detect.window",
    4,
    10_000,
    50,
    "nights E-divisive looks at around a change (Otava's default 50)",
);
/// `[detect] false_alarm_nights`.
pub const DETECT_FALSE_ALARM_NIGHTS: Bound = bounds::int(
    "detect.false_alarm_nights",
    20,
    1_000_000,
    400,
    "quiet nights between two false alarms of the accumulating test, on average; fewer find a change sooner",
);

/// Every number field of a series file's own tables.
pub const SERIES_BOUNDS: &[Bound] = &[
    SERIES_BOOTS,
    SERIES_SECOND_LOOK,
    SERIES_FAILURE_NIGHTS,
    SERIES_HUNT_BOOTS,
    DETECT_MIN_EFFECT,
    DETECT_ALPHA,
    DETECT_MAX_P_VALUE,
    DETECT_WINDOW,
    DETECT_FALSE_ALARM_NIGHTS,
];

impl SeriesConfig {
    /// Reads and validates a series file.
    pub fn load(path: &Path) -> Result<SeriesConfig, ConfigError> {
        Self::parse(path, &read::text_file(path)?)
    }

    /// Validates series-file text; `path` names it in errors and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<SeriesConfig, ConfigError> {
        read::check_text(path, text)?;
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| read::syntax(path, text, &e))?;
        let field = |field: &str, message: String| ConfigError::Field {
            path: path.to_owned(),
            field: field.to_owned(),
            message: read::one_line(&message, 240),
        };
        if table.contains_key("hunt") {
            return Err(field(
                "hunt",
                "a series has no [hunt]: [series] names the branch, and each night's two \
                 commits are chosen by firstbad"
                    .into(),
            ));
        }
        let raw_series = table.remove("series").ok_or_else(|| {
            field(
                "series",
                "missing: give [series] with name, remote, branch and repo".into(),
            )
        })?;
        let series: RawSeries = raw_series.try_into().map_err(|e: toml::de::Error| {
            field("series", read::short_unknown_field(e.message()))
        })?;
        let detect: RawDetect = match table.remove("detect") {
            Some(d) => d.try_into().map_err(|e: toml::de::Error| {
                field("detect", read::short_unknown_field(e.message()))
            })?,
            None => RawDetect::default(),
        };
        let notify = table
            .remove("notify")
            .map(|t| super::notify::parse(path, &t))
            .transpose()?;
        if series.remote.trim().is_empty() {
            return Err(field(
                "series.remote",
                "is empty: give the repository to follow, a path or a URL".into(),
            ));
        }
        // git reads a word that begins with '-' as an option: as a remote, or as the host of
        // one, it names no repository and never will (issue 32, finding 8).
        if let Some(at) = dash_at(&series.remote) {
            return Err(field(
                "series.remote",
                format!(
                    "{} begins with '-' ({at}): git would read it as an option, never as a \
                     repository; give a URL or a path (\"./-name\" for a directory so named)",
                    read::snippet(&series.remote)
                ),
            ));
        }
        // git's `ext::` runs the rest as a command and `fd::` talks over a descriptor it never
        // had: neither names a repository to follow (issue 61, finding 6).
        if let Some(transport) = command_transport(&series.remote) {
            return Err(field(
                "series.remote",
                format!(
                    "{} uses git's \"{transport}::\" transport, which runs a command or reads a \
                     file descriptor instead of fetching a repository: give a URL (https://, \
                     ssh://, file://) or a path",
                    read::snippet(&series.remote)
                ),
            ));
        }
        let branch = series.branch.unwrap_or_else(|| "master".into());
        if branch.trim().is_empty()
            || branch.starts_with('-')
            || branch.contains(['~', '^', ':', ' ', '*', '?', '[', '\\'])
        {
            return Err(field(
                "series.branch",
                format!("{} is not a branch name", read::snippet(&branch)),
            ));
        }
        // The hunt tables, validated as a hunt file's: `[hunt]` from `[series]`, with the
        // night's commits placeholders (HEAD is never used: each night sets both).
        let mut hunt = toml::Table::new();
        hunt.insert("name".into(), series.name.clone().into());
        hunt.insert("repo".into(), series.repo.clone().into());
        hunt.insert("good".into(), "HEAD".into());
        hunt.insert("bad".into(), "HEAD".into());
        if let Some(s) = &series.state_dir {
            hunt.insert("state_dir".into(), s.clone().into());
        }
        table.insert("hunt".into(), hunt.into());
        let hunt_text = toml::to_string(&table).expect("a parsed table serialises");
        let rename = |e| renamed(e, |field| field.replacen("hunt.", "series.", 1));
        let mut hunt = HuntFile::parse(path, &hunt_text).map_err(rename)?;
        // After the series' own tables: an error of theirs is named once, as theirs.
        let extra = extra_workloads(path, &table, &series.workloads, &field)?;
        for (i, c) in series.ignore.iter().enumerate() {
            if c.trim().is_empty() {
                return Err(field(
                    &format!("series.ignore[{i}]"),
                    "is empty: give a commit whose change is known".into(),
                ));
            }
        }
        let metrics = match &mut hunt {
            HuntFile::Kernel(k) => {
                if k.build.prebuilt().is_some() {
                    return Err(field(
                        "build.kind",
                        "a series follows a branch and builds its heads: prebuilt kernels are \
                         for hunts and reproduce"
                            .into(),
                    ));
                }
                k.goods.clear();
                k.bad.clear();
                let mut metrics = kernel_metrics(k, &series.metrics, &field)?;
                metrics.extend(extra.iter().map(|w| {
                    (
                        format!("{}/{}", w.name, w.workload.metric),
                        w.workload.direction,
                    )
                }));
                metrics
            }
            HuntFile::Local(l) => {
                let Some(m) = &l.test.measure else {
                    return Err(field(
                        "test.metric",
                        "missing: a series measures a number each night; give the metric the \
                         command prints (metric = \"ms\", and format when it is not JSON), \
                         as in a metric command hunt (docs/metric-hunts.md)"
                            .into(),
                    ));
                };
                if !series.metrics.is_empty() {
                    return Err(field(
                        "series.metrics",
                        "a [test] series judges the one metric of [test]: leave series.metrics \
                         out (more metrics a night are for kernel workloads)"
                            .into(),
                    ));
                }
                let metrics = vec![(m.metric.field.clone(), m.direction)];
                l.goods.clear();
                l.bad.clear();
                metrics
            }
        };
        let v = super::validate::Validator {
            path,
            base: path.parent().unwrap_or(Path::new(".")),
        };
        let remote = if series.remote.contains("://") || is_scp_like(&series.remote) {
            series.remote.clone()
        } else {
            v.path("series.remote", &series.remote)?
                .to_string_lossy()
                .into_owned()
        };
        Ok(SeriesConfig {
            source: path.to_owned(),
            name: hunt.name().to_owned(),
            remote,
            branch,
            repo: hunt.repo().to_owned(),
            state_dir: hunt.state_dir().to_owned(),
            boots: v.int(&SERIES_BOOTS, None, series.boots)?,
            second_look: v.int(&SERIES_SECOND_LOOK, None, series.second_look)?,
            failure_nights: v.int(&SERIES_FAILURE_NIGHTS, None, series.failure_nights)?,
            hunt_boots: v.int(&SERIES_HUNT_BOOTS, None, series.hunt_boots)?,
            reference: series.reference.filter(|r| !r.trim().is_empty()),
            ssh: SshSettings {
                key: series
                    .ssh_key
                    .as_deref()
                    .map(|k| v.path("series.ssh_key", k))
                    .transpose()?,
                known_hosts: series
                    .known_hosts
                    .as_deref()
                    .map(|k| v.path("series.known_hosts", k))
                    .transpose()?,
            },
            ignore: series.ignore,
            metrics,
            workloads: extra,
            detect: DetectSettings {
                min_effect: v.float(&DETECT_MIN_EFFECT, detect.min_effect)?,
                alpha: v.float(&DETECT_ALPHA, detect.alpha)?,
                max_p_value: v.float(&DETECT_MAX_P_VALUE, detect.max_p_value)?,
                window: v.int(&DETECT_WINDOW, None, detect.window)?,
                false_alarm_nights: v.int(
                    &DETECT_FALSE_ALARM_NIGHTS,
                    None,
                    detect.false_alarm_nights,
                )?,
            },
            notify,
            hunt,
        })
    }

    /// The repository the remote names when it is a path (not a URL, not `host:path`), or a
    /// `file://` URL's path.
    pub fn remote_path(&self) -> Option<&Path> {
        if let Some(path) = self
            .remote
            .get(.."file://".len())
            .filter(|scheme| scheme.eq_ignore_ascii_case("file://"))
            .map(|_| &self.remote["file://".len()..])
        {
            return Some(Path::new(path));
        }
        let url = self.remote.contains("://") || is_scp_like(&self.remote);
        (!url).then(|| Path::new(&self.remote))
    }

    /// Refuses, before any fetch, a path remote that does not exist: every cycle would fail
    /// the same way until the series file is mended (issue 32, finding 8).
    pub fn check_remote(&self) -> Result<(), ConfigError> {
        match self.remote_path() {
            Some(p) if std::fs::symlink_metadata(p).is_err() => Err(ConfigError::Field {
                path: self.source.clone(),
                field: "series.remote".into(),
                message: format!(
                    "{} does not exist: give the path of the repository to follow, or its URL",
                    p.display()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The hunt file of one comparison of the series: `good` measured as the baseline against
    /// `bad`, with its journal and logs in `state_dir`.
    pub fn hunt_between(&self, good: &str, bad: &str, state_dir: &Path) -> HuntFile {
        let mut hunt = self.hunt.clone();
        match &mut hunt {
            HuntFile::Kernel(k) => {
                (k.goods, k.bad, k.state_dir) =
                    (vec![good.to_owned()], bad.to_owned(), state_dir.to_owned());
            }
            HuntFile::Local(l) => {
                (l.goods, l.bad, l.state_dir) =
                    (vec![good.to_owned()], bad.to_owned(), state_dir.to_owned());
            }
        }
        hunt
    }

    /// The hunt file of one comparison of the series on one of its workloads: `None` is
    /// `[workload]`, else the name of one of `[[series.workloads]]`.
    pub fn hunt_on(&self, workload: Option<&str>, good: &str, bad: &str, dir: &Path) -> HuntFile {
        let mut hunt = self.hunt_between(good, bad, dir);
        if let (HuntFile::Kernel(k), Some(name)) = (&mut hunt, workload) {
            let w = self
                .workloads
                .iter()
                .find(|w| w.name == name)
                .expect("a workload of the series");
            k.workload = w.workload.clone();
        }
        hunt
    }

    /// The extra workload (`[[series.workloads]]`) a metric of the series belongs to, and the
    /// metric's name in that workload's results: `None` for `[workload]`'s own metrics.
    pub fn workload_of<'a>(&'a self, metric: &'a str) -> Option<(&'a NamedWorkload, &'a str)> {
        let (name, inner) = metric.split_once('/')?;
        self.workloads
            .iter()
            .find(|w| w.name == name)
            .map(|w| (w, inner))
    }

    /// The metric a change is judged on when it names none (a database from before changes
    /// named theirs): the workload's own, or the `[test]` metric.
    pub fn metric(&self) -> &str {
        &self.metrics[0].0
    }

    /// What the series measures: kernels, or a benchmark command with its metric.
    pub fn measured(&self) -> Measured<'_> {
        match &self.hunt {
            HuntFile::Kernel(k) => Measured::Kernel(k),
            HuntFile::Local(l) => Measured::Command(
                l,
                l.test
                    .measure
                    .as_ref()
                    .expect("a series' [test] has a metric (SeriesConfig::parse)"),
            ),
        }
    }
}

/// A series' hunt file, by kind ([`SeriesConfig::measured`]).
#[derive(Debug, Clone, Copy)]
pub enum Measured<'a> {
    /// `[build]`, `[[hosts]]`, `[workload]`: kernels booted on test hosts.
    Kernel(&'a HuntConfig),
    /// `[test]` with a metric: a command run in a checkout of each head.
    Command(&'a LocalConfig, &'a MeasureConfig),
}

/// A field error of the hunt file's code, its field named as the series file names it.
fn renamed(e: ConfigError, name: impl FnOnce(String) -> String) -> ConfigError {
    match e {
        ConfigError::Field {
            path,
            field,
            message,
        } => ConfigError::Field {
            path,
            field: name(field),
            message,
        },
        other => other,
    }
}

/// `[[series.workloads]]`, each validated as a hunt file's `[workload]` by the hunt file's
/// own code (`table` is the series file's hunt tables, its own `[workload]` among them).
fn extra_workloads(
    path: &Path,
    table: &toml::Table,
    raw: &[toml::Table],
    field: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Vec<NamedWorkload>, ConfigError> {
    if !raw.is_empty() && table.contains_key("test") {
        return Err(field(
            "series.workloads",
            "a [test] series measures its command: more workloads a night are for kernel \
             series (a second benchmark is a second series)"
                .into(),
        ));
    }
    let mut out: Vec<NamedWorkload> = Vec::new();
    for (i, w) in raw.iter().enumerate() {
        let at = |f: &str| format!("series.workloads[{i}]{f}");
        let mut w = w.clone();
        let name = match w.remove("name") {
            Some(toml::Value::String(n)) => n,
            Some(other) => {
                return Err(field(
                    &at(".name"),
                    format!("{other} is not a string: give a name such as \"seqread\""),
                ))
            }
            None => {
                return Err(field(
                    &at(".name"),
                    "missing: give each workload a name (name = \"seqread\"); its metrics \
                     are named <name>/<metric>"
                        .into(),
                ))
            }
        };
        let good_name = !name.is_empty()
            && name.len() <= 32
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !good_name {
            return Err(field(
                &at(".name"),
                format!(
                    "{} is not a name: up to 32 of a-z, 0-9, '-' and '_' (it names the \
                     workload's metrics and its directory)",
                    read::snippet(&name)
                ),
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(field(
                &at(".name"),
                format!(
                    "{} names two workloads: give each its own",
                    read::snippet(&name)
                ),
            ));
        }
        if !table.contains_key("workload") {
            return Err(field(
                "workload",
                "missing: [[series.workloads]] are measured besides the series' own \
                 [workload], which comes first"
                    .into(),
            ));
        }
        let mut hunt = table.clone();
        hunt.insert("workload".into(), w.into());
        let text = toml::to_string(&hunt).expect("a parsed table serialises");
        let parsed = HuntFile::parse(path, &text).map_err(|e| {
            renamed(e, |field| match field.strip_prefix("workload") {
                Some(rest) => at(rest),
                None => field,
            })
        })?;
        let HuntFile::Kernel(k) = parsed else {
            unreachable!("the series' own tables parsed as a kernel hunt")
        };
        out.push(NamedWorkload {
            name,
            workload: k.workload,
        });
    }
    Ok(out)
}

/// A kernel series' metrics: the workload's own first, then `series.metrics`.
fn kernel_metrics(
    k: &HuntConfig,
    extra: &[RawSeriesMetric],
    field: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Vec<(String, super::Direction)>, ConfigError> {
    let mut metrics = vec![(k.workload.metric.clone(), k.workload.direction)];
    for (i, m) in extra.iter().enumerate() {
        let at = |f: &str| format!("series.metrics[{i}].{f}");
        let direction = match m.direction.as_str() {
            "lower-is-better" => super::Direction::LowerIsBetter,
            "higher-is-better" => super::Direction::HigherIsBetter,
            other => {
                return Err(field(
                    &at("direction"),
                    format!(
                        "{} is not \"lower-is-better\" or \"higher-is-better\"",
                        read::snippet(other)
                    ),
                ))
            }
        };
        if let Some(known) = super::known_metrics(&k.workload.workload) {
            if !known.contains(&m.name.as_str()) {
                return Err(field(
                    &at("name"),
                    format!(
                        "{} is not reported by {} workloads; use one of {}",
                        read::snippet(&m.name),
                        k.workload.workload.kind(),
                        known.join(", ")
                    ),
                ));
            }
        }
        if metrics.iter().any(|(n, _)| *n == m.name) {
            return Err(field(
                &at("name"),
                format!(
                    "{} is judged already: list each metric once",
                    read::snippet(&m.name)
                ),
            ));
        }
        metrics.push((m.name.clone(), direction));
    }
    Ok(metrics)
}

/// Where a remote has a word that begins with '-': itself, or its host (`ssh://-oX/…`,
/// `-oX:path`).
fn dash_at(remote: &str) -> Option<&'static str> {
    let remote = remote.trim_start();
    if remote.starts_with('-') {
        return Some("the remote");
    }
    let host = remote.split_once("://").map(|(_, rest)| rest)?;
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    host.starts_with('-').then_some("its host")
}

/// The transport of a remote `<transport>::<address>` that runs a command or reads a
/// descriptor (git's `ext::` and `fd::` remote helpers), in the case the file gives it.
fn command_transport(remote: &str) -> Option<&str> {
    let (transport, _) = remote.trim_start().split_once("::")?;
    ["ext", "fd"]
        .iter()
        .any(|t| transport.eq_ignore_ascii_case(t))
        .then_some(transport)
}

/// `user@host:path`, git's scp-like ssh syntax (a path with a colon before any slash).
fn is_scp_like(remote: &str) -> bool {
    match (remote.find(':'), remote.find('/')) {
        (Some(c), Some(s)) => c < s && c > 0,
        (Some(c), None) => c > 0,
        _ => false,
    }
}

/// How an ssh remote is reached.
#[derive(Debug, Clone, Default)]
pub struct SshSettings {
    /// The private key (`series.ssh_key`); without it, the agent and ~/.ssh's keys.
    pub key: Option<std::path::PathBuf>,
    /// The host keys trusted (`series.known_hosts`); without it, libgit2's own check of
    /// ~/.ssh/known_hosts.
    pub known_hosts: Option<std::path::PathBuf>,
}
