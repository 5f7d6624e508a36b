//! Prebuilt kernels as candidates (`[build] kind = "prebuilt"`, issue 22): an ordered list of
//! Debian packages, `.deb` files or directories, oldest first, hunted over as a linear
//! history.
//!
//! Each kernel gets a stable, readable id at the run's start ([`resolve`]): a package is
//! `name=version` (apt's candidate version when the hunt file names none), a `.deb` is
//! `package=version@<hash>` of its contents, a directory `<release>@<hash>` of its image.
//! The [`PrebuiltBuilder`] "builds" a candidate by fetching it with `apt-get download` (no
//! root, never installed) and unpacking it with `dpkg-deb -x`, both cached under
//! `<build cache>/prebuilt/` by that id: a CI job that keeps the cache downloads nothing twice.
//! The release the booted kernel must report is read from the image's own header.

use crate::build::BuildError;
use crate::config::{KernelSource, PrebuiltConfig, PrebuiltKernel};
use crate::exec::Task;
use crate::hunt::prelude::content_hash;
use crate::journal::BuildOutcome;
use crate::search::{Dag, Node};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// A kernel of the list with its id.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The id in the journal and the reports.
    pub id: String,
    /// The hunt file's entry.
    pub kernel: PrebuiltKernel,
}

/// Why the prebuilt kernels could not be resolved or fetched: the hunt cannot go on.
fn err(m: impl Into<String>) -> BuildError {
    BuildError::Prebuilt(m.into())
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let what = what.into();
    move |source| BuildError::Io { what, source }
}

/// Runs a tool with the C locale; its standard output, or an error naming the command.
fn tool(cmd: &mut Command) -> Result<String, BuildError> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .env("LC_ALL", "C")
        .output()
        .map_err(io(format!("running {shown}")))?;
    if !out.status.success() {
        return Err(err(format!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `dpkg-deb -f -- DEB Package Version`. Paths come after `--`: a file named `-x.deb` is
/// a file, not an option (issue 32, finding 9).
fn deb_fields(deb: &Path) -> Command {
    let mut c = Command::new("dpkg-deb");
    c.args(["-f", "--"]).arg(deb).args(["Package", "Version"]);
    c
}

/// `dpkg-deb -x -- DEB DIR`, paths after `--` as in [`deb_fields`].
fn deb_extract(deb: &Path, dir: &Path) -> Command {
    let mut c = Command::new("dpkg-deb");
    c.args(["-x", "--"]).arg(deb).arg(dir);
    c
}

/// The ids of the list's kernels, in order (a package's version is asked of apt when the hunt
/// file gives none; files are hashed).
pub fn resolve(cfg: &PrebuiltConfig) -> Result<Vec<Candidate>, BuildError> {
    let mut out: Vec<Candidate> = Vec::new();
    for k in &cfg.kernels {
        let id = match &k.source {
            KernelSource::Package {
                name,
                version: Some(v),
            } => format!("{name}={v}"),
            KernelSource::Package {
                name,
                version: None,
            } => format!("{name}={}", candidate_version(name)?),
            KernelSource::Deb(p) => {
                let fields = tool(&mut deb_fields(p))?;
                let field = |f: &str| {
                    fields
                        .lines()
                        .find_map(|l| l.strip_prefix(f).map(|v| v.trim().to_owned()))
                        .ok_or_else(|| err(format!("{}: no {f} field", p.display())))
                };
                let bytes = std::fs::read(p).map_err(io(format!("reading {}", p.display())))?;
                format!(
                    "{}={}@{}",
                    field("Package:")?,
                    field("Version:")?,
                    content_hash(&bytes)
                )
            }
            KernelSource::Dir(d) => {
                let image = find_image(d)
                    .ok_or_else(|| err(format!("{}: no bzImage or vmlinuz in it", d.display())))?;
                let bytes =
                    std::fs::read(&image).map_err(io(format!("reading {}", image.display())))?;
                let release = image_release(&bytes).ok_or_else(|| {
                    err(format!(
                        "{}: not an x86 bzImage with a kernel release in its header (a release \
                         holds letters, digits and . _ + ~ - only)",
                        image.display()
                    ))
                })?;
                format!("{release}@{}", content_hash(&bytes))
            }
        };
        if let Some(twin) = out.iter().find(|c| c.id == id) {
            return Err(err(format!(
                "build.kernels: {:?} and {:?} are the same kernel ({id})",
                twin.kernel.entry, k.entry
            )));
        }
        out.push(Candidate {
            id,
            kernel: k.clone(),
        });
    }
    Ok(out)
}

/// apt's candidate version of a package (`apt-cache policy`).
fn candidate_version(name: &str) -> Result<String, BuildError> {
    let policy = tool(Command::new("apt-cache").args(["policy", name]))?;
    policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:").map(str::trim))
        .filter(|v| *v != "(none)" && !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            err(format!(
                "apt knows no version of {name}: check the name (apt-cache search --names-only \
                 'linux-image-.*cloud-amd64'), or run apt-get update"
            ))
        })
}

/// The candidates as a line (node 0 the bad kernel, each kernel's parent the one before it;
/// the good kernel is outside it, as a good commit is outside git's range), with the good
/// and bad ids, from the hunt file's `hunt.good` and `hunt.bad` (first and last by default).
pub fn line(
    candidates: &[Candidate],
    cfg: &PrebuiltConfig,
) -> Result<(Dag, String, String), String> {
    let at = |end: &Option<String>, default: usize| match end {
        None => Ok(default),
        Some(e) => candidates
            .iter()
            .position(|c| c.kernel.entry == *e || c.id == *e)
            .ok_or_else(|| format!("{e:?} is not an entry of build.kernels")),
    };
    let good = at(&cfg.good, 0)?;
    let bad = at(&cfg.bad, candidates.len().saturating_sub(1))?;
    if good >= bad {
        return Err("hunt.bad is not after hunt.good in build.kernels".into());
    }
    let nodes = (good + 1..=bad)
        .rev()
        .enumerate()
        .map(|(k, i)| Node {
            id: candidates[i].id.clone(),
            parents: if i > good + 1 { vec![k + 1] } else { vec![] },
            commit_time: i as i64,
        })
        .collect();
    let dag = Dag::new(nodes).map_err(|e| e.to_string())?;
    Ok((dag, candidates[good].id.clone(), candidates[bad].id.clone()))
}

/// The image of a kernel directory: `bzImage`, `vmlinuz`, or the one `vmlinuz-*` (also
/// under `boot/`, where a package puts it).
pub fn find_image(dir: &Path) -> Option<PathBuf> {
    for d in [dir.to_owned(), dir.join("boot")] {
        for name in ["bzImage", "vmlinuz"] {
            if d.join(name).is_file() {
                return Some(d.join(name));
            }
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&d)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("vmlinuz-"))
            })
            .collect();
        if found.len() == 1 {
            return found.pop();
        }
    }
    None
}

/// The kernel release written in an x86 bzImage's setup header (`kernel_version`, boot
/// protocol 2.00 and later: the string `make kernelrelease` gives, then the build's banner).
pub fn image_release(image: &[u8]) -> Option<String> {
    // "HdrS" at 0x202; kernel_version at 0x20e is an offset from 0x200 (Documentation/arch/
    // x86/boot.rst).
    if image.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let off = u16::from_le_bytes([*image.get(0x20e)?, *image.get(0x20f)?]) as usize + 0x200;
    let text = image.get(off..(off + 256).min(image.len()))?;
    let end = text.iter().position(|&b| b == 0 || b == b' ')?;
    let release = std::str::from_utf8(&text[..end]).ok()?;
    (!release.is_empty() && release.chars().all(release_char)).then(|| release.to_owned())
}

/// A character a kernel release holds (`uname -r`: `6.1.0-47-cloud-amd64`, `6.12.9+bpo-amd64`):
/// a header that says anything else (`6.1.0<script>`) holds no release (issue 32, finding 1:
/// the release is shown as the kernel's id in every report).
fn release_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._+~-".contains(c)
}

/// A file-name-safe form of an id (`:` of an epoch, `~` of a pre-release become `_`).
fn file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+-._=@".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// "Builds" prebuilt candidates: fetches and unpacks them into the cache, once.
pub struct PrebuiltBuilder {
    candidates: HashMap<String, Candidate>,
    cache: PathBuf,
}

impl PrebuiltBuilder {
    /// A builder for `candidates`, caching under `cache` (`<build cache>/prebuilt`).
    pub fn new(candidates: &[Candidate], cache: &Path) -> PrebuiltBuilder {
        PrebuiltBuilder {
            candidates: candidates
                .iter()
                .map(|c| (c.id.clone(), c.clone()))
                .collect(),
            cache: cache.to_owned(),
        }
    }

    /// Fetches and unpacks one candidate (blocking): its image and release, or a failed
    /// "build" (a package without a kernel in it) with the lines that say why.
    pub fn prepare(&self, id: &str) -> Result<BuildOutcome, BuildError> {
        let c = self
            .candidates
            .get(id)
            .ok_or_else(|| err(format!("{id} is not a kernel of build.kernels")))?;
        let started = Instant::now();
        let logs = self.cache.join("logs");
        std::fs::create_dir_all(&logs).map_err(io(format!("creating {}", logs.display())))?;
        let log = logs.join(format!("{}.log", file_name(id)));
        let mut log_file =
            std::fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
        let root = match &c.kernel.source {
            KernelSource::Dir(d) => d.clone(),
            KernelSource::Deb(p) => self.unpack(id, p, &mut log_file)?,
            KernelSource::Package { .. } => {
                let deb = self.download(id, &mut log_file)?;
                self.unpack(id, &deb, &mut log_file)?
            }
        };
        let failed = |why: String, mut f: std::fs::File| {
            let _ = writeln!(f, "{why}");
            Ok(BuildOutcome::Failed {
                log: log.clone(),
                error_lines: vec![why],
            })
        };
        let Some(image) = find_image(&root) else {
            return failed(
                format!("{}: no bzImage or vmlinuz in {}", id, root.display()),
                log_file,
            );
        };
        let bytes = std::fs::read(&image).map_err(io(format!("reading {}", image.display())))?;
        let Some(release) = image_release(&bytes) else {
            return failed(format!("{}: not an x86 bzImage", image.display()), log_file);
        };
        let _ = writeln!(
            log_file,
            "kernel {} (release {release}); modules: {}",
            image.display(),
            crate::hosts::modules::find_tree(&image, &release)
                .map_or("none (everything built in)".into(), |t| t
                    .display()
                    .to_string())
        );
        Ok(BuildOutcome::Built {
            kernel_release: release,
            image,
            log,
            seconds: started.elapsed().as_secs_f64(),
            // A distribution's package carries its own name throughout: never the same kernel.
            kernel_id: None,
        })
    }

    /// The package's .deb in the cache, downloaded with `apt-get download` if missing.
    fn download(&self, id: &str, log: &mut std::fs::File) -> Result<PathBuf, BuildError> {
        let debs = self.cache.join("debs");
        let deb = debs.join(format!("{}.deb", file_name(id)));
        if deb.is_file() {
            let _ = writeln!(log, "cached: {}", deb.display());
            return Ok(deb);
        }
        let part = debs.join(format!("{}.partial", file_name(id)));
        let _ = std::fs::remove_dir_all(&part);
        std::fs::create_dir_all(&part).map_err(io(format!("creating {}", part.display())))?;
        tracing::info!("downloading {id}");
        let out = tool(
            Command::new("apt-get")
                .arg("download")
                .arg(id)
                .current_dir(&part),
        )?;
        let _ = writeln!(log, "apt-get download {id}\n{out}");
        let got: Vec<PathBuf> = std::fs::read_dir(&part)
            .map_err(io(format!("reading {}", part.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "deb"))
            .collect();
        let [got] = &got[..] else {
            return Err(err(format!(
                "apt-get download {id} left {} .deb files in {}",
                got.len(),
                part.display()
            )));
        };
        std::fs::rename(got, &deb).map_err(io(format!("moving {}", got.display())))?;
        let _ = std::fs::remove_dir_all(&part);
        Ok(deb)
    }

    /// The .deb unpacked (`dpkg-deb -x`, never installed) into the cache, once.
    fn unpack(&self, id: &str, deb: &Path, log: &mut std::fs::File) -> Result<PathBuf, BuildError> {
        let dir = self.cache.join("kernels").join(file_name(id));
        if dir.is_dir() {
            let _ = writeln!(log, "cached: {}", dir.display());
            return Ok(dir);
        }
        let part = self
            .cache
            .join("kernels")
            .join(format!("{}.partial", file_name(id)));
        let _ = std::fs::remove_dir_all(&part);
        std::fs::create_dir_all(&part).map_err(io(format!("creating {}", part.display())))?;
        tool(&mut deb_extract(deb, &part))?;
        let _ = writeln!(log, "dpkg-deb -x {} {}", deb.display(), dir.display());
        // Renamed into place whole: a kill mid-unpack leaves only a .partial, redone next time.
        std::fs::rename(&part, &dir).map_err(io(format!("moving {}", part.display())))?;
        Ok(dir)
    }
}

impl crate::exec::Builder for Arc<PrebuiltBuilder> {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        let (b, c) = (Arc::clone(self), commit.to_owned());
        Box::pin(async move {
            crate::exec::kernel::status("fetching and unpacking");
            tokio::task::spawn_blocking(move || b.prepare(&c))
                .await
                .expect("unpacking does not panic")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(entry: &str) -> PrebuiltKernel {
        PrebuiltKernel {
            entry: entry.into(),
            source: KernelSource::Package {
                name: entry.into(),
                version: Some("1".into()),
            },
        }
    }

    #[test]
    fn a_list_of_kernels_is_a_line_from_after_good_to_bad() {
        let names = ["a", "b", "c", "d", "e"];
        let candidates: Vec<Candidate> = names
            .iter()
            .map(|n| Candidate {
                id: format!("{n}=1"),
                kernel: kernel(n),
            })
            .collect();
        let cfg = PrebuiltConfig {
            chain: None,
            kernels: candidates.iter().map(|c| c.kernel.clone()).collect(),
            good: Some("b".into()),
            bad: None,
            cache_dir: PathBuf::new(),
        };
        let (dag, good, bad) = line(&candidates, &cfg).unwrap();
        assert_eq!((good.as_str(), bad.as_str()), ("b=1", "e=1"));
        let ids: Vec<&str> = (0..dag.len()).map(|i| dag.id(i)).collect();
        assert_eq!(ids, ["e=1", "d=1", "c=1"]);
        assert_eq!(dag.parents_of(0).collect::<Vec<_>>(), [1]);
        assert_eq!(dag.parents_of(2).count(), 0);
    }

    #[test]
    fn the_release_is_read_from_the_bzimage_header() {
        let mut img = vec![0u8; 0x1000];
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x20e..0x210].copy_from_slice(&0x300u16.to_le_bytes());
        let banner = b"6.1.0-47-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP\0";
        img[0x500..0x500 + banner.len()].copy_from_slice(banner);
        assert_eq!(image_release(&img).as_deref(), Some("6.1.0-47-cloud-amd64"));
        assert_eq!(image_release(&[0u8; 0x300]), None);
        // Issue 32, finding 1: a header that holds markup or a multi-byte character is no
        // release (it would be the kernel's id in every report).
        for hostile in ["6.1.0<script>alert(2)</script>", "6.1.0-é", "6.1\u{1b}[2J"] {
            let mut img = img.clone();
            let text = format!("{hostile} #1 SMP\0");
            img[0x500..0x500 + text.len()].copy_from_slice(text.as_bytes());
            assert_eq!(image_release(&img), None, "{hostile}");
        }
    }

    /// Issue 32, finding 9: a .deb named `-x.deb` reached dpkg-deb as an option ("conflicting
    /// actions -x (--extract) and -f (--field)"). Run where the relative name is the file's.
    #[test]
    fn a_deb_whose_name_starts_with_a_dash_is_a_file_to_dpkg_deb() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = dir.path().join("pkg");
        std::fs::create_dir_all(pkg.join("DEBIAN")).expect("pkg/DEBIAN");
        std::fs::create_dir_all(pkg.join("boot")).expect("pkg/boot");
        std::fs::write(
            pkg.join("DEBIAN/control"),
            "Package: dash-kernel\nVersion: 1.2\nArchitecture: all\nMaintainer: a <a@b.c>\n\
             Description: d\n",
        )
        .expect("control");
        std::fs::write(pkg.join("boot/vmlinuz-1.2"), "kernel").expect("vmlinuz");
        tool(
            Command::new("dpkg-deb")
                .args(["--root-owner-group", "-b", "pkg", "./-x.deb"])
                .current_dir(dir.path()),
        )
        .expect("dpkg-deb -b");
        let deb = Path::new("-x.deb");
        let fields =
            tool(deb_fields(deb).current_dir(dir.path())).expect("dpkg-deb -f reads the file");
        assert!(fields.contains("Package: dash-kernel"), "{fields}");
        tool(deb_extract(deb, Path::new("-out")).current_dir(dir.path()))
            .expect("dpkg-deb -x reads the file");
        assert!(dir.path().join("-out/boot/vmlinuz-1.2").is_file());
    }
}
