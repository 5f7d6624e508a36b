//! The HTTP API: routes, bearer-token check, error bodies, and the in-memory run table.

use crate::{identity, workloads};
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use firstbad_wire::{ApiError, Identity, RunRequest, RunStarted, RunState, RunStatus};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// Largest request body: a run request is a few hundred bytes.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Finished runs kept for polling; older ones are forgotten (each may hold 1M samples).
const KEPT_RUNS: usize = 32;
/// Bytes of JSON kept over all runs: past it the oldest finished runs are forgotten even within
/// [`KEPT_RUNS`]; 32 runs of a million samples each held 256 MB (issue 19). 32 MiB is what the
/// bound of issue 19, 4 million samples, took as 8-byte numbers; as JSON, about 20 bytes a
/// sample, it keeps about 1.6 million. The newest run is always kept, so that it can be polled.
const KEPT_BYTES: usize = 32 << 20;
/// How long a cancel request waits for the workload to stop and clean up before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Shared state of the server: the token, the scratch directory and the runs.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    token: Vec<u8>,
    scratch: PathBuf,
    limits: workloads::Limits,
    runs: Mutex<Runs>,
    /// Woken whenever a run leaves `Running`.
    run_ended: Notify,
    /// Makes run ids unique across agent restarts on the same host.
    id_prefix: String,
    next_id: AtomicU64,
}

#[derive(Default)]
struct Runs {
    by_id: HashMap<String, Run>,
    /// Run ids, oldest first, to forget the oldest finished runs.
    order: VecDeque<String>,
    /// The run in progress; there is at most one.
    running: Option<String>,
}

/// One run in the table: its answer, serialised once whenever it changes.
///
/// Every `GET /v1/runs/{id}` and cancel answer shares `body` (a reference-counted buffer):
/// issue 32, finding 6, was that each GET cloned the result and serialised the clone, so 30
/// concurrent GETs of a large result held 30 copies (+310 MB, kept resident).
struct Run {
    /// Where the run is: whether it can still be cancelled or forgotten.
    state: RunState,
    /// The [`RunStatus`] as `Json(RunStatus)` would write it.
    body: Bytes,
    cancel: Arc<AtomicBool>,
}

/// `status` as `Json(RunStatus)` writes it, and the state the JSON says; `status` (its
/// samples as numbers) is dropped after.
fn serialised(status: RunStatus) -> (RunState, Bytes) {
    match serde_json::to_vec(&status) {
        Ok(json) => (status.state, Bytes::from(json)),
        // serde_json fails only on maps whose keys are not strings, and a RunStatus has none;
        // should that change, the run fails and says why rather than answering nothing.
        Err(e) => {
            let failed = RunStatus {
                id: status.id,
                state: RunState::Failed,
                result: None,
                error: Some(format!("the agent cannot serialise the result: {e}")),
            };
            let json = serde_json::to_vec(&failed).unwrap_or_default();
            (RunState::Failed, Bytes::from(json))
        }
    }
}

impl Run {
    /// A run in `status`, serialised now.
    fn new(status: RunStatus, cancel: Arc<AtomicBool>) -> Run {
        let (state, body) = serialised(status);
        Run {
            state,
            body,
            cancel,
        }
    }

    /// The answer to a GET or a cancel: the shared body, as `Json(RunStatus)` sends it.
    fn response(&self) -> Response {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body.clone(),
        )
            .into_response()
    }
}

impl AppState {
    /// State for a server that accepts `token` and runs workloads in `scratch` (and on the
    /// devices `limits` allows).
    pub fn new(token: String, scratch: PathBuf, limits: workloads::Limits) -> Self {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        AppState(Arc::new(Inner {
            token: token.into_bytes(),
            scratch,
            limits,
            runs: Mutex::new(Runs::default()),
            run_ended: Notify::new(),
            id_prefix: format!("{started:x}"),
            next_id: AtomicU64::new(1),
        }))
    }

    fn runs(&self) -> MutexGuard<'_, Runs> {
        // The table is consistent after every statement, so a panic elsewhere cannot break it.
        self.0.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The API's router: every route, behind the bearer-token check and the body limit.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/identity", get(get_identity))
        .route("/v1/runs", post(start_run))
        .route("/v1/runs/:id", get(get_run))
        .route("/v1/runs/:id/cancel", post(cancel_run))
        .fallback(no_such_endpoint)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

/// An error answer: a status and an [`ApiError`] body saying what went wrong.
#[derive(Debug)]
pub struct AppError {
    status: StatusCode,
    message: String,
}

impl AppError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        AppError {
            status,
            message: message.into(),
        }
    }
}

/// An [`ApiError`] answer with `status`, for the layers in front of the router.
pub fn error_response(status: StatusCode, message: String) -> Response {
    AppError::new(status, message).into_response()
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = Json(ApiError {
            error: self.message,
        });
        if self.status == StatusCode::UNAUTHORIZED {
            (self.status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
        } else {
            (self.status, body).into_response()
        }
    }
}

impl From<JsonRejection> for AppError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("request body is larger than {BODY_LIMIT} bytes")
        } else {
            format!("request body: {}", rejection.body_text())
        };
        AppError::new(status, message)
    }
}

/// Refuses every request without `Authorization: Bearer <token>`.
async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match presented {
        Some(token) if constant_time_eq(token, &state.0.token) => {
            if let Some(conn) = request.extensions().get::<crate::connections::Conn>() {
                conn.0.mark_authenticated();
            }
            next.run(request).await
        }
        Some(_) => AppError::new(StatusCode::UNAUTHORIZED, "wrong bearer token").into_response(),
        None => AppError::new(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>` header",
        )
        .into_response(),
    }
}

/// Compares without an early exit, so that timing does not reveal how much of a guess matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

async fn no_such_endpoint(method: Method, uri: Uri) -> AppError {
    AppError::new(
        StatusCode::NOT_FOUND,
        format!("no endpoint {method} {uri}; protocol v1 has /v1/identity and /v1/runs"),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{uri} does not take {method}"),
    )
}

async fn get_identity() -> Result<Json<Identity>, AppError> {
    identity::identity()
        .map(Json)
        .map_err(|e| AppError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

async fn start_run(
    State(state): State<AppState>,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<RunStarted>), AppError> {
    let Json(RunRequest { workload }) = body?;
    workloads::validate(&workload, &state.0.limits)
        .and_then(|()| workloads::check_devices(&workload))
        .map_err(|e| AppError::new(StatusCode::UNPROCESSABLE_ENTITY, e))?;
    let scratch = &state.0.scratch;
    workloads::check_room(&workload, scratch).map_err(|e| match e {
        workloads::NoRoom::Statvfs(m) => AppError::new(StatusCode::INTERNAL_SERVER_ERROR, m),
        workloads::NoRoom::Short(m) => AppError::new(StatusCode::UNPROCESSABLE_ENTITY, m),
    })?;

    let cancel = Arc::new(AtomicBool::new(false));
    let id = {
        let mut runs = state.runs();
        if let Some(running) = &runs.running {
            return Err(AppError::new(
                StatusCode::CONFLICT,
                format!(
                    "run {running} is still running and the agent runs one workload at a time; \
                     wait for it or POST /v1/runs/{running}/cancel"
                ),
            ));
        }
        let n = state.0.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", state.0.id_prefix);
        let status = RunStatus {
            id: id.clone(),
            state: RunState::Running,
            result: None,
            error: None,
        };
        runs.by_id
            .insert(id.clone(), Run::new(status, cancel.clone()));
        runs.order.push_back(id.clone());
        runs.running = Some(id.clone());
        forget_old_runs(&mut runs);
        id
    };

    tracing::info!(run = %id, kind = workload.kind(), "run started");
    // The id is ours (hex and digits), so the run directory stays inside scratch.
    let run_dir = scratch.join(format!("firstbad-run-{id}"));
    let task_state = state.clone();
    let task_id = id.clone();
    let limits = state.0.limits.clone();
    tokio::spawn(async move {
        let outcome = tokio::task::spawn_blocking(move || {
            workloads::run(&workload, &run_dir, &limits, &cancel)
        })
        .await;
        finish(&task_state, &task_id, outcome);
    });
    Ok((StatusCode::ACCEPTED, Json(RunStarted { id })))
}

/// Records how a run ended and frees the agent for the next one.
fn finish(
    state: &AppState,
    id: &str,
    outcome: Result<Result<workloads::Outcome, workloads::WorkloadError>, tokio::task::JoinError>,
) {
    let mut status = RunStatus {
        id: id.to_owned(),
        state: RunState::Failed,
        result: None,
        error: None,
    };
    match outcome {
        Ok(Ok(workloads::Outcome::Done(result))) => {
            status.state = RunState::Done;
            status.result = Some(result);
        }
        Ok(Ok(workloads::Outcome::Cancelled)) => status.state = RunState::Cancelled,
        Ok(Err(e)) => status.error = Some(e.to_string()),
        Err(e) => status.error = Some(format!("workload task failed: {e}")),
    }
    tracing::info!(run = %id, state = ?status.state, error = status.error, "run ended");
    // Serialised once, before the table is locked: a large result takes a while.
    let (ended, body) = serialised(status);
    let mut runs = state.runs();
    if let Some(run) = runs.by_id.get_mut(id) {
        run.state = ended;
        run.body = body;
    }
    runs.running = None;
    forget_old_runs(&mut runs);
    drop(runs);
    state.0.run_ended.notify_waiters();
}

/// Forgets the oldest finished runs beyond [`KEPT_RUNS`] or [`KEPT_BYTES`]; never the
/// running one nor the newest.
fn forget_old_runs(runs: &mut Runs) {
    let mut total: usize = runs.by_id.values().map(|r| r.body.len()).sum();
    let newest = runs.order.back().cloned();
    let mut i = 0;
    while i < runs.order.len() && (runs.order.len() > KEPT_RUNS || total > KEPT_BYTES) {
        let id = &runs.order[i];
        if runs.running.as_deref() == Some(id.as_str()) || newest.as_ref() == Some(id) {
            i += 1;
            continue;
        }
        if let Some(id) = runs.order.remove(i) {
            if let Some(run) = runs.by_id.remove(&id) {
                total -= run.body.len();
            }
        }
    }
}

fn unknown_run(id: &str) -> AppError {
    AppError::new(StatusCode::NOT_FOUND, format!("no run {id} on this agent"))
}

async fn get_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let runs = state.runs();
    let run = runs.by_id.get(&id).ok_or_else(|| unknown_run(&id))?;
    Ok(run.response())
}

/// Asks the run to stop, then waits up to [`CANCEL_WAIT`] for it to stop and clean up, so that
/// the answer usually says `cancelled` already (or `done`, if it finished first).
async fn cancel_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
    loop {
        // Registered before looking, so that an end between the look and the wait is not missed.
        let ended = state.0.run_ended.notified();
        {
            let runs = state.runs();
            let run = runs.by_id.get(&id).ok_or_else(|| unknown_run(&id))?;
            if run.state != RunState::Running {
                return Ok(run.response());
            }
            run.cancel.store(true, Ordering::Relaxed);
        }
        if tokio::time::timeout_at(deadline, ended).await.is_err() {
            let runs = state.runs();
            let run = runs.by_id.get(&id).ok_or_else(|| unknown_run(&id))?;
            return Ok(run.response());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result with one series of `samples` samples of 1.0 (4 bytes each as JSON: `1.0,`).
    fn result_of(samples: usize) -> firstbad_wire::WorkloadResult {
        let mut result = workloads::empty_result("fsync-latency", 1.0);
        result.series.insert(
            "fsync_latency".to_owned(),
            firstbad_wire::Series {
                unit: "ms".to_owned(),
                samples: vec![1.0; samples],
                count: None,
            },
        );
        result
    }

    /// A finished run whose answer is `bytes` long.
    fn finished(bytes: usize) -> Run {
        Run {
            state: RunState::Done,
            body: Bytes::from(vec![b' '; bytes]),
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    // issue 19: 32 kept runs of a million samples each held 256 MB.
    #[test]
    fn kept_results_are_bounded_by_their_size_not_only_their_count() {
        let mut runs = Runs::default();
        // Each a quarter of KEPT_BYTES: four fit, five do not.
        for i in 0..6 {
            let id = format!("r{i}");
            runs.by_id.insert(id.clone(), finished(KEPT_BYTES / 4));
            runs.order.push_back(id);
        }
        forget_old_runs(&mut runs);
        let kept: Vec<&str> = runs.order.iter().map(String::as_str).collect();
        assert_eq!(kept, ["r2", "r3", "r4", "r5"]);
        assert_eq!(runs.by_id.len(), 4);
        // The newest is kept whatever its size.
        runs.by_id
            .insert("big".to_owned(), finished(2 * KEPT_BYTES));
        runs.order.push_back("big".to_owned());
        forget_old_runs(&mut runs);
        assert_eq!(runs.order, ["big"]);
    }

    /// A server state with run `id` running, as `start_run` leaves it.
    fn with_running_run(id: &str) -> AppState {
        let state = AppState::new(
            "token".to_owned(),
            PathBuf::from("/nonexistent"),
            workloads::Limits::default(),
        );
        let mut runs = state.runs();
        let status = RunStatus {
            id: id.to_owned(),
            state: RunState::Running,
            result: None,
            error: None,
        };
        let run = Run::new(status, Arc::new(AtomicBool::new(false)));
        runs.by_id.insert(id.to_owned(), run);
        runs.order.push_back(id.to_owned());
        runs.running = Some(id.to_owned());
        drop(runs);
        state
    }

    /// The body of `GET /v1/runs/{id}`, as the handler answers it.
    async fn get_body(state: &AppState, id: &str) -> axum::body::Bytes {
        let response = get_run(State(state.clone()), Path(id.to_owned()))
            .await
            .into_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body in memory")
    }

    // issue 32, finding 6: every GET of a finished run cloned its result and serialised the
    // clone, so 30 concurrent GETs of a large result held 30 copies (+310 MB, kept resident).
    #[tokio::test]
    async fn gets_of_a_finished_run_share_one_serialised_body() {
        let state = with_running_run("r1");
        let expected = RunStatus {
            id: "r1".to_owned(),
            state: RunState::Done,
            result: Some(result_of(100_000)),
            error: None,
        };
        let outcome = workloads::Outcome::Done(result_of(100_000));
        finish(&state, "r1", Ok(Ok(outcome)));
        let first = get_body(&state, "r1").await;
        let second = get_body(&state, "r1").await;
        // The wire format is what `Json(RunStatus)` wrote.
        assert_eq!(
            first,
            serde_json::to_vec(&expected).expect("serialises"),
            "the body is not the RunStatus as JSON"
        );
        assert!(
            first.as_ptr() == second.as_ptr(),
            "two GETs of one {}-byte result were answered from two buffers",
            first.len()
        );
        // A cancel of the finished run answers with the same bytes.
        let cancelled = cancel_run(State(state.clone()), Path("r1".to_owned()))
            .await
            .into_response();
        let cancelled = axum::body::to_bytes(cancelled.into_body(), usize::MAX)
            .await
            .expect("a body in memory");
        assert!(
            cancelled.as_ptr() == first.as_ptr(),
            "the cancel answer is a copy"
        );
    }

    #[test]
    fn constant_time_eq_needs_every_byte() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secreT", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
    }
}
