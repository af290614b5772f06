//! Serving: the listener that limits connections, the time bound of each
//! route, and the wait of a route whose work goes on past its answer.

use super::*;

/// Runs an operator's operation (`what`: gesture, erasure) under `op` on a
/// task of its own, so that a client that goes away, or a request that
/// times out, never leaves it half-done by dropping it; waits `wait` for
/// it, then answers that it is still running and how to see it finished.
pub(super) async fn detached<T: Send + 'static>(
    what: &str,
    op: &crate::rows::OpId,
    wait: Duration,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::time::timeout(wait, tokio::spawn(work)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the {what} (op {op}) stopped: {e}; send it again with \"op_id\": \"{op}\" to finish it"),
        )),
        Err(_) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("the {what} is still running as op {op}; send it again with \"op_id\": \"{op}\" to see it finished"),
        )),
    }
}

/// The most connections served at once; more wait in the kernel's
/// backlog until one closes. The loop never waits on any of them.
pub const MAX_CONNECTIONS: usize = 256;

/// Serves `router` on `listener` until `shutdown` resolves; each request
/// bounded by [`REQUEST_TIMEOUT`], at most [`MAX_CONNECTIONS`] at once.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(shared);
    let limited = Limited {
        inner: listener,
        permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
    };
    axum::serve(limited, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Serves the HTTP surface on a thread of its own, with a runtime of its
/// own, until `stop` is notified; the returned receiver resolves when it
/// has stopped. Apart from the loop's runtime so that neither waits on the
/// other: a tick busy computing never delays an answer behind it on the
/// same worker, and requests (however many, however large the answer)
/// never take a worker the tick is waiting for. The broker client is
/// shared: its calls are messages to the connection's own task.
pub fn serve_apart(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stop: Arc<tokio::sync::Notify>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>> {
    listener.set_nonblocking(true)?;
    // Two workers: a gesture or an erasure doing blocking work (zstd, a
    // directory's fsync) on one never stalls the answers on the other.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("crewlet-http")
        .build()?;
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("crewlet-http".into())
        .spawn(move || {
            let result = runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                serve(listener, shared, async move { stop.notified().await }).await
            });
            if let Err(e) = &result {
                tracing::error!(event = "http_failed", error = %e, "the HTTP surface stopped");
            }
            let _ = done.send(result);
        })?;
    Ok(finished)
}

/// A listener that accepts only while fewer than [`MAX_CONNECTIONS`] are
/// open: each connection holds a permit until it closes.
pub(super) struct Limited {
    inner: tokio::net::TcpListener,
    permits: Arc<tokio::sync::Semaphore>,
}

/// A connection and the permit it holds.
pub(super) struct Counted {
    stream: tokio::net::TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl axum::serve::Listener for Limited {
    type Io = Counted;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Counted, std::net::SocketAddr) {
        loop {
            // The semaphore is never closed, so acquiring only waits.
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    return (
                        Counted {
                            stream,
                            _permit: permit,
                        },
                        addr,
                    )
                }
                // Out of file descriptors and the like: wait a little.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A request that takes longer than its route's bound is answered 503.
pub(super) async fn bounded(
    State(limit): State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("no answer within {}", crate::config::Dur(limit)),
        )
        .into_response(),
    }
}

/// How long the erase route waits for its erasure before answering that
/// it is still running: the erasure's own wait for a publish, and time to
/// rewrite the archive.
pub(super) fn erase_wait(config: &Config) -> Duration {
    config.retention.tick.0 * 3 + Duration::from_secs(15)
}

/// While `run` waits for a broker that refuses its credentials at start:
/// `/metrics` says so (`crewlet_alarm{alarm="broker_refused"} 1`,
/// `crewlet_broker_connected 0`), `/healthz` answers (the process is
/// alive and retrying) and `/readyz` does not, until `stop` is notified
/// and the whole surface takes the port. Nothing else is served: there
/// is no answer to serve yet.
pub async fn serve_waiting(
    listener: std::net::TcpListener,
    alarm: crate::alarms::Alarm,
    stop: Arc<tokio::sync::Notify>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let lasting = super::metrics::Lasting::default();
    let text = super::metrics::with_live(
        &super::metrics::encode(&[], std::slice::from_ref(&alarm), &lasting),
        false,
        None,
        false,
    );
    let reason = alarm.line();
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let text = text.clone();
                async move { ([(header::CONTENT_TYPE, super::OPENMETRICS)], text) }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let reason = reason.clone();
                async move {
                    error(StatusCode::SERVICE_UNAVAILABLE, "broker_refused", reason).into_response()
                }
            }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.notified().await })
        .await
}
