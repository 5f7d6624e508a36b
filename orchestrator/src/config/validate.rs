//! From raw structs to validated types: every check and every default, once, table by table.

use super::bounds::{self, Bound};
use super::build_table::{build, chain};
use super::classify_table::classify;
use super::expand::{expand, non_directory_ancestor};
use super::hosts::hosts;
use super::raw::{OneOrMany, RawHunt, RawHuntSection, RawWorkloadRef};
use super::read::{self, snippet};
use super::test_table::test_table;
use super::*;
use crate::error::ConfigError;
use firstbad_wire::Workload;
use std::path::{Path, PathBuf};

/// Validates hunt-file text of either kind.
pub(super) fn hunt_file(path: &Path, text: &str) -> Result<HuntFile, ConfigError> {
    read::check_text(path, text)?;
    let raw: RawHunt = toml::from_str(text).map_err(|e| read::syntax(path, text, &e))?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    let v = Validator { path, base: &base };
    // TOML's `\u0000` puts a NUL in a string that no command line, path or name can carry
    // (issue 19, finding 7: in test.command it stopped the hunt as an infrastructure failure).
    let table: toml::Table = toml::from_str(text).map_err(|e| read::syntax(path, text, &e))?;
    if let Some(field) = read::nul_in_strings(&table) {
        return Err(v.field(
            &field,
            "holds a NUL byte (\\u0000), which no command, path or name can carry: remove it",
        ));
    }

    let prebuilt = raw.test.is_none()
        && raw
            .build
            .as_ref()
            .is_some_and(|b| b.kind.as_deref() == Some("prebuilt"));
    let range = range(&v, raw.hunt, prebuilt)?;
    let report = report(&v, raw.report)?;
    if let Some(test) = raw.test {
        // A command hunt has no kernel to build or boot: a kernel table beside [test] is a
        // mistake (which of the two tests was meant?), not something to ignore.
        let kernel_tables = [
            ("build", raw.build.is_some()),
            ("chain", raw.chain.is_some()),
            ("hosts", !raw.hosts.is_empty()),
            ("workload", raw.workload.is_some()),
        ];
        if let Some((table, _)) = kernel_tables.iter().find(|(_, present)| *present) {
            return Err(v.field(
                table,
                "a hunt with [test] runs a command and boots no kernel: remove this table, \
                 or remove [test] to bisect with kernel builds and boots",
            ));
        }
        let test = test_table(&v, test, raw.classify)?;
        return Ok(HuntFile::Local(Box::new(LocalConfig {
            source: path.to_owned(),
            name: range.name,
            repo: range.repo,
            goods: range.goods,
            bad: range.bad,
            paths: range.paths,
            first_parent: range.first_parent,
            state_dir: range.state_dir,
            test,
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
    let mut build = build(&v, raw_build, &range)?;
    if let Some(raw_chain) = raw.chain {
        let Build::Prebuilt(p) = &mut build else {
            return Err(v.field(
                "chain",
                "is for [build] kind = \"prebuilt\": it chains a source hunt after the first \
                 bad prebuilt kernel; a source hunt bisects hunt.repo already, remove [chain]",
            ));
        };
        p.chain = Some(chain(&v, raw_chain, p)?);
    }
    let hosts = hosts(&v, raw.hosts)?;
    if build.prebuilt().is_some() {
        // Installing a distribution package on a lab machine needs its own initramfs and
        // boot loader entry: not done yet (issue 22).
        if let Some(i) = hosts
            .iter()
            .position(|h| matches!(h.kind, HostKind::Ssh(_)))
        {
            return Err(v.field(
                &format!("hosts[{i}].kind"),
                "prebuilt kernels on ssh hosts: not yet; use kind = \"qemu\"",
            ));
        }
    }
    let workload = workload(&v, raw_workload)?;
    let classify = classify(&v, raw.classify.unwrap_or_default())?;
    Ok(HuntFile::Kernel(Box::new(HuntConfig {
        source: path.to_owned(),
        name: range.name,
        repo: range.repo,
        goods: range.goods,
        bad: range.bad,
        paths: range.paths,
        first_parent: range.first_parent,
        state_dir: range.state_dir,
        build,
        hosts,
        workload,
        classify,
        report,
    })))
}

/// The `[hunt]` table, shared by both kinds of hunt.
pub(super) struct Range {
    pub(super) name: String,
    pub(super) repo: PathBuf,
    pub(super) goods: Vec<String>,
    pub(super) bad: String,
    pub(super) paths: Vec<String>,
    pub(super) first_parent: bool,
    pub(super) state_dir: PathBuf,
    /// A prebuilt hunt's `hunt.good` and `hunt.bad`, as written (entries of build.kernels).
    pub(super) prebuilt_ends: (Option<String>, Option<String>),
}

fn range(v: &Validator, hunt: RawHuntSection, prebuilt: bool) -> Result<Range, ConfigError> {
    let name = hunt.name.trim().to_owned();
    // "." and ".." would put the default state directory beside or above the others.
    if name.is_empty()
        || name.chars().all(|c| c == '.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(v.field(
            "hunt.name",
            format!(
                "{} must be non-empty and use only letters, digits, '-', '_', '.'",
                snippet(&name)
            ),
        ));
    }
    let state_dir = match &hunt.state_dir {
        Some(s) => v.path("hunt.state_dir", s)?,
        None => v.base.join("firstbad-state").join(&name),
    };
    // Issue 19, finding 7: a state_dir that is a file failed later, naming neither.
    v.directory("hunt.state_dir", &state_dir, hunt.state_dir.is_none())?;
    if prebuilt {
        return prebuilt_range(v, hunt, name, state_dir);
    }
    let git_field = |field: &str, example: &str| {
        v.field(
            field,
            format!(
                "missing: give {example}, or set [build] kind = \"prebuilt\" to hunt over \
                 a list of prebuilt kernels"
            ),
        )
    };
    let raw_repo = hunt.repo.ok_or_else(|| {
        git_field(
            "hunt.repo",
            "the kernel git repository, e.g. \"~/src/linux\"",
        )
    })?;
    let repo = v.path("hunt.repo", &raw_repo)?;
    let goods = match hunt
        .good
        .ok_or_else(|| git_field("hunt.good", "a good revision, e.g. \"v6.1\""))?
    {
        OneOrMany::One(g) => vec![g],
        OneOrMany::Many(gs) => gs,
    };
    let bad = hunt
        .bad
        .ok_or_else(|| git_field("hunt.bad", "a bad revision, e.g. \"v6.2-rc1\""))?;
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
    revs.push(("hunt.bad".into(), &bad));
    for (field, rev) in revs {
        if rev.trim().is_empty() {
            return Err(v.field(&field, "is empty: give a revision (commit, tag, branch)"));
        }
    }
    for (i, p) in hunt.paths.iter().enumerate() {
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
            return Err(v.field(&format!("hunt.paths[{i}]"), format!("{} {why}", snippet(p))));
        }
    }
    Ok(Range {
        name,
        repo,
        goods,
        bad,
        paths: hunt.paths,
        first_parent: hunt.first_parent,
        state_dir,
        prebuilt_ends: (None, None),
    })
}

/// `[hunt]` of a prebuilt hunt: no repository; good and bad, when given, name entries of
/// `build.kernels` (checked with the list).
fn prebuilt_range(
    v: &Validator,
    hunt: RawHuntSection,
    name: String,
    state_dir: PathBuf,
) -> Result<Range, ConfigError> {
    let git_only = [
        ("hunt.repo", hunt.repo.is_some()),
        ("hunt.paths", !hunt.paths.is_empty()),
        ("hunt.first_parent", hunt.first_parent),
    ];
    if let Some((field, _)) = git_only.iter().find(|(_, set)| *set) {
        return Err(v.field(
            field,
            "is for hunts over git commits: a prebuilt hunt's candidates are the kernels of \
             build.kernels, in their order; remove it",
        ));
    }
    let good = match hunt.good {
        None => None,
        Some(OneOrMany::One(g)) => Some(g),
        Some(OneOrMany::Many(gs)) if gs.len() == 1 => gs.into_iter().next(),
        Some(OneOrMany::Many(_)) => {
            return Err(v.field(
                "hunt.good",
                "a prebuilt hunt's kernels are one line: give one good kernel (an entry of \
                 build.kernels), or none for the first",
            ))
        }
    };
    Ok(Range {
        name,
        repo: PathBuf::new(),
        goods: Vec::new(),
        bad: String::new(),
        paths: Vec::new(),
        first_parent: false,
        state_dir,
        prebuilt_ends: (good, hunt.bad),
    })
}

fn report(v: &Validator, raw: super::raw::RawReport) -> Result<ReportConfig, ConfigError> {
    if let Some(link) = &raw.web_link {
        if !link.contains("{commit}") {
            return Err(v.field(
                "report.web_link",
                format!(
                    "{} has no {{commit}}: e.g. \"https://git.kernel.org/torvalds/c/{{commit}}\"",
                    snippet(link)
                ),
            ));
        }
    }
    if let Some(url) = &raw.closes {
        // checkpatch.pl wants a link after Closes:, the bug report's address.
        if !(url.starts_with("https://") || url.starts_with("http://"))
            || url.contains(char::is_whitespace)
        {
            return Err(v.field(
                "report.closes",
                format!(
                    "{} is not a link: the bug report's address, e.g. \"https://bugzilla.kernel.org/show_bug.cgi?id=12309\"",
                    snippet(url)
                ),
            ));
        }
    }
    for (field, value) in [
        ("report.web_link", &raw.web_link),
        ("report.bisected_by", &raw.bisected_by),
        ("report.reported_by", &raw.reported_by),
    ] {
        if let Some(value) = value {
            v.one_line(field, value)?;
        }
    }
    Ok(ReportConfig {
        web_link: raw.web_link,
        bisected_by: raw.bisected_by,
        reported_by: raw.reported_by,
        closes: raw.closes,
    })
}

fn workload(v: &Validator, raw: RawWorkloadRef) -> Result<WorkloadConfig, ConfigError> {
    let wl_path = v.path("workload.file", &raw.file)?;
    let workload = load_workload(&wl_path).map_err(|m| {
        v.field(
            "workload.file",
            format!("{}: {m}", snippet(&wl_path.display().to_string())),
        )
    })?;
    let metric = raw.metric;
    v.one_line("workload.metric", &metric)?;
    // fio and command workloads name their metrics after the job file or script, so they
    // can only be checked once a run has reported.
    if let Some(known) = known_metrics(&workload).filter(|k| !k.contains(&metric.as_str())) {
        return Err(v.field(
            "workload.metric",
            format!(
                "{} is not reported by {} workloads; use one of {}",
                snippet(&metric),
                workload.kind(),
                known.join(", ")
            ),
        ));
    }
    let direction = match raw.direction.as_str() {
        "lower-is-better" => Direction::LowerIsBetter,
        "higher-is-better" => Direction::HigherIsBetter,
        other => {
            return Err(v.field(
                "workload.direction",
                format!(
                    "{} is not \"lower-is-better\" or \"higher-is-better\"",
                    snippet(other)
                ),
            ))
        }
    };
    Ok(WorkloadConfig {
        file: wl_path,
        workload,
        metric,
        direction,
        timeout_s: v.int(&bounds::WORKLOAD_TIMEOUT_S, None, raw.timeout_s)?,
    })
}

/// Raw workload file: a `kind` and that kind's parameters; the error says what is wrong
/// inside it, for the caller to put after the file's name.
fn load_workload(path: &Path) -> Result<Workload, String> {
    let inner = |e: ConfigError| match e {
        ConfigError::Read { source, .. } => format!("cannot read: {source}"),
        ConfigError::Syntax { message, .. } => message,
        ConfigError::Field { field, message, .. } => format!("{field}: {message}"),
    };
    let text = read::text_file(path).map_err(inner)?;
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| inner(read::syntax(path, &text, &e)))?;
    // The TOML maps one to one onto the wire type, which refuses unknown fields.
    let json = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    serde_json::from_value(json).map_err(|e| {
        format!(
            "{} (known kinds: fsync-latency, sequential, threads, fio, command; see workloads/)",
            read::short_unknown_field(&e.to_string())
        )
    })
}

/// Where errors point and relative paths start: the hunt file and its directory.
pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    pub(super) base: &'a Path,
}

impl Validator<'_> {
    /// Refuses a `field` that reports write on a line of their own (a trailer, a metric's
    /// name) when it holds a control character: a CR or LF wrote a `Bcc:` line into the
    /// e-mail report (issue 61, finding 7).
    pub(super) fn one_line(&self, field: &str, value: &str) -> Result<(), ConfigError> {
        if !value.chars().any(char::is_control) {
            return Ok(());
        }
        Err(self.field(
            field,
            format!(
                "{} holds a control character (a line break, a tab, an escape), which would \
                 write lines of its own into the reports: put it on one line",
                snippet(value)
            ),
        ))
    }

    /// An error about `field`, its message made one short line.
    pub(super) fn field(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            path: self.path.to_owned(),
            field: read::one_line(field, 80),
            message: read::one_line(&message.into(), 240),
        }
    }

    /// A path field, expanded and made absolute against the hunt file's directory.
    pub(super) fn path(&self, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let expanded = expand(raw).map_err(|m| self.field(field, m))?;
        let p = PathBuf::from(expanded);
        Ok(if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        })
    }

    /// Refuses a directory field whose path, or a parent of it, exists and is not a directory.
    pub(super) fn directory(
        &self,
        field: &str,
        dir: &Path,
        default: bool,
    ) -> Result<(), ConfigError> {
        let Some(blocker) = non_directory_ancestor(dir) else {
            return Ok(());
        };
        let shown = snippet(&blocker.display().to_string());
        let what = if blocker == dir {
            format!("{shown} exists and is not a directory")
        } else {
            format!(
                "{shown} is not a directory, so {} cannot be made in it",
                snippet(&dir.display().to_string())
            )
        };
        let fix = if default {
            format!("(the default): set {field} to a directory, or move {shown} away")
        } else {
            format!("remove or move {shown}, or set {field} to a directory")
        };
        Err(self.field(field, format!("{what} {fix}")))
    }

    /// An integer field checked against its bound; `host` numbers a `hosts[]` field.
    pub(super) fn int<T: TryFrom<i64>>(
        &self,
        b: &Bound,
        host: Option<usize>,
        raw: Option<i64>,
    ) -> Result<T, ConfigError> {
        let field = match host {
            Some(i) => b.field.replace("hosts[]", &format!("hosts[{i}]")),
            None => b.field.to_owned(),
        };
        self.int_as(b, &field, raw)
    }

    /// [`Validator::int`] for a bound's field read from another table (`chain.jobs` is
    /// `build.jobs`'s bound): errors name `field`.
    pub(super) fn int_as<T: TryFrom<i64>>(
        &self,
        b: &Bound,
        field: &str,
        raw: Option<i64>,
    ) -> Result<T, ConfigError> {
        let x = match (raw, b.default) {
            (Some(x), _) | (None, bounds::Default::Int(x)) => x,
            (None, _) => return Err(self.field(field, "is missing: give a number")),
        };
        let x = b.int(x).map_err(|m| self.field(field, m))?;
        T::try_from(x).map_err(|_| self.field(field, format!("{x} does not fit")))
    }

    /// A float field checked against its bound (finite, inside the range).
    pub(super) fn float(&self, b: &Bound, raw: Option<f64>) -> Result<f64, ConfigError> {
        let x = match (raw, b.default) {
            (Some(x), _) | (None, bounds::Default::Float(x)) => x,
            (None, _) => return Err(self.field(b.field, "is missing: give a number")),
        };
        b.float(x).map_err(|m| self.field(b.field, m))
    }
}
