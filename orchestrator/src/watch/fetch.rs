//! Fetching the followed branch into the series' repository, with git2.

use base64::Engine as _;
use git2::{FetchOptions, RemoteCallbacks, Repository};
use std::path::Path;

pub use crate::config::series::SshSettings;

/// Whether `known_hosts` holds `key` for `host` (or `[host]:port`). Plain entries only:
/// hashed ones (`|1|...`, `HashKnownHosts yes`) need the HMAC of each name, which this does
/// not compute; write the entry unhashed (`ssh-keyscan` without `-H`).
fn known(known_hosts: &Path, host: &str, key: &[u8]) -> std::io::Result<bool> {
    let text = std::fs::read_to_string(known_hosts)?;
    Ok(text.lines().any(|line| {
        let mut parts = line.split_whitespace();
        let (Some(names), Some(_kind), Some(blob)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let named = names.split(',').any(|n| {
            n == host
                || n.strip_prefix('[')
                    .and_then(|n| n.split_once("]:"))
                    .is_some_and(|(h, _port)| h == host)
        });
        named
            && base64::engine::general_purpose::STANDARD
                .decode(blob)
                .is_ok_and(|b| b == key)
    }))
}

/// The ref the followed branch is fetched into: firstbad's own, never a branch a person has
/// checked out.
pub fn tracking_ref(branch: &str) -> String {
    format!("refs/firstbad/watch/{branch}")
}

/// Fetches `branch` of `remote` into `repo` (created when missing) and returns the
/// commit it points at. Credentials for ssh: `ssh_key` (a cron job has no ssh agent), else
/// the ssh agent, else `~/.ssh/id_ed25519` and `~/.ssh/id_rsa`; for https, git's credential
/// helpers, as `git fetch` finds them.
pub fn fetch(
    repo_path: &Path,
    remote: &str,
    branch: &str,
    ssh: &SshSettings,
) -> Result<String, String> {
    let ssh_key = ssh.key.as_deref();
    let repo = match Repository::open(repo_path) {
        Ok(r) => r,
        Err(_) if !repo_path.exists() => Repository::init(repo_path)
            .map_err(|e| format!("creating {}: {}", repo_path.display(), e.message()))?,
        Err(e) => {
            return Err(format!(
                "{} is not a git repository: {}",
                repo_path.display(),
                e.message()
            ))
        }
    };
    let refspec = format!("+refs/heads/{branch}:{}", tracking_ref(branch));
    let mut callbacks = RemoteCallbacks::new();
    let config = repo.config().ok();
    // libgit2 asks again after each refused credential: offer each once, then give up,
    // rather than loop on a key the server refuses.
    let mut keys: Vec<Option<std::path::PathBuf>> = match ssh_key {
        Some(k) => vec![Some(k.to_owned())],
        None => {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let mut k = vec![None]; // the agent
            for name in ["id_ed25519", "id_rsa"] {
                if let Some(p) = home.as_ref().map(|h| h.join(".ssh").join(name)) {
                    if p.exists() {
                        k.push(Some(p));
                    }
                }
            }
            k
        }
    };
    keys.reverse();
    let mut helper_tried = false;
    callbacks.credentials(move |url, user, allowed| {
        let user = user.unwrap_or("git");
        if allowed.contains(git2::CredentialType::SSH_KEY) {
            return match keys.pop() {
                Some(Some(key)) => git2::Cred::ssh_key(user, None, &key, None),
                Some(None) => git2::Cred::ssh_key_from_agent(user),
                None => Err(git2::Error::from_str(
                    "every ssh key offered was refused (set series.ssh_key to the key)",
                )),
            };
        }
        if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) && !helper_tried {
            helper_tried = true;
            if let Some(cfg) = &config {
                return git2::Cred::credential_helper(cfg, url, Some(user));
            }
        }
        Err(git2::Error::from_str("no credentials for this remote"))
    });
    // libgit2 reports a refused host key with its own words; ours names the file and the fix.
    let refused: std::rc::Rc<std::cell::RefCell<Option<String>>> = Default::default();
    if let Some(file) = ssh.known_hosts.clone() {
        let refused = refused.clone();
        callbacks.certificate_check(move |cert, host| {
            let Some(key) = cert.as_hostkey().and_then(|k| k.hostkey()) else {
                // Not an ssh host key: an https certificate, which libgit2 checks itself.
                return Ok(git2::CertificateCheckStatus::CertificatePassthrough);
            };
            let why = match known(&file, host, key) {
                Ok(true) => return Ok(git2::CertificateCheckStatus::CertificateOk),
                Ok(false) => format!(
                    "the host key of {host} is not in {} (series.known_hosts): add it with \
                     `ssh-keyscan {host} >> {}` after checking it",
                    file.display(),
                    file.display()
                ),
                Err(e) => format!("series.known_hosts: {}: {e}", file.display()),
            };
            *refused.borrow_mut() = Some(why.clone());
            Err(git2::Error::from_str(&why))
        });
    }
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks);
    let mut anonymous = repo
        .remote_anonymous(remote)
        .map_err(|e| format!("remote {remote}: {}", e.message()))?;
    anonymous
        .fetch(&[refspec.as_str()], Some(&mut options), None)
        .map_err(|e| {
            let why = refused.borrow().clone();
            format!(
                "fetching {branch} from {remote}: {}",
                why.unwrap_or_else(|| e.message().to_owned())
            )
        })?;
    let oid = repo
        .refname_to_id(&tracking_ref(branch))
        .map_err(|e| format!("{remote} has no branch {branch}: {}", e.message()))?;
    Ok(oid.to_string())
}
