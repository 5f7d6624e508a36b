//! Loadable modules: whether a config has them, and the tarball the host unpacks.

use super::*;

/// Whether a kernel config enables loadable modules.
pub fn config_has_modules(config: &str) -> bool {
    config.lines().any(|l| l.trim() == "CONFIG_MODULES=y")
}

/// Packs the installed modules `tree` (`<staging>/lib/modules/<release>`) into `tar` as
/// `lib/modules/<release>/...`, so that `tar -C / -xf` puts them in place; returns its size.
///
/// The `build` and `source` symlinks that modules_install makes point into the build host's
/// tree and are left out. There is no entry for `lib/` or `lib/modules/` themselves: on a
/// merged-/usr machine `/lib` is a symlink, which GNU tar would replace by a directory when
/// extracting a `lib/` entry. Entries are in name order with fixed owner, mode and mtime
/// (`tar::HeaderMode::Deterministic`), so the same modules give the same bytes. Written to
/// `<tar>.tmp` and renamed: a crash never leaves a partial tarball under the final name.
pub fn pack_modules(tree: &Path, release: &str, tar: &Path) -> Result<u64, BuildError> {
    for link in ["build", "source"] {
        let p = tree.join(link);
        if p.symlink_metadata().is_ok() {
            std::fs::remove_file(&p).map_err(io(format!("removing {}", p.display())))?;
        }
    }
    let tmp = tar.with_extension("tar.tmp");
    let file = std::fs::File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
    let mut b = tar::Builder::new(std::io::BufWriter::new(file));
    b.mode(tar::HeaderMode::Deterministic);
    b.follow_symlinks(false);
    let what = || format!("writing {}", tmp.display());
    let top = PathBuf::from("lib/modules").join(release);
    let mut stack = vec![(tree.to_owned(), top)];
    while let Some((dir, name)) = stack.pop() {
        b.append_path_with_name(&dir, &name).map_err(io(what()))?;
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(io(format!("reading {}", dir.display())))?
            .collect::<Result<_, _>>()
            .map_err(io(format!("reading {}", dir.display())))?;
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            let ty = e
                .file_type()
                .map_err(io(format!("reading {}", dir.display())))?;
            let child = name.join(e.file_name());
            if ty.is_dir() {
                subdirs.push((e.path(), child));
            } else {
                b.append_path_with_name(e.path(), &child)
                    .map_err(io(what()))?;
            }
        }
        // Popped in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    let w = b.into_inner().map_err(io(what()))?;
    let file = w.into_inner().map_err(|e| BuildError::Io {
        what: what(),
        source: e.into_error(),
    })?;
    file.sync_all().map_err(io(what()))?;
    std::fs::rename(&tmp, tar).map_err(io(format!("storing {}", tar.display())))?;
    let size = std::fs::metadata(tar)
        .map_err(io(format!("reading {}", tar.display())))?
        .len();
    Ok(size)
}
