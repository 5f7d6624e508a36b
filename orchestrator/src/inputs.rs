//! What a kernel build read, and whether a changed file can change the kernel (issue 35).
//!
//! Kbuild writes a `.<target>.cmd` file beside every target it makes: the command, the source
//! and, through fixdep, every header the compiler opened. The builder records, after each
//! kernel it builds, every path of the source tree that those files name (sources, headers,
//! files on command lines such as the syscall tables and linker scripts) in the cached kernel's
//! directory ([`INPUTS_FILE`]). A hunt then reads the inputs of its two endpoints: a commit
//! whose changes touch none of them, and nothing whose effect is not known, cannot change the
//! kernel under test ([`not_an_input`]).
//!
//! The rules are conservative: only five kinds of file are ever called "not an input" —
//! sources and headers (`.c`, `.h`, `.S`, …) that no build of the hunt read, Kconfig files the
//! configuration step did not read (Kconfig lists those it read in `auto.conf.cmd`), files of
//! another architecture's `arch/` directory that no build read, documentation under
//! `Documentation/`, and the tree's own paperwork (MAINTAINERS, LICENSES/, .gitignore, …).
//! Every other file counts whether or not a build named it: Makefiles and Kbuild files,
//! everything under `scripts/`, files of unknown kind (firmware, tables, shell scripts).

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;

/// The cached kernel's list of the source files its build read, one path from the top of the
/// tree a line, sorted, after a [`INPUTS_HEADER`] line.
pub const INPUTS_FILE: &str = "inputs";

/// The first line of an [`INPUTS_FILE`]: which rules wrote it. A file with another first line
/// is not read (its kernel is built again, and the file written anew).
pub const INPUTS_HEADER: &str = "# firstbad build inputs v2";

/// The source files one or more kernel builds read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildInputs {
    /// Paths from the top of the source tree.
    pub files: BTreeSet<String>,
    /// The configuration embeds the kernel's headers (`CONFIG_IKHEADERS`): every header is an
    /// input, read or not by a compiler.
    pub all_headers: bool,
    /// The Kconfig files the configuration step read are among `files` (from
    /// `include/config/auto.conf.cmd`): another Kconfig file was not read. Without it every
    /// Kconfig file counts.
    pub kconfig_read: bool,
    /// The architecture built (`x86`): the `arch/` directory most of `files` are under.
    pub arch: Option<String>,
}

/// Why a changed file cannot change the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NotAnInput {
    /// A source or header that no build of the hunt compiled or included.
    NotBuilt,
    /// A Kconfig file the configuration step did not read.
    NotConfigured,
    /// Under another architecture's `arch/` directory, and read by no build.
    OtherArch,
    /// Under `Documentation/`.
    Documentation,
    /// The tree's paperwork: MAINTAINERS, CREDITS, LICENSES/, .gitignore, .mailmap, ...
    Paperwork,
}

impl NotAnInput {
    /// As a report says it after a list of files.
    pub fn as_str(self) -> &'static str {
        match self {
            NotAnInput::NotBuilt => "not built",
            NotAnInput::NotConfigured => "a Kconfig file the configuration does not read",
            NotAnInput::OtherArch => "another architecture",
            NotAnInput::Documentation => "documentation",
            NotAnInput::Paperwork => "not read by the build",
        }
    }
}

/// Extensions of files that reach the kernel only through a compiler or assembler, which
/// fixdep then lists: one that no `.cmd` file names was not compiled or included.
const SOURCE_EXTENSIONS: [&str; 7] = ["c", "h", "S", "s", "rs", "cc", "cpp"];

/// Files at the top of the tree, and names anywhere, that no kernel build reads.
const PAPERWORK: [&str; 12] = [
    "MAINTAINERS",
    "CREDITS",
    "README",
    "COPYING",
    ".mailmap",
    ".gitignore",
    ".get_maintainer.ignore",
    ".clang-format",
    ".cocciconfig",
    ".gitattributes",
    ".rustfmt.toml",
    "LICENSES",
];

/// Whether `path` (from the top of the tree) is an input of the builds `inputs` describes;
/// `Some(why)` when it cannot change their kernel.
pub fn not_an_input(path: &str, inputs: &BuildInputs) -> Option<NotAnInput> {
    if inputs.files.contains(path) {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    // The top Makefile includes arch/$(SRCARCH)/Makefile and Kbuild descends into that
    // directory alone; another architecture's files reach the build only through Kconfig
    // `source` lines, and those it read are in `files`.
    if let (Some(arch), Some(rest)) = (&inputs.arch, path.strip_prefix("arch/")) {
        if rest.split('/').next().is_some_and(|a| a != arch) && rest.contains('/') {
            return Some(NotAnInput::OtherArch);
        }
    }
    // Kconfig files are read only through `source` lines of Kconfig files that are read, so
    // one the configuration did not read can be read only after a change to one it did.
    if name.starts_with("Kconfig") {
        return (inputs.kconfig_read).then_some(NotAnInput::NotConfigured);
    }
    // Build rules, wherever they sit: a Makefile of a directory not built today may be
    // descended into after a change to its parent's, and Kbuild does not list those it read.
    if ["Makefile", "Kbuild"].iter().any(|p| name.starts_with(p)) {
        return None;
    }
    if path.starts_with("scripts/") {
        return None;
    }
    let top = path.split('/').next().unwrap_or(path);
    if PAPERWORK.contains(&top) || (name == ".gitignore") {
        return Some(NotAnInput::Paperwork);
    }
    if top == "Documentation" {
        return Some(NotAnInput::Documentation);
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e);
    match ext {
        Some("h") if inputs.all_headers => None,
        Some(e) if SOURCE_EXTENSIONS.contains(&e) => Some(NotAnInput::NotBuilt),
        _ => None,
    }
}

/// Every path under `src` that the `.cmd` files under `build_dir` name: what the build that
/// left them read. Paths outside `src` (the build directory's generated headers, the
/// compiler's own) are left out; they are the build's outputs or the toolchain, which the
/// kernel's key already covers.
pub fn read_build_dir(build_dir: &Path, src: &Path) -> std::io::Result<BuildInputs> {
    let prefix = format!("{}/", src.display());
    let mut files = BTreeSet::new();
    let mut dirs = vec![build_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                // The worktree is never inside the build directory, but a link could be.
                if !kind.is_symlink() {
                    dirs.push(entry.path());
                }
            } else if kind.is_file() && name.starts_with('.') && name.ends_with(".cmd") {
                let text = std::fs::read(entry.path())?;
                names_under(&String::from_utf8_lossy(&text), &prefix, &mut files);
            }
        }
    }
    let config = std::fs::read_to_string(build_dir.join(".config")).unwrap_or_default();
    let all_headers = config
        .lines()
        .any(|l| l == "CONFIG_IKHEADERS=y" || l == "CONFIG_IKHEADERS=m");
    // The Kconfig files the configuration read, relative to the source tree, one a line
    // after `deps_config := \`.
    let kconfig = std::fs::read_to_string(build_dir.join("include/config/auto.conf.cmd"));
    let kconfig_read = match kconfig {
        Ok(text) => {
            let listed = text
                .lines()
                .skip_while(|l| !l.starts_with("deps_config :="))
                .skip(1)
                .map(|l| l.trim().trim_end_matches('\\').trim())
                .take_while(|l| !l.is_empty());
            let before = files.len();
            files.extend(listed.filter(|l| !l.starts_with('/')).map(str::to_owned));
            files.len() > before
        }
        Err(_) => false,
    };
    let arch = majority_arch(&files);
    Ok(BuildInputs {
        files,
        all_headers,
        kconfig_read,
        arch,
    })
}

/// The `arch/` directory most of `files` are under, but for Kconfig files (the configuration
/// reads some of every architecture's).
fn majority_arch(files: &BTreeSet<String>) -> Option<String> {
    let mut count: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in files {
        if let Some((arch, rest)) = f.strip_prefix("arch/").and_then(|r| r.split_once('/')) {
            if !rest
                .rsplit('/')
                .next()
                .unwrap_or(rest)
                .starts_with("Kconfig")
            {
                *count.entry(arch).or_default() += 1;
            }
        }
    }
    count
        .into_iter()
        .max_by_key(|&(a, n)| (n, std::cmp::Reverse(a)))
        .map(|(a, _)| a.to_owned())
}

/// Adds to `files` every whitespace-separated word of `text` that starts with `prefix`, with
/// the prefix taken off (and a `-include`'s or `-I`'s glued path too).
fn names_under(text: &str, prefix: &str, files: &mut BTreeSet<String>) {
    for word in text.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '=')) {
        let Some(at) = word.find(prefix) else {
            continue;
        };
        let rel = word[at + prefix.len()..].trim_end_matches([':', ')', ';', '\\']);
        if rel.is_empty() || rel.contains("/../") || rel.starts_with("../") {
            continue;
        }
        files.insert(rel.trim_end_matches('/').to_owned());
    }
}

/// Writes `inputs` to `path` ([`INPUTS_FILE`]'s format), through a temporary file.
pub fn write(inputs: &BuildInputs, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    writeln!(f, "{INPUTS_HEADER}")?;
    if inputs.all_headers {
        writeln!(f, "# all headers")?;
    }
    if inputs.kconfig_read {
        writeln!(f, "# kconfig read")?;
    }
    if let Some(arch) = &inputs.arch {
        writeln!(f, "# arch {arch}")?;
    }
    for file in &inputs.files {
        writeln!(f, "{file}")?;
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(tmp, path)
}

/// Whether `path` is an [`INPUTS_FILE`] written by these rules (its first line), without
/// reading the rest.
pub fn is_current(path: &Path) -> bool {
    std::fs::File::open(path)
        .ok()
        .and_then(|f| std::io::BufReader::new(f).lines().next()?.ok())
        .is_some_and(|l| l == INPUTS_HEADER)
}

/// Reads an [`INPUTS_FILE`]; `None` when it is missing or written by other rules.
pub fn read(path: &Path) -> Option<BuildInputs> {
    let f = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut lines = f.lines();
    if lines.next()?.ok()? != INPUTS_HEADER {
        return None;
    }
    let mut inputs = BuildInputs::default();
    for line in lines {
        let line = line.ok()?;
        if line == "# all headers" {
            inputs.all_headers = true;
        } else if line == "# kconfig read" {
            inputs.kconfig_read = true;
        } else if let Some(arch) = line.strip_prefix("# arch ") {
            inputs.arch = Some(arch.to_owned());
        } else if !line.is_empty() && !line.starts_with('#') {
            inputs.files.insert(line);
        }
    }
    Some(inputs)
}

impl BuildInputs {
    /// The inputs of both builds: a file either read is an input. The Kconfig rule and the
    /// architecture hold only when they hold for both.
    pub fn union(mut self, other: BuildInputs) -> BuildInputs {
        self.files.extend(other.files);
        self.all_headers |= other.all_headers;
        self.kconfig_read &= other.kconfig_read;
        if self.arch != other.arch {
            self.arch = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(files: &[&str]) -> BuildInputs {
        BuildInputs {
            files: files.iter().map(|f| f.to_string()).collect(),
            ..BuildInputs::default()
        }
    }

    #[test]
    fn only_unread_sources_documentation_and_paperwork_are_not_inputs() {
        let i = inputs(&["fs/ext4/fsync.c", "include/linux/fs.h"]);
        for read in ["fs/ext4/fsync.c", "include/linux/fs.h"] {
            assert_eq!(not_an_input(read, &i), None, "{read}");
        }
        for (path, why) in [
            ("drivers/scsi/lpfc/lpfc_init.c", Some(NotAnInput::NotBuilt)),
            (
                "drivers/gpu/drm/i915/i915_request.h",
                Some(NotAnInput::NotBuilt),
            ),
            ("arch/arm64/kernel/head.S", Some(NotAnInput::NotBuilt)),
            (
                "Documentation/RCU/torture.rst",
                Some(NotAnInput::Documentation),
            ),
            ("MAINTAINERS", Some(NotAnInput::Paperwork)),
            ("LICENSES/preferred/GPL-2.0", Some(NotAnInput::Paperwork)),
            ("drivers/gpu/.gitignore", Some(NotAnInput::Paperwork)),
            // Build rules and configuration count wherever they are, read or not (without
            // the configuration's list of Kconfig files, or the architecture, below).
            ("drivers/scsi/lpfc/Makefile", None),
            ("drivers/scsi/Kconfig", None),
            ("Documentation/Kconfig", None),
            ("arch/arm64/Kbuild", None),
            ("arch/arm64/boot/dts/foo.dts", None),
            ("scripts/kconfig/conf.c", None),
            ("scripts/link-vmlinux.sh", None),
            // A file of a kind no compiler reads counts: firmware, tables, anything unknown.
            ("arch/x86/entry/syscalls/syscall_64.tbl", None),
            ("firmware/foo.bin", None),
            ("tools/objtool/Build", None),
        ] {
            assert_eq!(not_an_input(path, &i), why, "{path}");
        }
    }

    #[test]
    fn kconfig_files_not_read_and_other_architectures_are_not_inputs_once_known() {
        let mut i = inputs(&["arch/x86/kernel/head_64.S", "drivers/scsi/Kconfig"]);
        i.kconfig_read = true;
        i.arch = Some("x86".into());
        for (path, why) in [
            ("drivers/scsi/Kconfig", None),
            ("drivers/gpu/Kconfig", Some(NotAnInput::NotConfigured)),
            ("arch/arm64/boot/dts/foo.dts", Some(NotAnInput::OtherArch)),
            ("arch/arm64/Makefile", Some(NotAnInput::OtherArch)),
            ("arch/x86/Makefile", None),
            ("arch/x86/boot/foo.dts", None),
            ("drivers/gpu/Makefile", None),
        ] {
            assert_eq!(not_an_input(path, &i), why, "{path}");
        }
        // Both builds must know: a union with one that does not keeps every Kconfig file.
        let u = i.clone().union(inputs(&[]));
        assert_eq!(not_an_input("drivers/gpu/Kconfig", &u), None);
        assert_eq!(not_an_input("arch/arm64/Makefile", &u), None);
    }

    #[test]
    fn an_embedded_header_archive_makes_every_header_an_input() {
        let mut i = inputs(&[]);
        i.all_headers = true;
        assert_eq!(not_an_input("include/linux/unused.h", &i), None);
        assert_eq!(
            not_an_input("drivers/unused.c", &i),
            Some(NotAnInput::NotBuilt)
        );
    }

    #[test]
    fn cmd_files_give_the_tree_paths_they_name_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path().join("src");
        let build = dir.path().join("build");
        std::fs::create_dir_all(build.join("fs/ext4")).expect("mkdir");
        std::fs::create_dir_all(build.join("arch/x86/include/generated/asm")).expect("mkdir");
        let s = src.display();
        std::fs::write(
            build.join("fs/ext4/.fsync.o.cmd"),
            format!(
                "cmd_fs/ext4/fsync.o := gcc -I{s}/arch/x86/include -include {s}/include/linux/kconfig.h -c -o fs/ext4/fsync.o {s}/fs/ext4/fsync.c\n\n\
                 source_fs/ext4/fsync.o := {s}/fs/ext4/fsync.c\n\n\
                 deps_fs/ext4/fsync.o := \\\n  {s}/include/linux/fs.h \\\n    $(wildcard include/config/SMP) \\\n  include/generated/autoconf.h \\\n  /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \\\n\n\
                 fs/ext4/fsync.o: $(deps_fs/ext4/fsync.o)\n\n$(deps_fs/ext4/fsync.o):\n"
            ),
        )
        .expect("write");
        std::fs::write(
            build.join("arch/x86/include/generated/asm/.syscalls_64.h.cmd"),
            format!("cmd_x := sh {s}/scripts/syscalltbl.sh --abis common,64 {s}/arch/x86/entry/syscalls/syscall_64.tbl arch/x86/include/generated/asm/syscalls_64.h\n"),
        )
        .expect("write");
        // Not a .cmd file: not read.
        std::fs::write(
            build.join("fs/ext4/fsync.o"),
            format!("{s}/fs/ext4/ignored.c"),
        )
        .expect("write");
        std::fs::write(build.join(".config"), "CONFIG_EXT4_FS=y\n").expect("write");
        std::fs::create_dir_all(build.join("include/config")).expect("mkdir");
        std::fs::write(
            build.join("include/config/auto.conf.cmd"),
            "deps_config := \\\n\tfs/ext4/Kconfig \\\n\tarch/sparc/crypto/Kconfig \\\n\n\
             include/config/auto.conf: $(deps_config)\n",
        )
        .expect("write");
        let got = read_build_dir(&build, &src).expect("read");
        let want: BTreeSet<String> = [
            "arch/sparc/crypto/Kconfig",
            "arch/x86/entry/syscalls/syscall_64.tbl",
            "arch/x86/include",
            "fs/ext4/Kconfig",
            "fs/ext4/fsync.c",
            "include/linux/fs.h",
            "include/linux/kconfig.h",
            "scripts/syscalltbl.sh",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        assert_eq!(got.files, want);
        assert!(!got.all_headers);
        assert!(got.kconfig_read);
        assert_eq!(got.arch.as_deref(), Some("x86"));

        let file = dir.path().join(INPUTS_FILE);
        write(&got, &file).expect("write inputs");
        assert_eq!(read(&file), Some(got));
        assert!(is_current(&file));
        std::fs::write(&file, "# firstbad build inputs v0\nfs/ext4/fsync.c\n").expect("write");
        assert_eq!(read(&file), None, "another version's file is not read");
        assert!(!is_current(&file));
    }
}
