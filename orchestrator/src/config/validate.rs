//! From raw structs to validated types: every check and every default, once, table by table.

use super::bounds::{self, Bound};
use super::expand::{expand, non_directory_ancestor};
use super::hosts::hosts;
use super::raw::{
    OneOrMany, RawBuild, RawChain, RawClassify, RawHunt, RawHuntSection, RawMetric, RawTest,
    RawWorkloadRef,
};
use super::read::{self, snippet};
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
struct Range {
    name: String,
    repo: PathBuf,
    goods: Vec<String>,
    bad: String,
    paths: Vec<String>,
    first_parent: bool,
    state_dir: PathBuf,
    /// A prebuilt hunt's `hunt.good` and `hunt.bad`, as written (entries of build.kernels).
    prebuilt_ends: (Option<String>, Option<String>),
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
    Ok(ReportConfig {
        web_link: raw.web_link,
        bisected_by: raw.bisected_by,
        reported_by: raw.reported_by,
        closes: raw.closes,
    })
}

fn test_table(
    v: &Validator,
    mut test: RawTest,
    classify_table: Option<RawClassify>,
) -> Result<TestConfig, ConfigError> {
    if test.command.trim().is_empty() {
        return Err(v.field(
            "test.command",
            "is empty: give a shell command, e.g. \"make -s check\"",
        ));
    }
    bounds::TEST_COMMAND_BYTES
        .length(&test.command)
        .map_err(|m| v.field("test.command", m))?;
    let measure = match test.metric.take() {
        Some(metric) => Some(measure(v, &test, metric, classify_table)?),
        None => {
            // What only a metric hunt reads, set in an exit-status hunt: a hunt file that
            // means to measure and forgot the metric, not something to ignore.
            let set = [
                ("test.build", test.build.is_some()),
                ("test.build_timeout_s", test.build_timeout_s.is_some()),
                ("test.output", test.output.is_some()),
                ("test.format", test.format.is_some()),
                ("test.pattern", test.pattern.is_some()),
                ("test.direction", test.direction.is_some()),
                ("classify", classify_table.is_some()),
            ];
            if let Some((field, _)) = set.iter().find(|(_, s)| *s) {
                return Err(v.field(
                    field,
                    "is read by metric hunts only: set test.metric (e.g. metric = \"mean\") \
                     to judge each commit by a number its command prints, or remove this to \
                     judge it by the command's exit status",
                ));
            }
            None
        }
    };
    Ok(TestConfig {
        command: test.command,
        // An hour by default: a test suite that runs longer is rarely what one bisects with.
        timeout_s: v.int(&bounds::TEST_TIMEOUT_S, None, test.timeout_s)?,
        jobs: v.int(&bounds::TEST_JOBS, None, test.jobs)?,
        measure,
    })
}

/// The metric half of `[test]`, and `[classify]`.
fn measure(
    v: &Validator,
    test: &RawTest,
    metric: RawMetric,
    classify_table: Option<RawClassify>,
) -> Result<MeasureConfig, ConfigError> {
    let (benchmark, field) = match metric {
        RawMetric::Field(f) => (None, f),
        RawMetric::Table(t) => (t.benchmark, t.field),
    };
    if field.trim().is_empty() {
        return Err(v.field(
            "test.metric",
            "is empty: name the number to judge by, e.g. \"mean\" (hyperfine), \
             \"real_time\" (Google Benchmark) or a key of the JSON line the command prints",
        ));
    }
    let format = crate::metric::Format::from_hunt_file(
        test.format.as_deref(),
        test.pattern.as_deref(),
        &field,
    )
    .map_err(|e| {
        let f = if test.pattern.is_some() {
            "test.pattern"
        } else {
            "test.format"
        };
        v.field(f, e)
    })?;
    let direction = match test.direction.as_deref().unwrap_or("lower-is-better") {
        "lower-is-better" => Direction::LowerIsBetter,
        "higher-is-better" => Direction::HigherIsBetter,
        other => {
            return Err(v.field(
                "test.direction",
                format!(
                    "{} is not \"lower-is-better\" or \"higher-is-better\"",
                    snippet(other)
                ),
            ))
        }
    };
    let output = match &test.output {
        None => None,
        Some(o) => {
            let p = PathBuf::from(o);
            // Read from the candidate's checkout: a path outside it would be shared by every
            // candidate, and one run could read another's result.
            if o.trim().is_empty()
                || p.is_absolute()
                || p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(v.field(
                    "test.output",
                    format!(
                        "{} must be a path inside the checkout, relative to it (e.g. \
                         \"results.json\"), where the command writes its result",
                        snippet(o)
                    ),
                ));
            }
            Some(p)
        }
    };
    if test.build.as_deref().is_some_and(|b| b.trim().is_empty()) {
        return Err(v.field(
            "test.build",
            "is empty: give the build command (e.g. \"make -s\"), or remove it",
        ));
    }
    if let Some(build) = &test.build {
        bounds::TEST_BUILD_BYTES
            .length(build)
            .map_err(|m| v.field("test.build", m))?;
    }
    let raw_classify = classify_table.unwrap_or_default();
    let drift_set = raw_classify.drift_check_every.is_some();
    let mut classify = classify(v, raw_classify)?;
    if !drift_set {
        // A run of a command takes seconds where a kernel boot takes a minute: the good
        // endpoint is re-run twice as often, so that a machine that slows down during the
        // hunt is seen within a few verdicts.
        classify.drift_check_every = METRIC_DRIFT_CHECK_EVERY;
    }
    Ok(MeasureConfig {
        build: test.build.clone(),
        build_timeout_s: v.int(&bounds::TEST_BUILD_TIMEOUT_S, None, test.build_timeout_s)?,
        output,
        metric: crate::metric::MetricSpec {
            format,
            benchmark,
            field,
        },
        direction,
        classify,
    })
}

/// `classify.drift_check_every` of a metric command hunt that does not set it.
pub const METRIC_DRIFT_CHECK_EVERY: u32 = 2;

fn build(v: &Validator, raw: RawBuild, range: &Range) -> Result<Build, ConfigError> {
    let cache_dir = match &raw.cache_dir {
        Some(s) => v.path("build.cache_dir", s)?,
        None => default_cache_dir().join("builds"),
    };
    v.directory("build.cache_dir", &cache_dir, raw.cache_dir.is_none())?;
    match raw.kind.as_deref() {
        None | Some("source") => source_build(v, raw, cache_dir).map(Build::Source),
        Some("prebuilt") => prebuilt_build(v, raw, range, cache_dir).map(Build::Prebuilt),
        Some(other) => Err(v.field(
            "build.kind",
            format!(
                "{} is not one of \"source\" (build each commit), \"prebuilt\" (boot the \
                 kernels of build.kernels)",
                snippet(other)
            ),
        )),
    }
}

/// `[build] kind = "prebuilt"`: the list of kernels, each a package, a .deb or a directory.
fn prebuilt_build(
    v: &Validator,
    raw: RawBuild,
    range: &Range,
    cache_dir: PathBuf,
) -> Result<PrebuiltConfig, ConfigError> {
    let source_only = [
        ("build.config", raw.config.is_some()),
        ("build.jobs", raw.jobs.is_some()),
        ("build.prune", raw.prune.is_some()),
        ("build.ccache", raw.ccache.is_some()),
        ("build.distcc", raw.distcc.is_some()),
        ("build.make_args", raw.make_args.is_some()),
        ("build.timeout_s", raw.timeout_s.is_some()),
    ];
    if let Some((field, _)) = source_only.iter().find(|(_, set)| *set) {
        return Err(v.field(
            field,
            "is for kind = \"source\" builds: prebuilt kernels are not built; remove it",
        ));
    }
    let entries = raw.kernels.unwrap_or_default();
    if entries.len() < 2 {
        return Err(v.field(
            "build.kernels",
            "needs at least two kernels, oldest first: a good one and a bad one, e.g. \
             [\"linux-image-6.1.0-47-cloud-amd64\", \"linux-image-6.1.0-57-cloud-amd64\"]",
        ));
    }
    let mut kernels = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let field = format!("build.kernels[{i}]");
        let source = prebuilt_entry(v, &field, e)?;
        if kernels.iter().any(|k: &PrebuiltKernel| k.entry == *e) {
            return Err(v.field(&field, format!("{} is listed twice", snippet(e))));
        }
        kernels.push(PrebuiltKernel {
            entry: e.clone(),
            source,
        });
    }
    let (good, bad) = range.prebuilt_ends.clone();
    for (field, end) in [("hunt.good", &good), ("hunt.bad", &bad)] {
        if let Some(end) = end {
            if !kernels.iter().any(|k| k.entry == *end) {
                return Err(v.field(
                    field,
                    format!(
                        "{} is not an entry of build.kernels: name one as written there, or \
                         remove {field} (good: the first kernel, bad: the last)",
                        snippet(end)
                    ),
                ));
            }
        }
    }
    let at = |end: &Option<String>, default: usize| {
        end.as_ref()
            .and_then(|e| kernels.iter().position(|k| k.entry == *e))
            .unwrap_or(default)
    };
    if at(&good, 0) >= at(&bad, kernels.len() - 1) {
        return Err(v.field(
            "hunt.bad",
            "is not after hunt.good in build.kernels: the list is oldest first, and the bad \
             kernel must come after the good one",
        ));
    }
    Ok(PrebuiltConfig {
        chain: None,
        kernels,
        good,
        bad,
        cache_dir: cache_dir.join("prebuilt"),
    })
}

/// One entry of build.kernels: a path (with a `/`, or ending in `.deb`) or a package name
/// with an optional `=version`.
fn prebuilt_entry(v: &Validator, field: &str, e: &str) -> Result<KernelSource, ConfigError> {
    if e.contains('/') || e.ends_with(".deb") || e.starts_with('~') {
        let p = v.path(field, e)?;
        return if p.is_dir() {
            Ok(KernelSource::Dir(p))
        } else if p.is_file() && e.ends_with(".deb") {
            Ok(KernelSource::Deb(p))
        } else {
            Err(v.field(
                field,
                format!(
                    "{} is neither a directory (with a bzImage and lib/modules/<release>) nor \
                     a .deb file",
                    snippet(&p.display().to_string())
                ),
            ))
        };
    }
    // A bare name is a package; one that names a directory beside the hunt file was most
    // likely meant as that directory, and apt would only say it knows no such package.
    if v.base.join(e).is_dir() {
        return Err(v.field(
            field,
            format!(
                "{} is read as a Debian package name, and a directory of that name is beside \
                 the hunt file: write \"./{e}\" for the directory",
                snippet(e)
            ),
        ));
    }
    let (name, version) = match e.split_once('=') {
        Some((n, ver)) => (n, Some(ver)),
        None => (e, None),
    };
    // Debian policy 5.6.1 and 5.6.12: what a package name and a version may hold.
    let name_ok = name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    let version_ok = version.is_none_or(|ver| {
        !ver.is_empty()
            && ver.starts_with(|c: char| c.is_ascii_digit())
            && ver
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".+~:-".contains(c))
    });
    if !name_ok || !version_ok {
        return Err(v.field(
            field,
            format!(
                "{} is not a Debian package name with an optional =version (e.g. \
                 \"linux-image-6.1.0-47-cloud-amd64=6.1.170-3\"), a .deb file or a directory",
                snippet(e)
            ),
        ));
    }
    Ok(KernelSource::Package {
        name: name.to_owned(),
        version: version.map(str::to_owned),
    })
}

/// `[chain]`: the source tree of a prebuilt hunt's kernels, the revision of each, and the
/// source stage's build settings.
fn chain(v: &Validator, raw: RawChain, p: &PrebuiltConfig) -> Result<ChainConfig, ConfigError> {
    let raw_repo = raw.repo.ok_or_else(|| {
        v.field(
            "chain.repo",
            "missing: the git repository the kernels of build.kernels were built from, e.g. \
             \"~/src/linux\"",
        )
    })?;
    let repo = v.path("chain.repo", &raw_repo)?;
    if raw.revisions.is_empty() {
        return Err(v.field(
            "chain.revisions",
            "missing: map entries of build.kernels to their revisions in chain.repo, e.g. \
             revisions = { \"linux-image-6.1.0-47-cloud-amd64\" = \"v6.1.170\" }",
        ));
    }
    for (entry, rev) in &raw.revisions {
        if !p.kernels.iter().any(|k| k.entry == *entry) {
            return Err(v.field(
                &format!("chain.revisions.{entry:?}"),
                "is not an entry of build.kernels: name each kernel as written there",
            ));
        }
        if rev.trim().is_empty() {
            return Err(v.field(
                &format!("chain.revisions.{entry:?}"),
                "is empty: give the kernel's revision in chain.repo (commit, tag, branch)",
            ));
        }
    }
    let cache_dir = p
        .cache_dir
        .parent()
        .map_or_else(|| p.cache_dir.clone(), Path::to_path_buf);
    let build = source_build_at(
        v,
        "chain",
        RawBuild {
            kind: None,
            kernels: None,
            distcc: raw.distcc,
            config: raw.config,
            cache_dir: None,
            jobs: raw.jobs,
            ccache: raw.ccache,
            make_args: raw.make_args,
            timeout_s: raw.timeout_s,
            prune: raw.prune,
        },
        cache_dir,
    )?;
    Ok(ChainConfig {
        repo,
        revisions: raw.revisions,
        build,
    })
}

fn source_build(
    v: &Validator,
    raw: RawBuild,
    cache_dir: PathBuf,
) -> Result<BuildConfig, ConfigError> {
    source_build_at(v, "build", raw, cache_dir)
}

/// A source build's fields, read from the table `at` (`build`, or `chain` for a chained
/// hunt's source stage), each error naming the field there.
fn source_build_at(
    v: &Validator,
    at: &str,
    raw: RawBuild,
    cache_dir: PathBuf,
) -> Result<BuildConfig, ConfigError> {
    let f = |name: &str| format!("{at}.{name}");
    if raw.kernels.is_some() {
        return Err(v.field(
            &f("kernels"),
            "is for kind = \"prebuilt\": set [build] kind = \"prebuilt\" to boot these \
             kernels, or remove it to build each commit",
        ));
    }
    let raw_config = raw.config.ok_or_else(|| {
        v.field(
            &f("config"),
            "missing: point it at a kernel .config (configs/kernel/ has one), or set kind = \
             \"prebuilt\" to boot kernels already built",
        )
    })?;
    let kernel_config = v.path(&f("config"), &raw_config)?;
    if !kernel_config.is_file() {
        return Err(v.field(
            &f("config"),
            format!(
                "{} does not exist: point it at a kernel .config (configs/kernel/ has one)",
                snippet(&kernel_config.display().to_string())
            ),
        ));
    }
    let ccache = match raw.ccache.as_deref().unwrap_or("auto") {
        "auto" => Ccache::Auto,
        "on" | "true" => Ccache::On,
        "off" | "false" => Ccache::Off,
        other => {
            return Err(v.field(
                &f("ccache"),
                format!("{} is not one of \"auto\", \"on\", \"off\"", snippet(other)),
            ))
        }
    };
    let make_args = raw.make_args.unwrap_or_default();
    let distcc = raw
        .distcc
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, e)| distcc_host(v, &format!("{at}.distcc[{i}]"), e))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((i, dup)) = distcc.iter().enumerate().find(|(i, h)| {
        distcc[..*i]
            .iter()
            .any(|o| (&o.host, o.port) == (&h.host, h.port))
    }) {
        return Err(v.field(
            &format!("{at}.distcc[{i}]"),
            format!(
                "{} is listed twice: give each distccd once, with its /slots",
                snippet(&dup.spec())
            ),
        ));
    }
    if let Some(cc) = make_args.iter().find(|a| a.starts_with("CC=")) {
        if !distcc.is_empty() {
            return Err(v.field(
                &f("make_args"),
                format!(
                    "{} sets the compiler, and build.distcc puts distcc in front of gcc itself: \
                     remove CC= from make_args, or empty build.distcc and put distcc in CC yourself",
                    snippet(cc)
                ),
            ));
        }
    }
    // make -j: the local CPUs (which preprocess every file and link) plus every compile the
    // distcc hosts take at once, so that none of their slots waits for make.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
    let slots: i64 = distcc.iter().map(|h| i64::from(h.slots)).sum();
    let jobs = raw.jobs.or(Some((cpus + slots).min(4096)));
    Ok(BuildConfig {
        kernel_config,
        cache_dir,
        jobs: v.int_as(&bounds::BUILD_JOBS, &f("jobs"), jobs)?,
        ccache,
        distcc,
        make_args,
        // A clean tinyconfig build takes ~4.5 min on 2 cores; an hour is generous.
        timeout_s: v.int_as(&bounds::BUILD_TIMEOUT_S, &f("timeout_s"), raw.timeout_s)?,
        prune: raw.prune.unwrap_or(true),
    })
}

/// One `[build] distcc` entry: `host`, `host:port`, `host/slots`, `host:port/slots`, an IPv6
/// address in brackets (`[fd00::1]:3632`).
fn distcc_host(v: &Validator, field: &str, entry: &str) -> Result<DistccHost, ConfigError> {
    let bad = |why: &str| {
        v.field(
            field,
            format!(
                "{} {why}: write host or host:port, with /slots if not 4, e.g. \"build1:3632/8\"",
                snippet(entry)
            ),
        )
    };
    let (addr, slots) = match entry.rsplit_once('/') {
        Some((a, n)) => (
            a,
            Some(
                n.parse::<i64>()
                    .map_err(|_| bad("has slots that are not a number"))?,
            ),
        ),
        None => (entry, None),
    };
    let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("opens [ without closing it"))?;
        match after {
            "" => (h, None),
            p => (
                h,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("has something after ] that is not :port"))?,
                ),
            ),
        }
    } else {
        match addr.split_once(':') {
            Some((_, p)) if p.contains(':') => {
                return Err(bad(
                    "has several colons (an IPv6 address goes in brackets, [::1]:3632)",
                ))
            }
            Some((h, p)) => (h, Some(p)),
            None => (addr, None),
        }
    };
    if host.is_empty() {
        return Err(bad("has no host"));
    }
    let allowed = |c: char| {
        c.is_ascii_alphanumeric() || ".-_".contains(c) || (c == ':' && addr.starts_with('['))
    };
    if let Some(c) = host.chars().find(|c| !allowed(*c)) {
        let why = match c {
            '@' => "is distcc's ssh form (user@host), which firstbad does not use: run distccd on the machine".to_owned(),
            ',' => "has distcc options (,lzo ,cpp), which firstbad does not pass".to_owned(),
            c => format!("has {c:?} in the host name"),
        };
        return Err(bad(&why));
    }
    let port = match port {
        Some(p) => Some(
            p.parse::<i64>()
                .map_err(|_| bad("has a port that is not a number"))?,
        ),
        None => None,
    };
    let in_range = |b: &Bound, x: Option<i64>, default: i64, what: &str| {
        b.int(x.unwrap_or(default))
            .map_err(|m| v.field(field, format!("{}: {what} {m}", snippet(entry))))
    };
    Ok(DistccHost {
        host: host.to_owned(),
        port: in_range(
            &bounds::BUILD_DISTCC_PORT,
            port,
            bounds::DISTCC_PORT,
            "the port",
        )? as u16,
        slots: in_range(
            &bounds::BUILD_DISTCC_SLOTS,
            slots,
            bounds::DISTCC_SLOTS,
            "the slots",
        )? as u32,
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

/// What an empty `[classify]` table gives: the hunt file's defaults, from the bounds table.
pub(super) fn classify_defaults() -> ClassifyConfig {
    let none = Path::new("");
    let v = Validator {
        path: none,
        base: none,
    };
    classify(&v, RawClassify::default()).expect("the defaults are within their bounds")
}

fn classify(v: &Validator, c: RawClassify) -> Result<ClassifyConfig, ConfigError> {
    if c.baseline_boots.is_some() {
        return Err(v.field(
            "classify.baseline_boots",
            "is no longer used: the endpoints are now booted, interleaved, until the \
             regression is confirmed or refuted (8, 16, 32 or 64 boots each); remove it",
        ));
    }
    let mode = match (c.mode.as_deref().unwrap_or("baselines"), c.relative, c.threshold) {
        ("baselines", None, None) => ClassifyMode::Baselines,
        ("relative", Some(r), None) => {
            ClassifyMode::Relative(v.float(&bounds::CLASSIFY_RELATIVE, Some(r))?)
        }
        ("relative", None, None) => {
            return Err(v.field(
                "classify.relative",
                "mode \"relative\" needs relative = a share above 0 (0.2 means bad when 20% worse than good)",
            ))
        }
        ("absolute", None, Some(t)) => {
            ClassifyMode::Absolute(v.float(&bounds::CLASSIFY_THRESHOLD, Some(t))?)
        }
        ("absolute", None, None) => {
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
                format!(
                    "{} is not a mode: use \"baselines\", \"relative\" or \"absolute\"",
                    snippet(other)
                ),
            ))
        }
    };
    let classify = ClassifyConfig {
        mode,
        // One boot may decide when it is clear enough: the sequential test's error rates
        // already account for how much one boot proves.
        min_boots: v.int(&bounds::CLASSIFY_MIN_BOOTS, None, c.min_boots)?,
        // At Δ/σ = 1 the sequential test needs ~10-15 boots on average; in `firstbad sim` a
        // cap of 16 left 40% of hunts with undecided commits next to the culprit, 30 12%.
        // A clear regression decides in one boot, so the cap only costs on noisy ones.
        max_boots: v.int(&bounds::CLASSIFY_MAX_BOOTS, None, c.max_boots)?,
        min_effect: v.float(&bounds::CLASSIFY_MIN_EFFECT, c.min_effect)?,
        max_failed_boots: v.int(&bounds::CLASSIFY_MAX_FAILED_BOOTS, None, c.max_failed_boots)?,
        // Issue 4's defaults: 1% error each way per commit, 95% on the culprit.
        alpha: v.float(&bounds::CLASSIFY_ALPHA, c.alpha)?,
        beta: v.float(&bounds::CLASSIFY_BETA, c.beta)?,
        confidence: v.float(&bounds::CLASSIFY_CONFIDENCE, c.confidence)?,
        // `firstbad sim`: a host slowing 1σ per 100 boots defeats an unchecked hunt; one
        // good boot every 4 verdicts costs ~10% more boots at Δ/σ = 1.
        drift_check_every: v.int(
            &bounds::CLASSIFY_DRIFT_CHECK_EVERY,
            None,
            c.drift_check_every,
        )?,
        // A busy neighbour on a shared machine slows 1-3 boots in a row (issue 38: one good
        // boot at 41.8 ms against a 4.3 ms centre, the next two at 12.6 and 5.8 ms). A window
        // of the drift check holds such a burst for at most four re-measurements; six in a
        // row, over three minutes at least, is a host that moved.
        drift_lasts_boots: v.int(
            &bounds::CLASSIFY_DRIFT_LASTS_BOOTS,
            None,
            c.drift_lasts_boots,
        )?,
        drift_lasts_minutes: v.int(
            &bounds::CLASSIFY_DRIFT_LASTS_MINUTES,
            None,
            c.drift_lasts_minutes,
        )?,
        confirm_pairs: v.int(&bounds::CLASSIFY_CONFIRM_PAIRS, None, c.confirm_pairs)?,
        // Three rounds decide a large effect; a round hit by a burst, or Δ/σ near 1, needs
        // more before the re-test's own figures say anything (issue 38 item 3).
        confirm_max_pairs: v.int(
            &bounds::CLASSIFY_CONFIRM_MAX_PAIRS,
            None,
            c.confirm_max_pairs,
        )?,
        // `firstbad sim`, Δ/σ = 1: 74% right at N = 64 without the posterior phase, 85%
        // with 60 boots in all; 60 per bit (docs/simulation.md) ends on the confidence,
        // not the budget, in 99% of the hunts at N = 64 and 1024.
        refine_boots: v.int(&bounds::CLASSIFY_REFINE_BOOTS, None, c.refine_boots)?,
        // A reproduction of two distribution kernels in a suite cannot wait for 64 boots of
        // each: the last look decides (confirmed or not distinguishable) at this count.
        max_baseline_boots: v.int(
            &bounds::CLASSIFY_MAX_BASELINE_BOOTS,
            None,
            c.max_baseline_boots,
        )?,
        // Bug 12309 had two first-bad commits; three leaves room for one more without a run
        // hunting a fourth part that the re-test's intervals placed on noise.
        max_culprits: v.int(&bounds::CLASSIFY_MAX_CULPRITS, None, c.max_culprits)?,
    };
    if classify.min_boots > classify.max_boots {
        return Err(v.field(
            "classify.min_boots",
            format!(
                "{} is more than classify.max_boots ({}): a verdict could never be given",
                classify.min_boots, classify.max_boots
            ),
        ));
    }
    Ok(classify)
}

/// Where errors point and relative paths start: the hunt file and its directory.
pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    pub(super) base: &'a Path,
}

impl Validator<'_> {
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
