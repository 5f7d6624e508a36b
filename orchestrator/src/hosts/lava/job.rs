//! A boot as a LAVA job: the kernel, initramfs and modules served to the farm, and the job's definition.

use super::*;

impl LavaHost {
    pub(super) fn base_initramfs(&self) -> Result<Vec<u8>, HostError> {
        if let Some(b) = self.base_initramfs.get() {
            return Ok(b.clone());
        }
        let b = crate::hosts::qemu::base_initramfs(&self.agent_binary)?;
        let _ = self.base_initramfs.set(b.clone());
        Ok(b)
    }

    pub(super) fn modules(&self, image: &Path, release: &str) -> Result<Vec<u8>, HostError> {
        let mut m = self.modules.lock().expect("no panic holds the lock");
        if let Some((i, a)) = &*m {
            if i == image {
                return Ok(a.clone());
            }
        }
        let a = crate::hosts::qemu::modules_archive(image, release)?;
        *m = Some((image.to_owned(), a.clone()));
        Ok(a)
    }

    /// Writes the job's files under `dir`: kernel, initramfs (token, workload, modules) and
    /// scratch image.
    pub(super) async fn images(
        &self,
        b: &FarmBoot<'_>,
        token: &str,
        dir: &Path,
    ) -> Result<(), HostError> {
        let io = |what: String| move |source| HostError::Io { what, source };
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let kernel = dir.join("vmlinuz");
        let _ = std::fs::remove_file(&kernel);
        if std::fs::hard_link(b.image, &kernel).is_err() {
            std::fs::copy(b.image, &kernel).map_err(io(format!(
                "copying {} to {}",
                b.image.display(),
                kernel.display()
            )))?;
        }
        let mut initramfs = self.base_initramfs()?;
        let workload = serde_json::to_vec(b.workload).expect("a workload serialises");
        let mut extra = Archive::new();
        extra
            .file("etc/firstbad/token", 0o600, format!("{token}\n").as_bytes())
            .file("etc/firstbad/workload.json", 0o644, &workload);
        initramfs.extend_from_slice(&extra.finish());
        initramfs.extend_from_slice(&self.modules(b.image, b.release)?);
        std::fs::write(dir.join("initramfs.cpio"), &initramfs)
            .map_err(io("writing the job's initramfs".into()))?;
        crate::hosts::qemu::make_scratch(&dir.join("scratch.img"), self.cfg.scratch_mb).await
    }

    /// The URL of one of the job's files, as the farm's workers fetch it.
    pub(super) fn url(&self, dir: &Path, file: &str) -> String {
        match &self.cfg.images_url {
            Some(base) => format!(
                "{base}/{}/{file}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            None => format!("file://{}", dir.join(file).display()),
        }
    }

    /// The job definition (JSON, which LAVA's YAML loader reads as it is).
    pub(super) fn definition(&self, b: &FarmBoot<'_>, token: &str, dir: &Path) -> String {
        let cmdline = format!(
            "console=ttyS0 panic=-1 oops=panic {}",
            self.cfg.extra_cmdline
        );
        let cmdline = cmdline.trim();
        let secs = |s: u64| serde_json::json!({ "seconds": s });
        // The test action is the lease on the guest: the workload's time and room for the
        // result's lines.
        let lease = b.workload_timeout_s + 300;
        let mut job = serde_json::json!({
            "device_type": self.cfg.device_type,
            "job_name": format!("firstbad {} {} boot {}", self.name, crate::ids::short(b.commit), b.boot),
            "visibility": "public",
            "priority": "medium",
            "timeouts": {
                "job": secs(self.cfg.job_timeout_s),
                "action": secs(self.cfg.job_timeout_s),
                "connection": secs(120),
            },
            "context": { "arch": "amd64" },
            "metadata": {
                "firstbad.run": token,
                "firstbad.commit": b.commit,
                "firstbad.boot": b.boot.to_string(),
            },
            "actions": [
                { "deploy": {
                    "to": "tmpfs",
                    "timeout": secs(300),
                    "images": {
                        "kernel": {
                            "image_arg": format!("-kernel {{kernel}} -append \"{cmdline}\""),
                            "url": self.url(dir, "vmlinuz"),
                        },
                        "initrd": {
                            "image_arg": "-initrd {initrd}",
                            "url": self.url(dir, "initramfs.cpio"),
                        },
                        "scratch": {
                            "image_arg": "-drive file={scratch},format=raw,if=virtio,cache=writeback",
                            "url": self.url(dir, "scratch.img"),
                        },
                    },
                }},
                { "boot": { "method": "qemu", "media": "tmpfs", "timeout": secs(600) } },
                { "test": {
                    "timeout": secs(lease),
                    "monitors": [{
                        "name": "firstbad",
                        "start": "firstbad-init: starting agent",
                        "end": "firstbad-init: agent exited",
                        "pattern": firstbad_wire::oneshot::LAVA_RESULT_PATTERN,
                        "fixupdict": { "PASS": "pass", "FAIL": "fail" },
                    }],
                }},
            ],
        });
        if !self.cfg.tags.is_empty() {
            job["tags"] = serde_json::json!(self.cfg.tags);
        }
        serde_json::to_string_pretty(&job).expect("a job serialises")
    }
}
