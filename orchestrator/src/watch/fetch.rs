//! Fetching the followed branch into the series' repository, with git2.

use git2::{FetchOptions, RemoteCallbacks, Repository};
use std::path::Path;

/// The ref the followed branch is fetched into: firstbad's own, never a branch a person has
/// checked out.
pub fn tracking_ref(branch: &str) -> String {
    format!("refs/firstbad/watch/{branch}")
}

/// Fetches `branch` of `remote` into `repo` (created when missing) and returns the
/// commit it points at. Credentials for ssh come from the ssh agent, for https from git's
/// credential helpers, as `git fetch` finds them.
pub fn fetch(repo_path: &Path, remote: &str, branch: &str) -> Result<String, String> {
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
    callbacks.credentials(move |url, user, allowed| {
        if allowed.contains(git2::CredentialType::SSH_KEY) {
            return git2::Cred::ssh_key_from_agent(user.unwrap_or("git"));
        }
        if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) {
            if let Some(cfg) = &config {
                return git2::Cred::credential_helper(cfg, url, user);
            }
        }
        git2::Cred::default()
    });
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks);
    let mut anonymous = repo
        .remote_anonymous(remote)
        .map_err(|e| format!("remote {remote}: {}", e.message()))?;
    anonymous
        .fetch(&[refspec.as_str()], Some(&mut options), None)
        .map_err(|e| format!("fetching {branch} from {remote}: {}", e.message()))?;
    let oid = repo
        .refname_to_id(&tracking_ref(branch))
        .map_err(|e| format!("{remote} has no branch {branch}: {}", e.message()))?;
    Ok(oid.to_string())
}
