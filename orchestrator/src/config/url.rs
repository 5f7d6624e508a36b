//! URLs from a hunt or series file that firstbad sends requests to: one check for all of them
//! (a LAVA server, where a farm's images are, a webhook), so that none carries a secret in
//! plain text to another machine or a password of its own (issue 32, finding 7).

use std::net::IpAddr;

/// Whether mail or HTTP to `host` stays on this machine.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What a URL's requests carry, for the words of a refusal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Carries {
    /// A secret (a token, a report): plain http is for this machine only.
    Secret(&'static str),
    /// Nothing secret (files a farm's workers fetch): plain http may go anywhere.
    Public,
}

/// `text` as an http(s) URL with a host and no user or password in it; with
/// [`Carries::Secret`], plain http only to this machine. The error is the message of a
/// refusal, without the password it may have held.
pub(crate) fn checked_url(text: &str, carries: Carries) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text.trim()).map_err(|e| {
        format!(
            "{} is not a URL ({e}): give an http:// or https:// URL, e.g. \
             \"https://host.example.org/\"",
            super::read::snippet(text)
        )
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "holds a user or password: remove it; secrets are read from a file or \
                    the environment, never from the URL"
                .into(),
        );
    }
    let host = url.host_str().unwrap_or("").trim_matches(['[', ']']);
    if host.is_empty() {
        return Err("has no host: give e.g. \"https://host.example.org/\"".into());
    }
    match (url.scheme(), carries) {
        ("https", _) | ("http", Carries::Public) => Ok(url),
        ("http", Carries::Secret(_)) if is_loopback(host) => Ok(url),
        ("http", Carries::Secret(what)) => Err(format!(
            "http sends {what} in plain text, so it is only for this machine (127.0.0.1, ::1, \
             localhost), not {host}: use https"
        )),
        (other, _) => Err(format!(
            "{} is not http(s): give an https URL",
            super::read::snippet(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_go_over_https_or_stay_on_this_machine_and_never_in_the_url() {
        let token = Carries::Secret("the API token");
        assert!(checked_url("http://127.0.0.1:8000", token).is_ok());
        assert!(checked_url("http://[::1]:8000/", token).is_ok());
        assert!(checked_url("https://lava.example.org", token).is_ok());
        let e = checked_url("http://lava.example.org", token).unwrap_err();
        assert!(
            e.contains("plain text") && e.contains("lava.example.org"),
            "{e}"
        );
        assert!(checked_url("http://lava.example.org/images/", Carries::Public).is_ok());
        let e = checked_url("https://admin:hunter2@lava.example.org", token).unwrap_err();
        assert!(
            e.contains("user or password") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(checked_url("http://", token).is_err());
        assert!(checked_url("file:///tmp/x", Carries::Public).is_err());
    }
}
