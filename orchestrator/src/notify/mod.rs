//! Telling people: an e-mail through an SMTP server and a JSON webhook when a regression is
//! detected and when its culprit is found (issue 21 item 5; `docs/notify.md`).
//!
//! The series file's `[notify]` table is validated once by [`parse`] into a [`NotifyConfig`];
//! [`send`] then delivers one [`Message`] on every configured channel at once. E-mail and
//! webhook are independent: each has its own timeout and retries, and one failing does not
//! stop the other; [`Sent`] holds both results.
//!
//! - `config::notify` (in the config module, with every table of the files): the `[notify]`
//!   table, raw and validated;
//! - `email.rs`: the mail (lettre over tokio and rustls: STARTTLS, implicit TLS, AUTH), with
//!   the Message-ID, In-Reply-To and References that make one thread of a regression;
//! - `webhook.rs`: the POST (reqwest, rustls) and its JSON envelope.

use crate::config::notify as config;
mod email;
mod webhook;

pub use config::{
    parse, EmailConfig, HeaderSource, NotifyConfig, SmtpAuth, SmtpTls, WebhookConfig,
    WebhookHeader, DEFAULT_ATTEMPTS, DEFAULT_TIMEOUT_S,
};
pub use email::{message_id, thread_root_id};
pub use webhook::{payload, PAYLOAD_SCHEMA};

use std::future::Future;
use std::time::Duration;

/// What happened, which decides the mail's place in its thread and the webhook's `event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The nightly series moved: a regression was detected (the first mail of its thread).
    RegressionDetected,
    /// The hunt of a detected regression found its first bad commit.
    CulpritFound,
    /// The hunt of a detected regression ended without a culprit (not reproduced, paused,
    /// failed): the thread still gets its last word.
    HuntEnded,
    /// The series' head has failed to build or boot `failure_nights` nights in a row: no hunt
    /// ended, nothing was measured (issue 32, finding 9: it went out as `hunt_ended`).
    HeadFailing,
}

/// One notification: the same news for every channel.
#[derive(Debug, Clone)]
pub struct Message {
    /// What happened.
    pub event: Event,
    /// The mail's subject, also the webhook's `subject`; one line.
    pub subject: String,
    /// The plain-text e-mail report: the mail's body, also the webhook's `text`.
    pub body: String,
    /// The machine-readable report: the webhook's `report`.
    pub json: serde_json::Value,
    /// Names the regression, the same in all of its messages (e.g. `fsync-nightly/
    /// fsync_latency_p99_ms/2026-12-01`): the detection mail opens a thread whose Message-ID
    /// is derived from it ([`thread_root_id`]), later mails reply to that one. `None`: a
    /// mail of its own.
    pub thread: Option<String>,
}

/// What each configured channel did; `None` where the channel is not configured.
#[derive(Debug)]
pub struct Sent {
    /// The mail: accepted by the server, or why not.
    pub email: Option<Result<EmailSent, NotifyError>>,
    /// The webhook: answered 2xx, or why not.
    pub webhook: Option<Result<WebhookSent, NotifyError>>,
}

impl Sent {
    /// The failures, e-mail first; empty when everything configured was delivered.
    pub fn errors(&self) -> Vec<&NotifyError> {
        let email = self.email.as_ref().and_then(|r| r.as_ref().err());
        let webhook = self.webhook.as_ref().and_then(|r| r.as_ref().err());
        email.into_iter().chain(webhook).collect()
    }

    /// Whether every configured channel delivered.
    pub fn all_ok(&self) -> bool {
        self.errors().is_empty()
    }
}

/// A mail the SMTP server accepted.
#[derive(Debug, Clone)]
pub struct EmailSent {
    /// `host:port` of the server.
    pub server: String,
    /// The Message-ID header sent, with its angle brackets.
    pub message_id: String,
    /// The server's reply to the message, e.g. `250 OK`.
    pub response: String,
    /// Attempts it took (1 when the first worked).
    pub attempts: u32,
}

/// A webhook call that was answered with a 2xx status.
#[derive(Debug, Clone)]
pub struct WebhookSent {
    /// The URL called.
    pub url: String,
    /// The HTTP status.
    pub status: u16,
    /// Attempts it took (1 when the first worked).
    pub attempts: u32,
}

/// A notification that was not delivered; each names the server or URL and what happened.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// A secret's environment variable is not set (or not UTF-8) when sending.
    #[error(
        "{target}: environment variable {var} ({field}) is not set: export it where firstbad \
         runs (secrets are never read from the series file)"
    )]
    MissingEnv {
        /// `mail to smtp.example.org:587` or `webhook https://…`.
        target: String,
        /// The variable.
        var: String,
        /// The config field that names it, e.g. `notify.email.password_env`.
        field: String,
    },
    /// The private CA file cannot be used.
    #[error("{target}: ca_file {}: {message}", path.display())]
    CaFile {
        /// `mail to …` or `webhook …`.
        target: String,
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The message cannot be made into a mail or a request (e.g. a subject lettre refuses).
    #[error("{target}: cannot build the message: {message}")]
    Message {
        /// `mail to …` or `webhook …`.
        target: String,
        /// Why.
        message: String,
    },
    /// The SMTP server could not be reached or refused the mail.
    #[error("mail to {server}: {message} ({attempts} attempt(s))")]
    Smtp {
        /// `host:port`.
        server: String,
        /// What happened, with the server's reply or the connection error.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The webhook could not be reached or answered with an error status.
    #[error("webhook {url}: {message} ({attempts} attempt(s))")]
    Webhook {
        /// The URL.
        url: String,
        /// What happened: the status and the start of the answer, or the connection error.
        message: String,
        /// The HTTP status, when there was an answer.
        status: Option<u16>,
        /// Attempts made.
        attempts: u32,
    },
}

/// Sends `msg` on every channel of `cfg` at once and reports each; never fails as a whole.
pub async fn send(cfg: &NotifyConfig, msg: &Message) -> Sent {
    let message_id = cfg.email.as_ref().map(|e| email::message_id(e, msg));
    let email = async {
        match (&cfg.email, &message_id) {
            (Some(e), Some(id)) => Some(email::send(e, msg, id.clone()).await),
            _ => None,
        }
    };
    let webhook = async {
        match &cfg.webhook {
            Some(w) => Some(webhook::send(w, msg, message_id.as_deref()).await),
            None => None,
        }
    };
    let (email, webhook) = tokio::join!(email, webhook);
    let sent = Sent { email, webhook };
    for e in sent.errors() {
        tracing::warn!(error = %e, "notification not delivered");
    }
    sent
}

/// Sends the mail alone (what [`send`] does for `[notify.email]`).
pub async fn send_email(cfg: &EmailConfig, msg: &Message) -> Result<EmailSent, NotifyError> {
    email::send(cfg, msg, email::message_id(cfg, msg)).await
}

/// Posts the webhook alone (what [`send`] does for `[notify.webhook]`); its `message_id` is
/// null, there being no mail to name.
pub async fn send_webhook(cfg: &WebhookConfig, msg: &Message) -> Result<WebhookSent, NotifyError> {
    webhook::send(cfg, msg, None).await
}

/// Wait before retry `n` (1-based): 1 s, 2 s, 4 s, … capped at 30 s. Long enough for a
/// restarting server or a proxy's 502 to pass, short beside a nightly cycle.
fn backoff(n: u32) -> Duration {
    Duration::from_secs((1u64 << (n - 1).min(5)).min(30))
}

/// Whether a failed attempt is worth repeating.
enum Attempt<T> {
    /// Done.
    Ok(T),
    /// A transient failure (no connection, timeout, 4xx SMTP, 5xx HTTP): try again.
    Retry(String),
    /// A permanent one (bad password, recipient refused, HTTP 404): repeating cannot help.
    Fail(String),
}

/// Runs `attempt` up to `attempts` times with [`backoff`] between; the result and the
/// number of attempts made, or the last failure and that number.
async fn retrying<T, F, Fut>(attempts: u32, mut attempt: F) -> Result<(T, u32), (String, u32)>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Attempt<T>>,
{
    let mut n = 1;
    loop {
        match attempt(n).await {
            Attempt::Ok(t) => return Ok((t, n)),
            Attempt::Fail(m) => return Err((m, n)),
            Attempt::Retry(m) if n >= attempts => return Err((m, n)),
            Attempt::Retry(m) => {
                tracing::info!(attempt = n, error = %m, "notification failed, retrying");
                tokio::time::sleep(backoff(n)).await;
                n += 1;
            }
        }
    }
}

/// An error and its sources, `: `-joined (reqwest's and lettre's top message alone rarely
/// says "connection refused").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    // lettre wraps an I/O error in its own "Connection error: " and the I/O error's text
    // says it again: keep one of each part.
    let mut parts: Vec<&str> = Vec::new();
    for part in out.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests;
