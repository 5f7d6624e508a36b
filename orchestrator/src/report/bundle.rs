//! The reproduce bundle (issue 34, item 2): what a maintainer needs to rerun the comparison
//! that convicted a culprit, in one directory and one tar file — the kernel config, the
//! workload file, a hunt file of just the culprit's parent and the culprit, a script that runs
//! `firstbad reproduce` on it, and the e-mail report it comes with. The kernel test robot's
//! mails point at the same things (config, job file, reproduce script).

use crate::config::{Build, HuntConfig};
use std::path::{Path, PathBuf};

/// Why a bundle could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The hunt has nothing a bundle can reproduce.
    #[error("{0}")]
    Nothing(String),
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
/// See [`HUNT_FILE`].
pub const SCRIPT: &str = "reproduce.sh";
/// See [`HUNT_FILE`].
pub const REPORT: &str = "report.txt";

/// Writes the bundle for `culprit` against `parent` into `dir` (created) and `dir` + `.tar`;
/// returns the tar file's path.
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
            cfg.source.display()
        )));
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let workload_name = cfg.workload.file.file_name().map_or_else(
        || "workload.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let copy = |from: &Path, name: &str| -> Result<(), BundleError> {
        std::fs::copy(from, dir.join(name))
            .map(drop)
            .map_err(io(from))
    };
    copy(&build.kernel_config, KERNEL_CONFIG)?;
    copy(&cfg.workload.file, &workload_name)?;

    // The user's hunt file with the two commits and the bundle's own files: every other
    // setting (hosts, classify, build flags) as the hunt ran.
    let text = std::fs::read_to_string(&cfg.source).map_err(io(&cfg.source))?;
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
    let mut workload = section(&mut table, "workload")?;
    workload.insert("file".into(), workload_name.clone().into());
    table.insert("workload".into(), workload.into());
    let hunt_text = format!(
        "# {culprit} against its parent {parent}, from the hunt file {} (firstbad report \
         --bundle).\n# Hosts, build and classify settings are the hunt's: edit [[hosts]] for \
         yours.\n{}",
        cfg.source.display(),
        toml::to_string(&table).map_err(|e| bad_file(e.to_string()))?
    );
    let hunt_path = dir.join(HUNT_FILE);
    std::fs::write(&hunt_path, hunt_text).map_err(io(&hunt_path))?;

    let script = format!(
        "#!/bin/sh\n\
         # Boots {parent} (the parent) and {culprit} (the culprit) interleaved on the hosts of\n\
         # hunt.toml, runs {workload_name} on each boot and compares them: `firstbad reproduce`.\n\
         set -e\n\
         cd \"$(dirname \"$0\")\"\n\
         exec firstbad reproduce {HUNT_FILE} \"$@\"\n"
    );
    let script_path = dir.join(SCRIPT);
    std::fs::write(&script_path, script).map_err(io(&script_path))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755))
        .map_err(io(&script_path))?;
    let report_path = dir.join(REPORT);
    std::fs::write(&report_path, report).map_err(io(&report_path))?;

    let tar_path = PathBuf::from(format!("{}.tar", dir.display()));
    let file = std::fs::File::create(&tar_path).map_err(io(&tar_path))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    let top = dir
        .file_name()
        .map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
    for name in [
        HUNT_FILE,
        KERNEL_CONFIG,
        workload_name.as_str(),
        SCRIPT,
        REPORT,
    ] {
        let path = dir.join(name);
        tar.append_path_with_name(&path, Path::new(&top).join(name))
            .map_err(io(&path))?;
    }
    tar.into_inner()
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .map_err(io(&tar_path))?;
    Ok(tar_path)
}
