//! The mail: lettre's async SMTP transport over tokio and rustls, one connection per mail.
//!
//! Threading: a regression's detection mail gets the Message-ID [`thread_root_id`] derives
//! from [`Message::thread`]; its later mails carry `In-Reply-To` and `References` naming
//! it, so a mail client shows one thread without firstbad storing anything between them.

use super::{chain, retrying, Attempt, EmailConfig, EmailSent, Event, Message, NotifyError};
use super::{config::pem_has_certificate, SmtpTls};
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

/// Longest part of a Message-ID taken from the thread's name; the rest is a hash, so ids
/// stay far below the 998-character line limit and distinct.
const THREAD_CHARS: usize = 64;

/// The Message-ID (with angle brackets) of the first mail of the thread `thread`, from the
/// domain of `from`: the same on every call, so a later mail can reply to it.
pub fn thread_root_id(cfg: &EmailConfig, thread: &str) -> String {
    format!("<firstbad.{}@{}>", token(thread), cfg.from.email.domain())
}

/// The Message-ID `send` gives `msg`: the thread's root for a detection, otherwise a new
/// unique one.
pub fn message_id(cfg: &EmailConfig, msg: &Message) -> String {
    match (&msg.thread, msg.event) {
        (Some(t), Event::RegressionDetected) => thread_root_id(cfg, t),
        (thread, _) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let thread = thread
                .as_deref()
                .map(token)
                .unwrap_or_else(|| "mail".into());
            format!(
                "<firstbad.{thread}.{}.{:08x}@{}>",
                now.as_millis(),
                rand::random::<u32>(),
                cfg.from.email.domain()
            )
        }
    }
}

/// A thread's name as dot-atom text: letters, digits, `-`, `_` kept, the rest `-`, and a
/// hash of the whole name when anything was changed or cut (so `a/b` and `a:b` differ).
fn token(thread: &str) -> String {
    let kept: String = thread
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(THREAD_CHARS)
        .collect();
    if kept == thread {
        kept
    } else {
        format!("{kept}.{:016x}", fnv1a(thread.as_bytes()))
    }
}

/// FNV-1a, 64 bits: a stable hash (std's `DefaultHasher` may change between releases, and
/// a Message-ID must not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Sends the mail, retrying transient failures; each attempt is bounded by `cfg.timeout`.
/// `message_id` is [`message_id`]'s, made by the caller so that the webhook can name it.
pub(super) async fn send(
    cfg: &EmailConfig,
    msg: &Message,
    message_id: String,
) -> Result<EmailSent, NotifyError> {
    let server = cfg.server_name();
    let target = format!("mail to {server}");
    let email = build(cfg, msg, &message_id).map_err(|message| NotifyError::Message {
        target: target.clone(),
        message,
    })?;
    let transport = transport(cfg, &target)?;
    let timeout = cfg.timeout;
    let result = retrying(cfg.attempts, |_| {
        let (transport, email) = (&transport, &email);
        async move {
            match tokio::time::timeout(timeout, transport.send(email.clone())).await {
                Err(_) => Attempt::Retry(format!(
                    "no answer within {} s (notify.email.timeout_s)",
                    timeout.as_secs()
                )),
                Ok(Ok(response)) => {
                    let text = response.message().collect::<Vec<_>>().join(" ");
                    Attempt::Ok(format!("{} {text}", response.code()))
                }
                Ok(Err(e)) => {
                    let what = describe(&e, timeout.as_secs());
                    // 5xx (bad password, recipient refused) and TLS failures (a certificate
                    // that is not trusted) do not pass with time; the rest may.
                    if e.is_permanent() || is_tls(&e) {
                        Attempt::Fail(what)
                    } else {
                        Attempt::Retry(what)
                    }
                }
            }
        }
    })
    .await;
    match result {
        Ok((response, attempts)) => {
            tracing::info!(%server, %message_id, attempts, "mail sent");
            Ok(EmailSent {
                server,
                message_id,
                response,
                attempts,
            })
        }
        Err((message, attempts)) => Err(NotifyError::Smtp {
            server,
            message,
            attempts,
        }),
    }
}

/// A lettre error in words: what failed and, when the server answered, its reply.
fn describe(e: &lettre::transport::smtp::Error, timeout_s: u64) -> String {
    if e.is_timeout() {
        return format!("no answer within {timeout_s} s (notify.email.timeout_s)");
    }
    let what = chain(e);
    if is_tls(e) {
        format!("TLS failed: {what} (a private CA? name its PEM file in notify.email.ca_file)")
    } else if e.status().is_some_and(|c| c.to_string().starts_with("53")) {
        format!("authentication refused: {what} (check notify.email.user and the password)")
    } else {
        what
    }
}

/// Whether the TLS handshake failed: lettre reports a certificate rustls refused during
/// the handshake as a connection error, so its sources are read too.
fn is_tls(e: &lettre::transport::smtp::Error) -> bool {
    let text = chain(e);
    e.is_tls()
        || ["peer certificate", "certificate verify", "handshake"]
            .iter()
            .any(|w| text.contains(w))
}

/// The mail as lettre builds it: headers, threading, the plain-text body. The subject is one
/// line cut to [`crate::report::text::SUBJECT_CHARS`] characters: lettre folds a header only
/// at its spaces, and a 100 KB subject without any was a 100 KB line (RFC 5322 allows 998;
/// issue 32, finding 4).
pub(super) fn build(
    cfg: &EmailConfig,
    msg: &Message,
    message_id: &str,
) -> Result<lettre::Message, String> {
    let mut b = lettre::Message::builder()
        .from(cfg.from.clone())
        .subject(crate::report::text::subject(&msg.subject))
        .date_now()
        .message_id(Some(message_id.to_owned()))
        .user_agent(format!("firstbad {}", env!("CARGO_PKG_VERSION")));
    for to in &cfg.to {
        b = b.to(to.clone());
    }
    if let (Some(thread), false) = (&msg.thread, msg.event == Event::RegressionDetected) {
        let root = thread_root_id(cfg, thread);
        b = b.in_reply_to(root.clone()).references(root);
    }
    b.header(ContentType::TEXT_PLAIN)
        .body(msg.body.clone())
        .map_err(|e| chain(&e))
}

/// The transport of one attempt's connection: TLS mode, trust, credentials, timeout.
fn transport(
    cfg: &EmailConfig,
    target: &str,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, NotifyError> {
    let tls_error = |message: String| NotifyError::Message {
        target: target.to_owned(),
        message: format!("TLS setup: {message}"),
    };
    let tls = match cfg.tls {
        SmtpTls::None => Tls::None,
        mode => {
            let mut params = TlsParameters::builder(cfg.server.clone());
            if let Some(path) = &cfg.ca_file {
                params = params.add_root_certificate(ca_certificate(path, target)?);
            }
            let params = params.build().map_err(|e| tls_error(chain(&e)))?;
            match mode {
                SmtpTls::Wrapper => Tls::Wrapper(params),
                _ => Tls::Required(params),
            }
        }
    };
    let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(cfg.server.clone())
        .port(cfg.port)
        .tls(tls)
        .timeout(Some(cfg.timeout));
    if let Some(auth) = &cfg.auth {
        let password = std::env::var(&auth.password_env)
            .ok()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| NotifyError::MissingEnv {
                target: target.to_owned(),
                var: auth.password_env.clone(),
                field: "notify.email.password_env".into(),
            })?;
        b = b
            .credentials(Credentials::new(auth.user.clone(), password))
            .authentication(vec![Mechanism::Plain, Mechanism::Login]);
    }
    Ok(b.build())
}

/// The private CA's certificates, read when sending (a renewed CA needs no restart).
fn ca_certificate(path: &std::path::Path, target: &str) -> Result<Certificate, NotifyError> {
    let err = |message: String| NotifyError::CaFile {
        target: target.to_owned(),
        path: path.to_owned(),
        message,
    };
    let pem = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    if !pem_has_certificate(&pem) {
        return Err(err("holds no PEM certificate".into()));
    }
    Certificate::from_pem(&pem).map_err(|e| err(chain(&e)))
}
