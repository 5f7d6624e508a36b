//! The builder: checks a candidate out into a git worktree and builds its kernel out of tree.
//!
//! One source worktree and one `O=` build directory per (repository, cache, kernel config,
//! toolchain, make arguments), kept between candidates so that each build is incremental;
//! ccache when installed, distcc when `[build] distcc` names hosts (docs/distcc.md): neither
//! changes what is built, so neither is part of the key. The booted kernel is verified later
//! through `CONFIG_LOCALVERSION`, which carries the commit's short id. Finished kernels are
//! cached by commit and key. A failed build is not an error of the hunt: it is a skip, with
//! the root-cause lines kept.
//!
//! When the config has `CONFIG_MODULES=y`, the builder also makes the modules and packs
//! `lib/modules/<release>` into `modules.tar` next to `bzImage`: the ssh host kind unpacks it
//! with `tar -C / -xf` on the machine (issue 6).

use crate::config::{BuildConfig, Ccache, DistccHost};
use crate::journal::BuildOutcome;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod checkout;
mod make;
mod modules;
pub mod revert;

pub use checkout::{checkout_detached, remove_worktrees_under};
pub use make::error_lines;
use make::{run_with_deadline, MakeResult};
pub use modules::{config_has_modules, pack_modules};

/// The builder could not do its job (as opposed to the candidate failing to build).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// ccache was required but is not installed.
    #[error("build.ccache = \"on\" but ccache is not on PATH: install it (apt install ccache) or set \"auto\"")]
    NoCcache,
    /// distcc hosts were given but distcc is not installed.
    #[error("build.distcc names hosts but distcc is not on PATH: install it (apt install distcc) or empty build.distcc")]
    NoDistcc,
    /// The build as configured can never run, on any commit (a command Linux refuses for its
    /// length): the hunt stops as bad input, exit 2 (issue 32, finding 8).
    #[error("{0}")]
    BadInput(String),
    /// A prebuilt kernel could not be resolved or fetched ([`crate::prebuilt`]).
    #[error("prebuilt kernels: {0}")]
    Prebuilt(String),
    /// firstbad was asked to stop ([`crate::interrupt`]); make was killed, nothing cached.
    #[error("interrupted: the build was stopped")]
    Interrupted,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let what = what.into();
    move |source| BuildError::Io { what, source }
}

/// The length of the commit id in `CONFIG_LOCALVERSION` (`-fb<12 hex>`), like `git log --abbrev=12`.
pub const ID_LEN: usize = 12;

/// The `CONFIG_LOCALVERSION` suffix for a commit.
pub fn local_version(commit: &str) -> String {
    format!("-fb{}", &commit[..ID_LEN.min(commit.len())])
}

/// Changes whenever the way a kernel is built changes, so that kernels cached by an older
/// recipe are not reused. r3: `modules.tar` next to `bzImage` when the config has modules.
/// r4: the build number pinned (`KBUILD_BUILD_VERSION`): kernels built before it carry the
/// build directory's counter and are built again (issue 32, finding 0).
/// r5: the build's inputs ([`crate::inputs::INPUTS_FILE`]) next to `bzImage`: a hunt prunes
/// the commits that cannot change its kernel from its endpoints' inputs (issue 35). A kernel
/// cached without its identity ([`crate::kernel_id::KERNEL_ID_FILE`]) is built again in place.
const RECIPE: &str = "r5";

/// The modules tarball's file name, next to `bzImage` in a cached kernel's directory.
pub const MODULES_TAR: &str = "modules.tar";

/// Builds kernels for one repository and one build configuration.
pub struct Builder {
    repo_path: PathBuf,
    cfg: BuildConfig,
    /// Names the cached kernels: config, toolchain, make arguments.
    key: String,
    /// Names the worktree and build directory: the key and the repository.
    work_key: String,
    work: PathBuf,
    /// The base config enables modules: a cached kernel is complete only with its modules.tar.
    modules: bool,
    _lock: std::fs::File,
}

impl Builder {
    /// Prepares (or reuses) the worktree and build directory, taking an exclusive lock on
    /// them so that two hunts never build in the same directory at once.
    pub fn new(repo_path: &Path, cfg: &BuildConfig) -> Result<Builder, BuildError> {
        if cfg.ccache == Ccache::On && !on_path("ccache") {
            return Err(BuildError::NoCcache);
        }
        if !cfg.distcc.is_empty() && !on_path("distcc") {
            return Err(BuildError::NoDistcc);
        }
        let base_config = std::fs::read(&cfg.kernel_config)
            .map_err(io(format!("reading {}", cfg.kernel_config.display())))?;
        let toolchain = toolchain_id(&cfg.make_args);
        let repo_path = std::fs::canonicalize(repo_path)
            .map_err(io(format!("repository {}", repo_path.display())))?;
        // What determines a kernel besides its commit: the config, the toolchain and the make
        // arguments. Not ccache or distcc, which compile the same objects with the same gcc
        // (tests/distcc.rs compares them byte for byte). Not the repository's path: a clone
        // of the same history (a nightly series' checkout, a CI's clean clone) reuses the
        // kernels the demo built.
        let mut material = Vec::new();
        material.extend_from_slice(&base_config);
        material.push(0);
        material.extend_from_slice(toolchain.as_bytes());
        for a in &cfg.make_args {
            material.push(0);
            material.extend_from_slice(a.as_bytes());
        }
        let key =
            git2::Oid::hash_object(git2::ObjectType::Blob, &material)?.to_string()[..16].to_owned();
        // The worktree and build directory belong to one repository (a linked worktree of it)
        // and one cache directory: the worktree's name in the repository is made of this key,
        // and two caches building from one repository under one name pruned each other's
        // worktree, files and all, in the middle of a checkout (found by tests/distcc.rs, whose
        // cache is its own).
        std::fs::create_dir_all(&cfg.cache_dir)
            .map_err(io(format!("creating {}", cfg.cache_dir.display())))?;
        let cache_dir = std::fs::canonicalize(&cfg.cache_dir)
            .map_err(io(format!("cache directory {}", cfg.cache_dir.display())))?;
        let mut work_material = key.clone().into_bytes();
        for part in [&repo_path, &cache_dir] {
            work_material.push(0);
            work_material.extend_from_slice(part.to_string_lossy().as_bytes());
        }
        let work_key = git2::Oid::hash_object(git2::ObjectType::Blob, &work_material)?.to_string()
            [..16]
            .to_owned();
        let work = cfg.cache_dir.join("work").join(&work_key);
        std::fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;
        let lock = lock_in(&work)?;
        Ok(Builder {
            repo_path,
            cfg: cfg.clone(),
            key,
            work_key,
            work,
            modules: config_has_modules(&String::from_utf8_lossy(&base_config)),
            _lock: lock,
        })
    }

    /// The key of this build configuration (part of every cached artifact's path).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The `O=` build directory of this key and repository, kept between candidates.
    pub fn build_dir(&self) -> PathBuf {
        self.work.join("build")
    }

    fn artifact_dir(&self, commit: &str) -> PathBuf {
        self.cfg
            .cache_dir
            .join("kernels")
            .join(format!("{commit}-{}-{RECIPE}", self.key))
    }

    /// A kernel already built for this commit and key, if cached.
    pub fn cached(&self, commit: &str) -> Option<BuildOutcome> {
        let dir = self.artifact_dir(commit);
        let release = std::fs::read_to_string(dir.join("kernelrelease")).ok()?;
        let image = dir.join("bzImage");
        let kernel_id = crate::kernel_id::read(&dir.join(crate::kernel_id::KERNEL_ID_FILE));
        let complete = image.is_file()
            && crate::inputs::is_current(&dir.join(crate::inputs::INPUTS_FILE))
            && kernel_id.is_some()
            && (!self.modules || dir.join(MODULES_TAR).is_file());
        complete.then(|| BuildOutcome::Built {
            kernel_release: release.trim().to_owned(),
            image,
            log: dir.join("build.log"),
            seconds: 0.0,
            kernel_id,
        })
    }

    /// The source files the build of `commit` read, if it is built and cached.
    pub fn inputs(&self, commit: &str) -> Option<crate::inputs::BuildInputs> {
        crate::inputs::read(&self.artifact_dir(commit).join(crate::inputs::INPUTS_FILE))
    }

    /// Where the build of `commit` writes its log (make's output), while it runs and after.
    pub fn log_path(&self, commit: &str) -> PathBuf {
        self.artifact_dir(commit).join("build.log")
    }

    /// Builds `commit` (full hex id), or returns the cached kernel.
    pub fn build(&self, commit: &str) -> Result<BuildOutcome, BuildError> {
        if let Some(hit) = self.cached(commit) {
            return Ok(hit);
        }
        let started = Instant::now();
        let src = self.checkout(commit)?;
        let build_dir = self.build_dir();
        std::fs::create_dir_all(&build_dir).map_err(io("creating the build directory"))?;
        let out = self.artifact_dir(commit);
        std::fs::create_dir_all(&out).map_err(io(format!("creating {}", out.display())))?;
        // Builders of two repositories with one history share the kernel: one builds it, the
        // other waits and takes it.
        let _lock = lock_in(&out)?;
        if let Some(hit) = self.cached(commit) {
            return Ok(hit);
        }
        let log_path = self.log_path(commit);
        let mut log = std::fs::File::create(&log_path)
            .map_err(io(format!("creating {}", log_path.display())))?;
        writeln!(log, "# firstbad build of {commit} (key {})", self.key).ok();

        self.write_config(commit, &build_dir)?;
        let deadline = started + Duration::from_secs(self.cfg.timeout_s);
        let jobs = format!("-j{}", self.cfg.jobs);
        let steps = [&["olddefconfig"][..], &[jobs.as_str(), "bzImage"][..]];
        if let Some(failed) = self.steps(&src, &build_dir, &steps, &mut log, &log_path, deadline)? {
            return Ok(failed);
        }
        // Modules, with the same O=, LOCALVERSION=, compiler and environment as the image;
        // installed (stripped) into a staging directory that is packed below.
        let config_path = build_dir.join(".config");
        let built_config = std::fs::read_to_string(&config_path)
            .map_err(io(format!("reading {}", config_path.display())))?;
        let staging = self.work.join("modules-install");
        let modules = config_has_modules(&built_config);
        if modules {
            if staging.exists() {
                std::fs::remove_dir_all(&staging)
                    .map_err(io(format!("removing {}", staging.display())))?;
            }
            let mod_path = format!("INSTALL_MOD_PATH={}", staging.display());
            let steps = [
                &[jobs.as_str(), "modules"][..],
                &[mod_path.as_str(), "INSTALL_MOD_STRIP=1", "modules_install"][..],
            ];
            if let Some(failed) =
                self.steps(&src, &build_dir, &steps, &mut log, &log_path, deadline)?
            {
                return Ok(failed);
            }
        }

        let release = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&src)
            .arg(format!("O={}", build_dir.display()))
            .arg("LOCALVERSION=")
            .args(&self.cfg.make_args)
            .arg("kernelrelease")
            .stderr(Stdio::null())
            .output()
            .map_err(io("running make kernelrelease"))?;
        let kernel_release = String::from_utf8_lossy(&release.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_owned();
        let image_src = build_dir.join("arch/x86/boot/bzImage");
        let image = out.join("bzImage");
        let tmp = out.join("bzImage.tmp");
        std::fs::copy(&image_src, &tmp).map_err(io(format!("copying {}", image_src.display())))?;
        std::fs::rename(&tmp, &image).map_err(io("storing bzImage"))?;
        if modules {
            let tree = staging.join("lib/modules").join(&kernel_release);
            if !tree.is_dir() {
                return Ok(BuildOutcome::Failed {
                    log: log_path,
                    error_lines: vec![format!(
                        "make modules_install made no lib/modules/{kernel_release} (is the release {kernel_release:?} right?)"
                    )],
                });
            }
            let tar = out.join(MODULES_TAR);
            let size = pack_modules(&tree, &kernel_release, &tar)?;
            writeln!(log, "# {MODULES_TAR}: {size} bytes").ok();
            std::fs::remove_dir_all(&staging)
                .map_err(io(format!("removing {}", staging.display())))?;
        }
        // What the build read, from the `.cmd` files Kbuild left: the build directory holds
        // every target of this configuration, each remade when one of its inputs changed.
        let canonical = std::fs::canonicalize(&src).map_err(io(format!("{}", src.display())))?;
        let inputs = crate::inputs::read_build_dir(&build_dir, &canonical).map_err(io(format!(
            "reading the .cmd files of {}",
            build_dir.display()
        )))?;
        crate::inputs::write(&inputs, &out.join(crate::inputs::INPUTS_FILE))
            .map_err(io("storing the build's inputs"))?;
        writeln!(log, "# {} source files read", inputs.files.len()).ok();
        // The kernel apart from its name: commits that build the same one share their boots.
        let kernel_id = crate::kernel_id::of_build(
            &build_dir.join("vmlinux"),
            modules.then(|| out.join(MODULES_TAR)).as_deref(),
            &local_version(commit),
        )
        .map_err(io(format!(
            "hashing {}",
            build_dir.join("vmlinux").display()
        )))?;
        std::fs::write(
            out.join(crate::kernel_id::KERNEL_ID_FILE),
            format!("{kernel_id}\n"),
        )
        .map_err(io("storing the kernel's identity"))?;
        writeln!(log, "# kernel id {kernel_id}").ok();
        // Written last: its presence marks a complete cached kernel.
        std::fs::write(out.join("kernelrelease"), format!("{kernel_release}\n"))
            .map_err(io("storing kernelrelease"))?;
        let seconds = started.elapsed().as_secs_f64();
        writeln!(log, "# built {kernel_release} in {seconds:.1} s").ok();
        Ok(BuildOutcome::Built {
            kernel_release,
            image,
            log: log_path,
            seconds,
            kernel_id: Some(kernel_id),
        })
    }

    /// Makes `targets` of `commit` (one directory's objects: `fs/ext4/`) in this key's build
    /// directory, after `olddefconfig`, with the config, compiler, distcc hosts and environment
    /// of [`Builder::build`]; make's output goes to `log_path`. Returns the build directory, or
    /// the failed build. For testing and timing a part of the tree without a whole kernel.
    pub fn make_targets(
        &self,
        commit: &str,
        targets: &[&str],
        log_path: &Path,
    ) -> Result<Result<PathBuf, BuildOutcome>, BuildError> {
        let src = self.checkout(commit)?;
        let build_dir = self.build_dir();
        std::fs::create_dir_all(&build_dir).map_err(io("creating the build directory"))?;
        let mut log = std::fs::File::create(log_path)
            .map_err(io(format!("creating {}", log_path.display())))?;
        self.write_config(commit, &build_dir)?;
        let deadline = Instant::now() + Duration::from_secs(self.cfg.timeout_s);
        let jobs = format!("-j{}", self.cfg.jobs);
        let mut make = vec![jobs.as_str()];
        make.extend_from_slice(targets);
        let steps = [&["olddefconfig"][..], &make[..]];
        Ok(
            match self.steps(&src, &build_dir, &steps, &mut log, log_path, deadline)? {
                Some(failed) => Err(failed),
                None => Ok(build_dir),
            },
        )
    }

    /// Writes the base config with this commit's `CONFIG_LOCALVERSION` to `build_dir/.config`.
    fn write_config(&self, commit: &str, build_dir: &Path) -> Result<(), BuildError> {
        let mut config = std::fs::read_to_string(&self.cfg.kernel_config)
            .map_err(io(format!("reading {}", self.cfg.kernel_config.display())))?;
        config.push_str(&format!(
            "\n# added by firstbad\nCONFIG_LOCALVERSION=\"{}\"\n# CONFIG_LOCALVERSION_AUTO is not set\n",
            local_version(commit)
        ));
        std::fs::write(build_dir.join(".config"), config).map_err(io("writing .config"))
    }

    /// Runs the make `steps` in order; the failed build of the first that fails, if one does.
    fn steps(
        &self,
        src: &Path,
        build_dir: &Path,
        steps: &[&[&str]],
        log: &mut std::fs::File,
        log_path: &Path,
        deadline: Instant,
    ) -> Result<Option<BuildOutcome>, BuildError> {
        for target in steps {
            let r = self.make(src, build_dir, target, log, deadline)?;
            if let Some(failed) = self.failed(r, target, src, log_path) {
                return Ok(Some(failed));
            }
        }
        Ok(None)
    }

    /// The failed build for a make step that did not succeed, with its root-cause lines;
    /// `None` when the step succeeded.
    fn failed(
        &self,
        r: MakeResult,
        target: &[&str],
        src: &Path,
        log_path: &Path,
    ) -> Option<BuildOutcome> {
        match r {
            MakeResult::Ok => None,
            MakeResult::Failed(code) => {
                // Paths relative to the tree read like the kernel's own build output.
                let prefix = format!("{}/", src.display());
                let mut error_lines: Vec<String> = error_lines(log_path)
                    .into_iter()
                    .map(|l| l.replace(&prefix, ""))
                    .collect();
                if error_lines.is_empty() {
                    error_lines.push(format!("make {} exited {code}", target.join(" ")));
                }
                Some(BuildOutcome::Failed {
                    log: log_path.to_owned(),
                    error_lines,
                })
            }
            MakeResult::TimedOut => Some(BuildOutcome::Failed {
                log: log_path.to_owned(),
                error_lines: vec![format!(
                    "build timed out after {} s (build.timeout_s)",
                    self.cfg.timeout_s
                )],
            }),
        }
    }

    /// Checks `commit` out into this key's worktree (a linked worktree of the user's
    /// repository, detached HEAD; the user's own checkout is never touched). Only files
    /// that differ are rewritten, so make rebuilds only what changed.
    fn checkout(&self, commit: &str) -> Result<PathBuf, BuildError> {
        let src = self.work.join("src");
        let name = format!("firstbad-{}", self.work_key);
        checkout_detached(&self.repo_path, &src, &name, commit)?;
        Ok(src)
    }

    fn make(
        &self,
        src: &Path,
        build_dir: &Path,
        target: &[&str],
        log: &mut std::fs::File,
        deadline: Instant,
    ) -> Result<MakeResult, BuildError> {
        let mut cmd = Command::new("make");
        cmd.arg("-C")
            .arg(src)
            .arg(format!("O={}", build_dir.display()))
            // An empty LOCALVERSION stops setlocalversion from appending "+" for a git tree:
            // the release must be exactly the version plus CONFIG_LOCALVERSION.
            .arg("LOCALVERSION=")
            .args(&self.cfg.make_args);
        let use_ccache = match self.cfg.ccache {
            Ccache::On => true,
            Ccache::Auto => on_path("ccache"),
            Ccache::Off => false,
        };
        // A compiler of the user's own (`CC=` in make_args) is left alone, ccache and distcc
        // included (validation refuses CC= beside build.distcc).
        let user_cc = self.cfg.make_args.iter().any(|a| a.starts_with("CC="));
        let (cc, env) = if user_cc {
            (None, Vec::new())
        } else {
            compiler(use_ccache, &self.cfg.distcc)
        };
        if let Some(cc) = cc {
            cmd.arg(cc);
        }
        if use_ccache && !user_cc && std::env::var_os("CCACHE_DIR").is_none() {
            cmd.env("CCACHE_DIR", self.cfg.cache_dir.join("ccache"));
        }
        for (k, v) in &env {
            cmd.env(k, v);
            writeln!(log, "# {k}={v}").ok();
        }
        cmd.args(target)
            // Fixed build identity (Documentation/kbuild/reproducible-builds.rst): the same
            // source gives the same kernel whenever it is built, and ccache hits across
            // candidates. The build number too: left to the build directory's counter
            // (`.version`), it grew with every kernel built there, and from #10 on every image
            // differed from the good endpoint's in ~87,000 bytes of shifted code and tables
            // (issue 32, finding 0). The paths are fixed already: one worktree and one build
            // directory per configuration, the same for every candidate.
            .env("KBUILD_BUILD_USER", "firstbad")
            .env("KBUILD_BUILD_HOST", "firstbad")
            .env("KBUILD_BUILD_TIMESTAMP", "1970-01-01")
            .env("KBUILD_BUILD_VERSION", "1")
            .stdin(Stdio::null());
        writeln!(log, "$ make {}", target.join(" ")).ok();
        let out = log.try_clone().map_err(io("build log"))?;
        let err = log.try_clone().map_err(io("build log"))?;
        cmd.stdout(out).stderr(err);
        run_with_deadline(cmd, deadline)
    }
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// The `CC=` make argument and the environment that put ccache and distcc in front of gcc.
///
/// distcc alone: `CC=distcc gcc`. With ccache: `CC=ccache gcc` and `CCACHE_PREFIX=distcc`, the
/// way ccache's manual puts it in front of distcc (a hit compiles nothing anywhere; a miss is
/// sent to the hosts). `DISTCC_FALLBACK=1`: a compile no host takes is made here, so a dead
/// host slows a build and never fails it.
fn compiler(
    ccache: bool,
    distcc: &[DistccHost],
) -> (Option<&'static str>, Vec<(&'static str, String)>) {
    let mut env = Vec::new();
    if !distcc.is_empty() {
        let hosts: Vec<String> = distcc.iter().map(DistccHost::spec).collect();
        env.push(("DISTCC_HOSTS", hosts.join(" ")));
        env.push(("DISTCC_FALLBACK", "1".to_owned()));
    }
    let cc = match (ccache, distcc.is_empty()) {
        (true, distcc_off) => {
            if !distcc_off {
                env.push(("CCACHE_PREFIX", "distcc".to_owned()));
            }
            Some("CC=ccache gcc")
        }
        (false, false) => Some("CC=distcc gcc"),
        (false, true) => None,
    };
    (cc, env)
}

fn toolchain_id(make_args: &[String]) -> String {
    let cc = make_args
        .iter()
        .find_map(|a| a.strip_prefix("CC="))
        .unwrap_or("gcc")
        .to_owned();
    let first = cc.split_whitespace().last().unwrap_or("gcc").to_owned();
    Command::new(&first)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or(cc)
}

/// Takes `dir/lock` exclusively (waiting for another firstbad that holds it); held while the
/// file returned lives.
fn lock_in(dir: &Path) -> Result<std::fs::File, BuildError> {
    let path = dir.join("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(format!("opening {}", path.display())))?;
    flock_exclusive(&lock, &path)?;
    Ok(lock)
}

fn flock_exclusive(f: &std::fs::File, path: &Path) -> Result<(), BuildError> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock(2) on a file descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    tracing::info!("waiting for another firstbad build in {}", path.display());
    // SAFETY: as above, blocking this time.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    if rc == 0 {
        Ok(())
    } else {
        Err(BuildError::Io {
            what: format!("locking {}", path.display()),
            source: std::io::Error::last_os_error(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_keep_the_root_cause() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("build.log");
        std::fs::write(
            &p,
            "  CC      fs/ext4/fsync.o\n\
             ../fs/ext4/fsync.c:42:9: error: 'foo' undeclared (first use in this function)\n\
             make[3]: *** [../scripts/Makefile.build:250: fs/ext4/fsync.o] Error 1\n\
             make[1]: *** Waiting for unfinished jobs....\n",
        )
        .unwrap();
        let l = error_lines(&p);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].contains("'foo' undeclared"));
    }

    /// The paths of a tar file, in order.
    fn tar_paths(tar: &Path) -> Vec<String> {
        tar::Archive::new(std::fs::File::open(tar).unwrap())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn modules_are_packed_under_lib_modules_release_in_name_order_without_links() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("staging/lib/modules/6.1.192-fbabc");
        std::fs::create_dir_all(tree.join("kernel/lib")).unwrap();
        std::fs::write(tree.join("modules.dep"), "kernel/lib/crc7.ko:\n").unwrap();
        std::fs::write(tree.join("modules.alias"), "").unwrap();
        std::fs::write(tree.join("kernel/lib/crc7.ko"), b"\x7fELF").unwrap();
        // What modules_install links to the build host's tree.
        std::os::unix::fs::symlink("/nonexistent/build", tree.join("build")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/src", tree.join("source")).unwrap();
        let tar = dir.path().join(MODULES_TAR);
        let size = pack_modules(&tree, "6.1.192-fbabc", &tar).unwrap();
        assert_eq!(size, std::fs::metadata(&tar).unwrap().len());
        assert!(!tar.with_extension("tar.tmp").exists());
        let top = "lib/modules/6.1.192-fbabc";
        assert_eq!(
            tar_paths(&tar),
            [
                top.to_owned(),
                format!("{top}/modules.alias"),
                format!("{top}/modules.dep"),
                format!("{top}/kernel"),
                format!("{top}/kernel/lib"),
                format!("{top}/kernel/lib/crc7.ko"),
            ]
        );
        // The same modules give the same bytes (fixed mtimes and owners), even after a touch.
        let first = std::fs::read(&tar).unwrap();
        std::fs::write(tree.join("modules.dep"), "kernel/lib/crc7.ko:\n").unwrap();
        pack_modules(&tree, "6.1.192-fbabc", &tar).unwrap();
        assert_eq!(std::fs::read(&tar).unwrap(), first);
        // GNU tar puts them in place under another root, as `tar -C / -xf` does on a host.
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let st = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-xf")
            .arg(&tar)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(
            std::fs::read(root.join(top).join("kernel/lib/crc7.ko")).unwrap(),
            b"\x7fELF"
        );
    }

    #[test]
    fn modules_are_on_only_with_config_modules_y() {
        assert!(config_has_modules("CONFIG_64BIT=y\nCONFIG_MODULES=y\n"));
        assert!(!config_has_modules("# CONFIG_MODULES is not set\n"));
        assert!(!config_has_modules("CONFIG_MODULES_TREE_LOOKUP=y\n"));
    }

    // Issue 21, item 4: kernels were keyed by the repository's path, so a clone of the same
    // history (a series' checkout, CI's clean clone) rebuilt every kernel the demo had built.
    #[test]
    fn two_clones_of_one_history_share_the_kernel_key_and_not_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("kernel.config");
        std::fs::write(&config, "CONFIG_64BIT=y\n").unwrap();
        let cfg = BuildConfig {
            kernel_config: config,
            cache_dir: dir.path().join("cache"),
            jobs: 1,
            ccache: Ccache::Off,
            distcc: Vec::new(),
            make_args: Vec::new(),
            timeout_s: 60,
            prune: true,
        };
        let mut keys = Vec::new();
        for name in ["a", "b"] {
            let repo = dir.path().join(name);
            git2::Repository::init(&repo).unwrap();
            let b = Builder::new(&repo, &cfg).unwrap();
            keys.push((b.key.clone(), b.work_key.clone()));
        }
        assert_eq!(keys[0].0, keys[1].0, "the kernel key");
        assert_ne!(
            keys[0].1, keys[1].1,
            "each repository's worktree is its own"
        );
        // A second cache building from the same repository names its worktree apart.
        let elsewhere = BuildConfig {
            cache_dir: dir.path().join("cache2"),
            ..cfg.clone()
        };
        let b = Builder::new(&dir.path().join("a"), &elsewhere).unwrap();
        assert_eq!(b.key, keys[0].0, "the kernel key");
        assert_ne!(b.work_key, keys[0].1, "each cache's worktree is its own");
        let other = BuildConfig {
            make_args: vec!["LLVM=1".into()],
            ..cfg
        };
        let b = Builder::new(&dir.path().join("a"), &other).unwrap();
        assert_ne!(b.key, keys[0].0, "make arguments make another kernel");
    }

    // Found when a test's own build cache and the machine's built from one demo repository:
    // each took the other's worktree (same name) for a stale one of its own and pruned it,
    // deleting the files of a build in progress ("asm/shared/io.h: No such file").
    #[test]
    fn a_worktree_of_the_same_name_checked_out_elsewhere_is_not_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let repo_path = dir.path().join("repo");
        let repo = git2::Repository::init(&repo_path).unwrap();
        std::fs::write(repo_path.join("f"), "x").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("f")).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.org").unwrap();
        let commit = repo
            .commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap()
            .to_string();
        let (mine, theirs) = (dir.path().join("mine"), dir.path().join("theirs"));
        checkout_detached(&repo_path, &theirs, "wt", &commit).unwrap();
        let e = checkout_detached(&repo_path, &mine, "wt", &commit).unwrap_err();
        assert!(e.to_string().contains("not this build cache's"), "{e}");
        assert!(
            theirs.join("f").exists(),
            "the other worktree's files were deleted"
        );
    }

    // Two caches building from one repository named their linked worktrees alike, and each
    // pruned the other's (files and all) when it checked out: tests/distcc.rs, with a cache of
    // its own, lost its tree to the e2e suite's, and the other way round.
    #[test]
    fn two_caches_of_one_repository_share_the_kernel_key_and_not_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("kernel.config");
        std::fs::write(&config, "CONFIG_64BIT=y\n").unwrap();
        let repo = dir.path().join("linux");
        git2::Repository::init(&repo).unwrap();
        let keys: Vec<(String, String)> = ["cache-a", "cache-b"]
            .iter()
            .map(|c| {
                let cfg = BuildConfig {
                    kernel_config: config.clone(),
                    cache_dir: dir.path().join(c),
                    jobs: 1,
                    ccache: Ccache::Off,
                    distcc: Vec::new(),
                    make_args: Vec::new(),
                    timeout_s: 60,
                    prune: true,
                };
                let b = Builder::new(&repo, &cfg).unwrap();
                (b.key.clone(), b.work_key.clone())
            })
            .collect();
        assert_eq!(keys[0].0, keys[1].0, "the kernel key");
        assert_ne!(keys[0].1, keys[1].1, "the worktree's name");
    }

    fn distcc_host(port: u16, slots: u32) -> DistccHost {
        DistccHost {
            host: "127.0.0.1".into(),
            port,
            slots,
        }
    }

    // Issue 23, item 3: distcc does not change what is built, so a kernel built through it
    // is the kernel built without it (and the other way round).
    #[test]
    fn distcc_hosts_change_neither_the_kernel_key_nor_the_build_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("kernel.config");
        std::fs::write(&config, "CONFIG_64BIT=y\n").unwrap();
        let repo = dir.path().join("linux");
        git2::Repository::init(&repo).unwrap();
        let cfg = BuildConfig {
            kernel_config: config,
            cache_dir: dir.path().join("cache"),
            jobs: 2,
            ccache: Ccache::Off,
            distcc: Vec::new(),
            make_args: Vec::new(),
            timeout_s: 60,
            prune: true,
        };
        let (key, work_key) = {
            let b = Builder::new(&repo, &cfg).unwrap();
            (b.key.clone(), b.work_key.clone())
        };
        let with = BuildConfig {
            distcc: vec![distcc_host(3632, 4), distcc_host(3633, 8)],
            jobs: 14,
            ..cfg
        };
        let b = Builder::new(&repo, &with).unwrap();
        assert_eq!(b.key, key, "the kernel key");
        assert_eq!(b.work_key, work_key, "the build directory");
    }

    #[test]
    fn distcc_goes_behind_ccache_through_ccache_prefix() {
        let hosts = [distcc_host(3632, 2), distcc_host(3633, 2)];
        let spec = "127.0.0.1:3632/2 127.0.0.1:3633/2".to_owned();
        let (cc, env) = compiler(false, &hosts);
        assert_eq!(cc, Some("CC=distcc gcc"));
        assert_eq!(
            env,
            [
                ("DISTCC_HOSTS", spec.clone()),
                ("DISTCC_FALLBACK", "1".into())
            ]
        );
        let (cc, env) = compiler(true, &hosts);
        assert_eq!(cc, Some("CC=ccache gcc"));
        assert_eq!(
            env,
            [
                ("DISTCC_HOSTS", spec),
                ("DISTCC_FALLBACK", "1".into()),
                ("CCACHE_PREFIX", "distcc".into())
            ]
        );
        assert_eq!(compiler(true, &[]), (Some("CC=ccache gcc"), vec![]));
        assert_eq!(compiler(false, &[]), (None, vec![]));
    }

    #[test]
    fn local_version_carries_twelve_hex_digits() {
        assert_eq!(
            local_version("0123456789abcdef0123456789abcdef01234567"),
            "-fb0123456789ab"
        );
    }
}
