//! The reproduce bundle (issue 34, item 2): what a maintainer needs to rerun the comparison
//! that convicted a culprit, in one directory and one tar file — the kernel config, the
//! workload file, a hunt file of just the culprit's parent and the culprit, a script that runs
//! `firstbad reproduce` on it, and the e-mail report it comes with. The kernel test robot's
//! mails point at the same things (config, job file, reproduce script).

use crate::config::{Build, HuntConfig};
use crate::text;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a bundle could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The hunt has nothing a bundle can reproduce.
    #[error("{0}")]
    Nothing(String),
    /// The bundle's directory or tar file is already there (issue 61, finding 1: `--bundle .`
    /// replaced the hunt's own hunt.toml and truncated its kernel config).
    #[error(
        "{}: {}",
        path.display(),
        if *tar {
            "exists: the bundle's tar file is made new, never written over or through a \
             link; remove it, or name another DIR"
        } else {
            "exists: a bundle is made in a new directory, never written into one that holds \
             files; name a directory that does not exist yet"
        }
    )]
    Exists {
        /// The directory or tar file.
        path: PathBuf,
        /// Whether it is the tar file.
        tar: bool,
    },
    /// A file the bundle copies (the kernel config, the workload) could not be read.
    #[error("{}: {source}: a bundle copies only a regular file", path.display())]
    Source {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::files::FileError,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The hunt file could not be read back as TOML.
    #[error("{path}: {message}")]
    HuntFile {
        /// The hunt file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

impl BundleError {
    /// True when the user's input is at fault (exit 2), not the system.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, BundleError::Io { .. })
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The files of a bundle, by name in its directory.
pub const HUNT_FILE: &str = "hunt.toml";
/// See [`HUNT_FILE`].
pub const KERNEL_CONFIG: &str = "kernel.config";
/// See [`HUNT_FILE`]: the workload file under a name of the bundle's own, whatever the hunt
/// called it (a name holding a newline put shell lines into the script, one named
/// `kernel.config` replaced the config; issue 61, finding 3).
pub const WORKLOAD: &str = "workload.toml";
/// See [`HUNT_FILE`].
pub const SCRIPT: &str = "reproduce.sh";
/// See [`HUNT_FILE`].
pub const REPORT: &str = "report.txt";

/// The most of a kernel config a bundle copies: a distribution's is about 300 KiB.
const MAX_KERNEL_CONFIG_BYTES: u64 = 16 << 20;

/// Fields of `[[hosts]]` the bundle leaves out: commands run on the hunter's machine
/// (`ipmitool -P …`, a PDU script), where passwords sit; the bundle is meant for sharing
/// (issue 61, finding 3).
const HOST_COMMANDS: [&str; 4] = [
    "power_cycle",
    "console",
    "install_commands",
    "reboot_command",
];

/// `path`, a regular file of at most `limit` bytes, read without waiting on a FIFO.
fn read_source(path: &Path, limit: u64) -> Result<Vec<u8>, BundleError> {
    crate::files::open_regular(path)
        .and_then(|f| crate::files::read_capped(f, limit))
        .map_err(|source| BundleError::Source {
            path: path.to_owned(),
            source,
        })
}

/// Writes the bundle for `culprit` against `parent` into the new directory `dir` and the new
/// file `dir` + `.tar`; returns the tar file's path. Neither may exist: nothing is written
/// into what is there or through a link (issue 61, finding 1).
pub fn write(
    dir: &Path,
    cfg: &HuntConfig,
    parent: &str,
    culprit: &str,
    report: &str,
) -> Result<PathBuf, BundleError> {
    let Build::Source(build) = &cfg.build else {
        return Err(BundleError::Nothing(format!(
            "{}: a bundle rebuilds the culprit and its parent from source; this hunt's kernels \
             are prebuilt",
            text::one_line(&cfg.source.display().to_string())
        )));
    };
    let kernel_config = read_source(&build.kernel_config, MAX_KERNEL_CONFIG_BYTES)?;
    let workload = read_source(&cfg.workload.file, crate::config::MAX_FILE_BYTES as u64)?;

    // The user's hunt file with the two commits and the bundle's own files: every other
    // setting (build flags, classify, the hosts but their commands) as the hunt ran.
    let text = String::from_utf8(read_source(
        &cfg.source,
        crate::config::MAX_FILE_BYTES as u64,
    )?)
    .map_err(|e| BundleError::HuntFile {
        path: cfg.source.clone(),
        message: e.to_string(),
    })?;
    let bad_file = |message: String| BundleError::HuntFile {
        path: cfg.source.clone(),
        message,
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad_file(e.to_string()))?;
    let section = |table: &mut toml::Table, name: &str| -> Result<toml::Table, BundleError> {
        match table.remove(name) {
            Some(toml::Value::Table(t)) => Ok(t),
            None => Ok(toml::Table::new()),
            Some(_) => Err(bad_file(format!("[{name}] is not a table"))),
        }
    };
    let mut hunt = section(&mut table, "hunt")?;
    hunt.insert("name".into(), format!("{}-reproduce", cfg.name).into());
    hunt.insert(
        "repo".into(),
        cfg.repo.to_string_lossy().into_owned().into(),
    );
    hunt.insert("good".into(), parent.into());
    hunt.insert("bad".into(), culprit.into());
    // The state goes beside the bundle's hunt file, not into the original hunt's.
    hunt.remove("state_dir");
    table.insert("hunt".into(), hunt.into());
    let mut build_table = section(&mut table, "build")?;
    build_table.insert("config".into(), KERNEL_CONFIG.into());
    table.insert("build".into(), build_table.into());
    let mut workload_table = section(&mut table, "workload")?;
    workload_table.insert("file".into(), WORKLOAD.into());
    table.insert("workload".into(), workload_table.into());
    let mut left_out = Vec::new();
    if let Some(toml::Value::Array(hosts)) = table.get_mut("hosts") {
        for (i, host) in hosts.iter_mut().enumerate() {
            if let toml::Value::Table(host) = host {
                for field in HOST_COMMANDS {
                    if host.remove(field).is_some() {
                        left_out.push(format!("hosts[{i}].{field}"));
                    }
                }
            }
        }
    }
    let left_out = if left_out.is_empty() {
        String::new()
    } else {
        format!(
            "# Left out of [[hosts]], commands run on the hunter's machine that may hold \
             passwords: {}.\n# Set your own.\n",
            left_out.join(", ")
        )
    };
    // Every line the bundle writes from input is one line (a path holding a newline made a
    // table of its own); the TOML itself is the serializer's.
    let hunt_text = format!(
        "# {} against its parent {}, from the hunt file {} (firstbad report \
         --bundle).\n# Hosts, build and classify settings are the hunt's: edit [[hosts]] for \
         yours.\n{left_out}{}",
        text::one_line(culprit),
        text::one_line(parent),
        text::one_line(&cfg.source.display().to_string()),
        toml::to_string(&table).map_err(|e| bad_file(e.to_string()))?
    );
    let script = format!(
        "#!/bin/sh\n\
         # Boots {} (the parent) and {} (the culprit) interleaved on the hosts of\n\
         # {HUNT_FILE}, runs {WORKLOAD} on each boot and compares them: `firstbad reproduce`.\n\
         set -e\n\
         cd \"$(dirname \"$0\")\"\n\
         exec firstbad reproduce {HUNT_FILE} \"$@\"\n",
        text::one_line(parent),
        text::one_line(culprit),
    );
    let files: [(&str, &[u8], u32); 5] = [
        (HUNT_FILE, hunt_text.as_bytes(), 0o644),
        (KERNEL_CONFIG, &kernel_config, 0o644),
        (WORKLOAD, &workload, 0o644),
        (SCRIPT, script.as_bytes(), 0o755),
        (REPORT, report.as_bytes(), 0o644),
    ];

    // `b/` names the directory `b`, whose tar file is `b.tar`, not `b/.tar`.
    let dir: PathBuf = dir.components().collect();
    let tar_path = PathBuf::from(format!("{}.tar", dir.display()));
    let exists = |path: &Path, tar: bool| match std::fs::symlink_metadata(path) {
        Ok(_) => Err(BundleError::Exists {
            path: path.to_owned(),
            tar,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path)(e)),
    };
    exists(&dir, false)?;
    exists(&tar_path, true)?;
    std::fs::create_dir(&dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => BundleError::Exists {
            path: dir.clone(),
            tar: false,
        },
        _ => io(&dir)(e),
    })?;
    for (name, bytes, mode) in files {
        let path = dir.join(name);
        let mut file = create_new(&path, mode).map_err(io(&path))?;
        // The script executable whatever the umask.
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
            .and_then(|()| file.write_all(bytes))
            .map_err(io(&path))?;
    }

    let file = create_new(&tar_path, 0o644).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => BundleError::Exists {
            path: tar_path.clone(),
            tar: true,
        },
        _ => io(&tar_path)(e),
    })?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    let top = dir
        .file_name()
        .map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for (name, bytes, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_mtime(now);
        tar.append_data(&mut header, Path::new(&top).join(name), bytes)
            .map_err(io(&tar_path))?;
    }
    tar.into_inner()
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .map_err(io(&tar_path))?;
    Ok(tar_path)
}

/// Creates the new file `path` with `mode`: refused when anything is there, a link too
/// (`O_EXCL` never follows one).
fn create_new(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}
