//! The accept loop: HTTP/1 connections with header, body and idle timeouts and a cap on how many
//! are open, all enforced before the token is checked (issue 19).
//!
//! `axum::serve` timed nothing out: 100 sockets sending headers slowly were held for 70 s, and
//! with a low descriptor limit 80 idle connections made the agent unreachable (`accept error:
//! Too many open files`). Here every connection is in a registry; past the cap, or when
//! `accept` runs out of descriptors, the oldest connection with no request in progress is
//! closed, unauthenticated ones first, so that the orchestrator (which has the token) keeps
//! getting through.

use crate::server;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower::ServiceExt;

/// How long connections may take and how many may be open.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A request's headers must be complete within this time of when hyper starts waiting for
    /// them: on a new connection, or on a kept-alive one after its last answer (so it also
    /// closes connections idle between requests).
    pub header_timeout: Duration,
    /// A request's body must arrive within this time of its headers.
    pub body_timeout: Duration,
    /// A connection with no request in progress and no byte moved for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections open at once; past it the oldest idle or slow one is closed.
    pub max_connections: usize,
}

/// Descriptors kept for workloads when the connection cap is derived from `RLIMIT_NOFILE`:
/// `threads` opens up to 256 files at once, fio and commands take pipes, and the agent itself
/// holds the listener, stdio and `/proc` files.
const RESERVED_FDS: u64 = 320;
/// The cap never goes below this, even under a tiny descriptor limit: the orchestrator needs
/// one connection, and evicting the oldest keeps it reachable.
const MIN_CONNECTIONS: usize = 8;

/// Raises the soft descriptor limit to the hard one and returns `wanted`, lowered so that the
/// connections leave [`RESERVED_FDS`] descriptors for workloads (half the limit under a limit
/// below twice that).
pub fn connection_cap(wanted: usize) -> usize {
    // SAFETY: rlimit is plain old data; getrlimit/setrlimit only read and write it.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is writable for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return wanted;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: a valid rlimit; failure leaves the old limit, which we keep using.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t differs between libc targets
    let limit = lim.rlim_cur as u64;
    // Under a small limit, workloads that need 320 descriptors fail anyway: give connections
    // half, so that the agent stays reachable and small workloads still run.
    let budget = if limit >= 2 * RESERVED_FDS {
        limit - RESERVED_FDS
    } else {
        limit / 2
    };
    wanted.min(
        usize::try_from(budget)
            .unwrap_or(usize::MAX)
            .max(MIN_CONNECTIONS),
    )
}

/// A connection is not closed to make room before it has had its chance to send a request: it
/// must be older than [`CHANCE`] and its task must have read all it was sent without finding a
/// whole request, or it must be older than this. Without that, a burst of connections accepted
/// together evicted each other, the token holder's among them, before any request was read;
/// with it, a newcomer waits in the kernel's backlog, in arrival order, until an older
/// connection can go.
const GRACE: Duration = Duration::from_millis(500);
/// How long after its accept a client surely has sent the request it connected for (a client
/// writes right after `connect` returns; a first read can come before the bytes do).
const CHANCE: Duration = Duration::from_millis(50);

/// Largest request head (request line and headers): the orchestrator's are a few hundred
/// bytes. hyper's default lets each connection buffer ~400 KB before the token is checked,
/// 100 MB over 256 connections; past this the answer is 431.
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// What the registry knows about one open connection.
pub struct ConnState {
    id: u64,
    /// When it was accepted, in ms since the registry's epoch.
    opened_ms: u64,
    /// Requests whose handler is running (0 or 1 for HTTP/1).
    in_flight: AtomicUsize,
    /// When a byte last moved, in ms since the registry's epoch.
    last_io_ms: AtomicU64,
    /// Whether a request on it carried the right token.
    authenticated: AtomicBool,
    /// Whether a read found nothing more to read: the client has sent all it had.
    drained: AtomicBool,
    /// Raised to close the connection.
    kill: Notify,
}

impl ConnState {
    /// Marks the connection as one the token holder uses: it is evicted last.
    pub fn mark_authenticated(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }
}

/// The connection a request arrived on, in the request's extensions.
#[derive(Clone)]
pub struct Conn(pub Arc<ConnState>);

/// Every open connection, oldest first.
struct Registry {
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<ConnState>>>,
}

impl Registry {
    fn new() -> Registry {
        Registry {
            epoch: Instant::now(),
            next_id: AtomicU64::new(1),
            open: Mutex::new(BTreeMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn open(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<ConnState>>> {
        // The map is consistent after every statement, so a panic elsewhere cannot break it.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the oldest idle or slow connections until fewer than `cap` are open; `false` if
    /// that is not possible now (every connection is busy or too young to judge).
    fn make_room(&self, cap: usize) -> bool {
        let mut open = self.open();
        while open.len() >= cap {
            if !self.evict_one(&mut open) {
                return false;
            }
        }
        true
    }

    /// Registers a new connection.
    fn admit(&self) -> Arc<ConnState> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ms();
        let state = Arc::new(ConnState {
            id,
            opened_ms: now,
            in_flight: AtomicUsize::new(0),
            last_io_ms: AtomicU64::new(now),
            authenticated: AtomicBool::new(false),
            drained: AtomicBool::new(false),
            kill: Notify::new(),
        });
        self.open().insert(id, state.clone());
        state
    }

    /// Closes the oldest connection that has no request in progress and has had its chance
    /// (see [`GRACE`]); unauthenticated ones go first, and a connection that carried the token
    /// goes only when no other kind is open. `false` if there is none to close.
    fn evict_one(&self, open: &mut BTreeMap<u64, Arc<ConnState>>) -> bool {
        let now = self.now_ms();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let evictable = |c: &Arc<ConnState>| {
            let age = now.saturating_sub(c.opened_ms);
            c.in_flight.load(Ordering::Relaxed) == 0
                && ((c.drained.load(Ordering::Relaxed) && age >= ms(CHANCE)) || age >= ms(GRACE))
        };
        let authenticated = |c: &Arc<ConnState>| c.authenticated.load(Ordering::Relaxed);
        let victim = if open.values().any(|c| !authenticated(c)) {
            open.values().find(|c| !authenticated(c) && evictable(c))
        } else {
            open.values().find(|c| evictable(c))
        }
        .map(|c| c.id);
        match victim.and_then(|id| open.remove(&id)) {
            Some(c) => {
                tracing::debug!(
                    conn = c.id,
                    "connection cap reached: closing the oldest idle"
                );
                c.kill.notify_one();
                true
            }
            None => false,
        }
    }

    /// Closes every connection with no request in progress that moved no byte for `idle`.
    fn reap_idle(&self, idle: Duration) {
        let now = self.now_ms();
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        self.open().retain(|_, c| {
            let stale = c.in_flight.load(Ordering::Relaxed) == 0
                && now.saturating_sub(c.last_io_ms.load(Ordering::Relaxed)) >= idle_ms;
            if stale {
                tracing::debug!(conn = c.id, "idle timeout: closing");
                c.kill.notify_one();
            }
            !stale
        });
    }

    fn remove(&self, id: u64) {
        self.open().remove(&id);
    }
}

/// Serves `router` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, router: Router, limits: ConnLimits) {
    let registry = Arc::new(Registry::new());
    let reaper = registry.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval((limits.idle_timeout / 4).min(Duration::from_secs(1)));
        loop {
            tick.tick().await;
            reaper.reap_idle(limits.idle_timeout);
        }
    });
    loop {
        // Room first, then accept: a connection that cannot be served yet stays in the
        // kernel's backlog, where its request waits in arrival order.
        if !registry.make_room(limits.max_connections) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                let state = registry.admit();
                tokio::spawn(serve_one(
                    stream,
                    state,
                    registry.clone(),
                    router.clone(),
                    limits,
                ));
            }
            Err(e) => {
                // Out of descriptors (closed connections free theirs a moment after they
                // leave the registry): close the oldest idle one and try again.
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    registry.evict_one(&mut registry.open());
                }
                tracing::warn!("accept error: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Serves one connection until it ends, times out or is evicted.
async fn serve_one(
    stream: TcpStream,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
    router: Router,
    limits: ConnLimits,
) {
    let io = TokioIo::new(Tracked {
        inner: stream,
        state: state.clone(),
        registry: registry.clone(),
    });
    let conn_state = state.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let router = router.clone();
        let state = conn_state.clone();
        // In progress from the moment hyper has the headers, before the future first runs.
        let busy = InFlight::enter(state.clone());
        async move {
            let response = handle(req, router, state, limits.body_timeout).await;
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::select! {
        ended = connection => {
            if let Err(e) = ended {
                tracing::debug!(conn = state.id, "connection ended: {e}");
            }
        }
        () = state.kill.notified() => {}
    }
    registry.remove(state.id);
}

/// Reads the body within `body_timeout` and up to [`server::BODY_LIMIT`], then hands the
/// request to the router.
async fn handle(
    req: Request<Incoming>,
    router: Router,
    conn: Arc<ConnState>,
    body_timeout: Duration,
) -> axum::response::Response {
    use axum::http::StatusCode;
    let (mut parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, server::BODY_LIMIT);
    let bytes = match tokio::time::timeout(body_timeout, limited.collect()).await {
        Err(_) => {
            return server::error_response(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    body_timeout.as_secs_f64()
                ),
            )
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return server::error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body is larger than {} bytes", server::BODY_LIMIT),
            )
        }
        Ok(Err(e)) => {
            return server::error_response(StatusCode::BAD_REQUEST, format!("request body: {e}"))
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    parts.extensions.insert(Conn(conn));
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    match router.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

/// Counts a request as in progress while it lives.
struct InFlight(Arc<ConnState>);

impl InFlight {
    fn enter(state: Arc<ConnState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A TCP stream that records when a byte last moved, for the idle timeout.
struct Tracked {
    inner: TcpStream,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
}

impl Tracked {
    fn touch(&self) {
        self.state
            .last_io_ms
            .store(self.registry.now_ms(), Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.touch();
        } else if polled.is_pending() {
            this.state.drained.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks every connection open so far as having sent all it had, and waits out
    /// [`CHANCE`].
    fn aged(r: &Registry) {
        for c in r.open().values() {
            c.drained.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(CHANCE + Duration::from_millis(5));
    }

    #[test]
    fn past_the_cap_the_oldest_unauthenticated_idle_connection_goes_first() {
        let r = Registry::new();
        let a = r.admit();
        let b = r.admit();
        let c = r.admit();
        // Too young to judge: no room is made, the newcomer waits.
        assert!(!r.make_room(3));
        aged(&r);
        a.mark_authenticated();
        b.in_flight.fetch_add(1, Ordering::Relaxed);
        // a is oldest but authenticated, b is busy: c goes.
        assert!(r.make_room(3));
        assert_eq!(r.open().keys().copied().collect::<Vec<_>>(), [a.id, b.id]);
        let d = r.admit();
        // d has not been read yet, and a carried the token: a stays while d may be the
        // token holder's second connection.
        assert!(!r.make_room(3));
        d.mark_authenticated();
        b.mark_authenticated();
        // Only a is idle now, and everyone is authenticated: a goes.
        assert!(r.make_room(3));
        assert!(!r.open().contains_key(&a.id));
        let e = r.admit();
        e.in_flight.fetch_add(1, Ordering::Relaxed);
        // Everyone busy: no room.
        assert!(!r.make_room(3));
        let told = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
            .block_on(async { tokio::time::timeout(Duration::ZERO, c.kill.notified()).await });
        assert!(told.is_ok(), "c was told to close");
    }

    #[test]
    fn idle_connections_are_reaped_busy_ones_are_not() {
        let r = Registry::new();
        let idle = r.admit();
        let busy = r.admit();
        busy.in_flight.fetch_add(1, Ordering::Relaxed);
        r.reap_idle(Duration::ZERO);
        let open: Vec<u64> = r.open().keys().copied().collect();
        assert_eq!(open, [busy.id]);
        assert!(!r.open().contains_key(&idle.id));
    }
}
