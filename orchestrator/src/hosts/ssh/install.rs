//! Putting a candidate kernel on an ssh host: upload the image (and its modules), then make
//! the next boot run it by kexec, grub-reboot or the user's commands, and start the reboot.

use super::SshHost;
use crate::config::Install;
use crate::hosts::ssh_conn::{fill_placeholders, shell_quote, Conn, Output, SshError};
use std::path::Path;
use std::time::Duration;

impl SshHost {
    /// Uploads `image` to `remote_image` (and the modules of `release`), sets up the next boot
    /// to run it as the configuration says, and starts a detached reboot.
    pub(super) async fn install(
        &self,
        conn: &Conn,
        image: &Path,
        remote_image: &str,
        release: &str,
    ) -> Result<(), InstallError> {
        let d = self.command_deadline();
        let dir = &self.cfg.remote_dir;
        conn.check(&format!("mkdir -p {}", shell_quote(dir)), d)
            .await?;
        conn.upload(image, remote_image, 0o644, upload_deadline(d, image))
            .await?;
        // Modules, when the build made any: a tarball of lib/modules/<release>. The old
        // directory of that release goes first, so that no stale module of an earlier build
        // of the same release survives; the tarball goes after it is unpacked.
        let modules = image.with_file_name(crate::build::MODULES_TAR);
        if modules.is_file() {
            // The release names the directory removed below: never empty, never a path.
            if release.is_empty() || release.contains('/') || release.starts_with('.') {
                return Err(InstallError::Candidate(format!(
                    "kernel release {release:?} cannot name a directory under /lib/modules"
                )));
            }
            let remote = format!("{dir}/modules-{release}.tar");
            conn.upload(&modules, &remote, 0o644, upload_deadline(d, &modules))
                .await?;
            candidate(
                conn.exec(
                    &format!(
                        "rm -rf {lib} && tar -C / -xf {tar} && rm -f {tar}",
                        lib = shell_quote(&format!("/lib/modules/{release}")),
                        tar = shell_quote(&remote)
                    ),
                    d,
                )
                .await?,
                "unpacking the modules",
            )?;
        }
        let initrd = "";
        let reboot = match &self.cfg.install {
            Install::Kexec { cmdline } => {
                let cmdline = match cmdline {
                    Some(c) => shell_quote(&fill_placeholders(c, remote_image, release, initrd)),
                    // The running kernel's line, so the candidate boots the same root.
                    None => "\"$(cat /proc/cmdline)\"".to_owned(),
                };
                candidate(
                    conn.exec(
                        &format!(
                            "kexec -l {} --command-line={cmdline}",
                            shell_quote(remote_image)
                        ),
                        d,
                    )
                    .await?,
                    "kexec -l",
                )?;
                "kexec -e".to_owned()
            }
            Install::GrubReboot { entry } => {
                candidate(
                    conn.exec(&grub_reboot_command(entry, remote_image, release), d)
                        .await?,
                    "grub-reboot",
                )?;
                "reboot".to_owned()
            }
            Install::Commands { commands, reboot } => {
                for c in commands {
                    let c = fill_placeholders(c, remote_image, release, initrd);
                    candidate(conn.exec(&c, d).await?, &c)?;
                }
                reboot.clone()
            }
        };
        // Detached, after a second: the SSH command returns before the machine goes down.
        // `trap '' HUP` rather than nohup, which busybox machines may lack (the lab VM's
        // busybox has none: the test caught it).
        conn.check(
            &format!(
                "sh -c {} >/dev/null 2>&1 </dev/null &",
                shell_quote(&format!("trap '' HUP; sleep 1; sync; {reboot}"))
            ),
            d,
        )
        .await?;
        Ok(())
    }
}

/// The `install = "grub-reboot"` command: copy the image to `/boot/vmlinuz-<release>`, let
/// the distribution's `update-grub` write its menu entry, and name that entry for the next
/// boot only.
///
/// The entry is one argument of `grub-reboot`, quoted as a whole after `{release}` and
/// `{image}` are put in: a title holds spaces and `>` (the submenu separator), which an
/// unquoted shell word would split and redirect (`Advanced options … >Debian …` wrote a file
/// named `Debian` before the lab VM test caught it).
fn grub_reboot_command(entry: &str, remote_image: &str, release: &str) -> String {
    let boot_image = format!("/boot/vmlinuz-{release}");
    let entry = entry
        .replace("{release}", release)
        .replace("{image}", &boot_image)
        .replace("{initrd}", "");
    format!(
        "cp {} {} && update-grub && grub-reboot {}",
        shell_quote(remote_image),
        shell_quote(&boot_image),
        shell_quote(&entry)
    )
}

/// An install step's failure: the candidate's (a command refused it) or the link's.
pub(super) enum InstallError {
    Candidate(String),
    Ssh(SshError),
}

impl From<SshError> for InstallError {
    fn from(e: SshError) -> Self {
        InstallError::Ssh(e)
    }
}

fn candidate(out: Output, what: &str) -> Result<(), InstallError> {
    if out.status == 0 {
        Ok(())
    } else {
        Err(InstallError::Candidate(format!(
            "{what} failed (exit {}): {}",
            out.status,
            out.output.trim()
        )))
    }
}

/// A command deadline plus 1 s per MiB: a slow lab link is not a dead one.
pub(super) fn upload_deadline(d: Duration, file: &Path) -> Duration {
    let mib = std::fs::metadata(file).map(|m| m.len() >> 20).unwrap_or(0);
    d + Duration::from_secs(mib)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented Debian entry reaches `grub-reboot` as one argument, through a real shell.
    #[test]
    fn the_grub_entry_is_one_argument_of_grub_reboot() {
        use std::os::unix::fs::PermissionsExt;
        let cmd = grub_reboot_command(
            "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {release}",
            "/var/tmp/first bad's dir/vmlinuz-6.1.192-fbabc",
            "6.1.192-fbabc",
        );
        // Stand-ins for the three tools, first on $PATH: they print what they were given.
        let bin = tempfile::tempdir().expect("a temp dir");
        for (tool, body) in [
            ("cp", r#"printf 'cp %s|%s\n' "$1" "$2""#),
            ("update-grub", "true"),
            ("grub-reboot", r#"printf '%s args: %s\n' "$#" "$1""#),
        ] {
            let p = bin.path().join(tool);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("writable");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let cwd = tempfile::tempdir().expect("a temp dir");
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .env("PATH", path)
            .current_dir(cwd.path())
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "cp /var/tmp/first bad's dir/vmlinuz-6.1.192-fbabc|/boot/vmlinuz-6.1.192-fbabc\n\
             1 args: Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.192-fbabc\n"
        );
        // No `>` redirection happened: the working directory is still empty.
        assert_eq!(std::fs::read_dir(cwd.path()).expect("readable").count(), 0);
    }
}
