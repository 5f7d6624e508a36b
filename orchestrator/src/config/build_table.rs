//! The `[build]` table, from raw structs to validated types: a source build (its kernel config,
//! ccache, distcc hosts), a list of prebuilt kernels, and the `[chain]` into the source between
//! two of them.

use super::bounds::{self, Bound};
use super::raw::{RawBuild, RawChain};
use super::validate::{Range, Validator};
use super::*;
use crate::error::ConfigError;
use std::path::{Path, PathBuf};

/// The `[build]` table.
pub(super) fn build(v: &Validator, raw: RawBuild, range: &Range) -> Result<Build, ConfigError> {
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
pub(super) fn chain(
    v: &Validator,
    raw: RawChain,
    p: &PrebuiltConfig,
) -> Result<ChainConfig, ConfigError> {
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
    let what = match std::fs::metadata(&kernel_config) {
        Ok(m) => crate::files::not_regular(m.file_type())
            .map(|kind| format!("is {kind}, not a regular file")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist".to_owned()),
        Err(e) => Some(format!("cannot be read: {e}")),
    };
    if let Some(what) = what {
        return Err(v.field(
            &f("config"),
            format!(
                "{} {what}: point it at a kernel .config (configs/kernel/ has one)",
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
