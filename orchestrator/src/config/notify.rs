//! The `[notify]` table of a series file: serde structs that refuse unknown fields, then
//! validated once into types that cannot hold a bad value (as `config/` does for hunt files).
//!
//! Every error is a [`ConfigError::Field`] naming the file, the dotted field and the fix:
//! `series.toml: notify.email.to[0]: "bob" is not an address: …`.

use crate::config::snippet;
use crate::error::ConfigError;
use lettre::message::Mailbox;
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod webhook;

use webhook::webhook;

/// Seconds one attempt may take (connect, TLS, the whole SMTP dialogue or HTTP exchange)
/// when `timeout_s` is not given: a dead server must not hold a nightly cycle, and 30 s is
/// far beyond a healthy server's answer (greeting delays of real MTAs are a few seconds).
pub const DEFAULT_TIMEOUT_S: u64 = 30;

/// Largest `timeout_s`: ten minutes is longer than any server's honest delay; more would
/// let three attempts eat half an hour of a night.
const MAX_TIMEOUT_S: i64 = 600;

/// Attempts per channel when `attempts` is not given: a restarting relay or a proxy's 502
/// gets two more chances, 1 s and 2 s later (see `backoff`).
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// Largest `attempts`: with the backoff doubling, ten attempts already wait ~4 minutes.
const MAX_ATTEMPTS: i64 = 10;

/// The validated `[notify]` table: at least one channel.
#[derive(Debug, Clone)]
pub struct NotifyConfig {
    /// `[notify.email]`: mail through an SMTP server.
    pub email: Option<EmailConfig>,
    /// `[notify.webhook]`: a JSON POST.
    pub webhook: Option<WebhookConfig>,
}

/// `[notify.email]`.
#[derive(Debug, Clone)]
pub struct EmailConfig {
    /// The SMTP server's host name or IP address (also the name its certificate must hold).
    pub server: String,
    /// Its port: 587 with STARTTLS, 465 with implicit TLS, 25 without TLS unless given.
    pub port: u16,
    /// How the connection is encrypted.
    pub tls: SmtpTls,
    /// The `From:` mailbox (also the envelope sender); its domain ends every Message-ID.
    pub from: Mailbox,
    /// The `To:` mailboxes (at least one; also the envelope recipients).
    pub to: Vec<Mailbox>,
    /// SMTP AUTH (PLAIN or LOGIN, whichever the server offers), when `user` is set.
    pub auth: Option<SmtpAuth>,
    /// PEM file of a private CA trusted besides the public roots (a lab's own CA).
    pub ca_file: Option<PathBuf>,
    /// Bound on one attempt, from connect to the server's reply to the message.
    pub timeout: Duration,
    /// Attempts before the mail is reported as not sent (at least 1).
    pub attempts: u32,
}

impl EmailConfig {
    /// `host:port`, as messages name the server.
    pub fn server_name(&self) -> String {
        match self.server.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{}]:{}", self.server, self.port),
            _ => format!("{}:{}", self.server, self.port),
        }
    }
}

/// How the SMTP connection is encrypted (`tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// `"starttls"` (the default): plain connect, then STARTTLS, required (no fallback to
    /// plain text when the server does not offer it).
    Starttls,
    /// `"wrapper"`: TLS from the first byte (SMTPS, port 465).
    Wrapper,
    /// `"none"`: plain text; only to a server on this machine (127.0.0.1, ::1, localhost).
    None,
}

/// SMTP AUTH: the user, and where the password is when sending.
#[derive(Debug, Clone)]
pub struct SmtpAuth {
    /// The user name.
    pub user: String,
    /// The environment variable holding the password (read when sending, never stored).
    pub password_env: String,
}

/// `[notify.webhook]`.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where the JSON is POSTed: https, or http to this machine only.
    pub url: reqwest::Url,
    /// Extra request headers (`Authorization: Bearer …` from `bearer_token_env`, `headers`,
    /// `headers_env`).
    pub headers: Vec<WebhookHeader>,
    /// PEM file of a private CA trusted besides the public roots.
    pub ca_file: Option<PathBuf>,
    /// Bound on one attempt, from connect to the end of the answer.
    pub timeout: Duration,
    /// Attempts before the call is reported as failed (at least 1).
    pub attempts: u32,
}

/// One extra header of the webhook request.
#[derive(Debug, Clone)]
pub struct WebhookHeader {
    /// The header's name.
    pub name: HeaderName,
    /// Its value, or where to find it.
    pub value: HeaderSource,
    /// The config field it came from, for messages (`notify.webhook.headers_env.X-Token`).
    pub field: String,
}

/// Where a webhook header's value comes from.
#[derive(Debug, Clone)]
pub enum HeaderSource {
    /// Written in the file (not a secret).
    Text(HeaderValue),
    /// `prefix` followed by this environment variable's value, read when sending.
    Env {
        /// The variable.
        var: String,
        /// Put before the value: `"Bearer "` for `bearer_token_env`, else empty.
        prefix: &'static str,
    },
}

// ---- raw ----------------------------------------------------------------------------------

/// `[notify]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    email: Option<toml::Value>,
    webhook: Option<toml::Value>,
}

/// `[notify.email]` as written; required fields are `Option` so that a missing one gets its
/// own message, and integers `i64` so that a bad one gets its range.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmail {
    server: Option<String>,
    port: Option<i64>,
    tls: Option<String>,
    from: Option<String>,
    to: Option<OneOrMany>,
    user: Option<String>,
    password_env: Option<String>,
    /// Refused with a pointer to `password_env`.
    password: Option<toml::Value>,
    ca_file: Option<String>,
    timeout_s: Option<i64>,
    attempts: Option<i64>,
}

/// `to = "a@b"` or `to = ["a@b", "c@d"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// `[notify.webhook]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url: Option<String>,
    bearer_token_env: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    ca_file: Option<String>,
    timeout_s: Option<i64>,
    attempts: Option<i64>,
}

// ---- validation ---------------------------------------------------------------------------

/// Validates the `[notify]` table of the file at `path` (which names it in errors and
/// anchors a relative `ca_file`). Checks that the environment variables it names are set,
/// so that a missing password stops `firstbad watch` at its start, not at 3 a.m.
pub fn parse(path: &Path, table: &toml::Value) -> Result<NotifyConfig, ConfigError> {
    let v = V { path };
    let raw: RawNotify = v.deserialize("notify", table)?;
    let email = match &raw.email {
        Some(t) => Some(email(&v, v.deserialize("notify.email", t)?)?),
        None => None,
    };
    let webhook = match &raw.webhook {
        Some(t) => Some(webhook(&v, v.deserialize("notify.webhook", t)?)?),
        None => None,
    };
    if email.is_none() && webhook.is_none() {
        return Err(v.field(
            "notify",
            "names no channel: add [notify.email] or [notify.webhook], or remove [notify]",
        ));
    }
    Ok(NotifyConfig { email, webhook })
}

fn email(v: &V, raw: RawEmail) -> Result<EmailConfig, ConfigError> {
    if raw.password.is_some() {
        return Err(v.field(
            "notify.email.password",
            "a password is never read from the series file: put it in an environment variable \
             and name that in notify.email.password_env, e.g. password_env = \
             \"FIRSTBAD_SMTP_PASSWORD\"",
        ));
    }
    let server = raw.server.ok_or_else(|| {
        v.field(
            "notify.email.server",
            "missing: give the SMTP server's host name, e.g. server = \"smtp.example.org\"",
        )
    })?;
    let server = host(v, "notify.email.server", server.trim())?;
    let tls = match raw.tls.as_deref() {
        None | Some("starttls") => SmtpTls::Starttls,
        Some("wrapper") => SmtpTls::Wrapper,
        Some("none") => SmtpTls::None,
        Some(other) => {
            return Err(v.field(
                "notify.email.tls",
                format!(
                    "{} is not a TLS mode: give \"starttls\" (port 587), \"wrapper\" (implicit \
                     TLS, port 465) or \"none\" (a relay on this machine only)",
                    snippet(other)
                ),
            ))
        }
    };
    if tls == SmtpTls::None && !crate::config::url::is_loopback(&server) {
        return Err(v.field(
            "notify.email.tls",
            format!(
                "\"none\" sends the mail (and any password) in plain text, so it is only for a \
                 server on this machine (127.0.0.1, ::1, localhost), not {}: use \"starttls\" \
                 or \"wrapper\"",
                snippet(&server)
            ),
        ));
    }
    let default_port = match tls {
        SmtpTls::Starttls => 587,
        SmtpTls::Wrapper => 465,
        SmtpTls::None => 25,
    };
    let port = match raw.port {
        None => default_port,
        Some(p) => u16::try_from(p)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| v.field("notify.email.port", format!("{p} is not in 1..=65535")))?,
    };
    let from = raw.from.ok_or_else(|| {
        v.field(
            "notify.email.from",
            "missing: give the sender, e.g. from = \"firstbad <firstbad@lab.example.org>\"",
        )
    })?;
    let from = mailbox(v, "notify.email.from", &from)?;
    let to = match raw.to {
        None => {
            return Err(v.field(
                "notify.email.to",
                "missing: give the recipients, e.g. to = [\"maintainer@example.org\"]",
            ))
        }
        Some(OneOrMany::One(a)) => vec![mailbox(v, "notify.email.to", &a)?],
        Some(OneOrMany::Many(list)) => {
            if list.is_empty() {
                return Err(v.field(
                    "notify.email.to",
                    "is an empty list: give at least one recipient",
                ));
            }
            list.iter()
                .enumerate()
                .map(|(i, a)| mailbox(v, &format!("notify.email.to[{i}]"), a))
                .collect::<Result<_, _>>()?
        }
    };
    let auth = match (raw.user, raw.password_env) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(v.field(
                "notify.email.password_env",
                "missing: a user needs a password: name the environment variable that holds \
                 it, e.g. password_env = \"FIRSTBAD_SMTP_PASSWORD\"",
            ))
        }
        (None, Some(_)) => {
            return Err(v.field(
                "notify.email.user",
                "missing: password_env is set, so give the user to authenticate as, or \
                 remove password_env",
            ))
        }
        (Some(user), Some(var)) => {
            if user.trim().is_empty() || user.chars().any(char::is_control) {
                return Err(v.field(
                    "notify.email.user",
                    "is empty or holds control characters: give the SMTP user name",
                ));
            }
            let var = env_var(v, "notify.email.password_env", &var, "the SMTP password")?;
            Some(SmtpAuth {
                user,
                password_env: var,
            })
        }
    };
    let ca_file = match raw.ca_file {
        Some(_) if tls == SmtpTls::None => {
            return Err(v.field(
                "notify.email.ca_file",
                "is unused with tls = \"none\": remove it, or use \"starttls\"",
            ))
        }
        Some(f) => Some(ca_file(v, "notify.email.ca_file", &f)?),
        None => None,
    };
    Ok(EmailConfig {
        server,
        port,
        tls,
        from,
        to,
        auth,
        ca_file,
        timeout: timeout(v, "notify.email.timeout_s", raw.timeout_s)?,
        attempts: attempts(v, "notify.email.attempts", raw.attempts)?,
    })
}

/// A host name or IP address, without scheme or port.
fn host(v: &V, field: &str, s: &str) -> Result<String, ConfigError> {
    let fix = "give the host name only, e.g. \"smtp.example.org\" (the port goes in \
               notify.email.port)";
    if s.is_empty() {
        return Err(v.field(field, format!("is empty: {fix}")));
    }
    let bare = s.trim_matches(['[', ']']);
    if bare.parse::<IpAddr>().is_ok() {
        return Ok(bare.to_owned());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if s.len() > 253 || !s.trim_end_matches('.').split('.').all(label_ok) {
        return Err(v.field(field, format!("{} is not a host name: {fix}", snippet(s))));
    }
    Ok(s.to_owned())
}

fn mailbox(v: &V, field: &str, s: &str) -> Result<Mailbox, ConfigError> {
    s.trim().parse::<Mailbox>().map_err(|_| {
        v.field(
            field,
            format!(
                "{} is not an address: give \"user@host\" or \"Name <user@host>\"",
                snippet(s)
            ),
        )
    })
}

/// An environment variable's name, checked to be set (to UTF-8 text) now.
fn env_var(v: &V, field: &str, var: &str, what: &str) -> Result<String, ConfigError> {
    let well_formed = var.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(v.field(
            field,
            format!(
                "{} is not an environment variable name: give the name of the variable that \
                 holds {what} (letters, digits, '_'), not the value",
                snippet(var)
            ),
        ));
    }
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Ok(var.to_owned()),
        _ => Err(v.field(
            field,
            format!(
                "environment variable {var} is not set (or empty or not UTF-8): export it \
                 with {what} before firstbad starts"
            ),
        )),
    }
}

fn ca_file(v: &V, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
    let p = match raw.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(rest),
        None => PathBuf::from(raw),
    };
    let p = if p.is_absolute() {
        p
    } else {
        let base = match v.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::canonicalize(base)
            .unwrap_or_else(|_| base.to_owned())
            .join(p)
    };
    let shown = snippet(&p.display().to_string());
    let text =
        std::fs::read(&p).map_err(|e| v.field(field, format!("{shown}: cannot read it: {e}")))?;
    if !pem_has_certificate(&text) {
        return Err(v.field(
            field,
            format!("{shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ));
    }
    Ok(p)
}

/// Whether PEM text holds a certificate block (the check `send` repeats on the bytes).
pub(crate) fn pem_has_certificate(pem: &[u8]) -> bool {
    pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----")
}

fn timeout(v: &V, field: &str, raw: Option<i64>) -> Result<Duration, ConfigError> {
    let s = raw.unwrap_or(DEFAULT_TIMEOUT_S as i64);
    if !(1..=MAX_TIMEOUT_S).contains(&s) {
        return Err(v.field(
            field,
            format!(
                "{s} is not in 1..={MAX_TIMEOUT_S} (seconds one attempt may take; default \
                 {DEFAULT_TIMEOUT_S})"
            ),
        ));
    }
    Ok(Duration::from_secs(s as u64))
}

fn attempts(v: &V, field: &str, raw: Option<i64>) -> Result<u32, ConfigError> {
    let n = raw.unwrap_or(DEFAULT_ATTEMPTS as i64);
    if !(1..=MAX_ATTEMPTS).contains(&n) {
        return Err(v.field(
            field,
            format!(
                "{n} is not in 1..={MAX_ATTEMPTS} (tries before giving up, the first \
                 included; default {DEFAULT_ATTEMPTS})"
            ),
        ));
    }
    Ok(n as u32)
}

/// The file being validated, for errors.
struct V<'a> {
    path: &'a Path,
}

impl V<'_> {
    fn field(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            path: self.path.to_owned(),
            field: field.to_owned(),
            message: message
                .into()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// A table deserialized with its unknown or mistyped field named under `prefix`.
    fn deserialize<T: serde::de::DeserializeOwned>(
        &self,
        prefix: &str,
        value: &toml::Value,
    ) -> Result<T, ConfigError> {
        if !value.is_table() {
            return Err(self.field(
                prefix,
                format!("is {}, expected a table", article(value.type_str())),
            ));
        }
        T::deserialize(value.clone()).map_err(|e| {
            let message = e.message().to_owned();
            // serde: "unknown field `sever`, expected one of `server`, …".
            if let Some(rest) = message.strip_prefix("unknown field `") {
                let name = rest.split('`').next().unwrap_or("");
                let expected = rest
                    .split_once(", expected ")
                    .map(|(_, e)| format!(": expected {}", e.replace("one of ", "one of: ")))
                    .unwrap_or_default();
                return self.field(
                    &format!("{prefix}.{name}"),
                    format!("unknown field{expected}"),
                );
            }
            // toml does not say which key a mistyped value is under: every field of the raw
            // structs is optional, so the key whose table of one fails alone is the one.
            let key = value.as_table().and_then(|t| {
                t.iter().find_map(|(k, v)| {
                    let one = toml::Value::Table(toml::Table::from_iter([(k.clone(), v.clone())]));
                    T::deserialize(one).is_err().then(|| k.clone())
                })
            });
            let field = match key {
                Some(k) => format!("{prefix}.{k}"),
                None => prefix.to_owned(),
            };
            self.field(
                &field,
                message
                    .replace("expected i64", "expected an integer")
                    .replace(
                        "data did not match any variant of untagged enum OneOrMany",
                        "expected an address or a list of addresses",
                    ),
            )
        })
    }
}

/// "an integer", "a string".
fn article(what: &str) -> String {
    match what.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {what}"),
        _ => format!("a {what}"),
    }
}
