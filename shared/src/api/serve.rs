//! Serving the API over HTTP/1.1 on a listener: the one accept loop of
//! `hooklane serve` on both backends (the Lambda function is served by API
//! Gateway instead). It bounds how long a client may take to send a
//! request, so connections that send nothing, or send a body a byte at a
//! time, cost a socket each for a bounded time and never hold up anyone
//! else:
//! - the request head (line and headers) must arrive within
//!   [`ReadTimeouts::header`] of the connection opening, or of the previous
//!   response on a kept-alive connection (`HOOKLANE_HEADER_TIMEOUT`, default
//!   30 s); past it the connection is closed without an answer;
//! - the whole body must arrive within [`ReadTimeouts::body`] of the head
//!   (`HOOKLANE_BODY_TIMEOUT`, default 30 s, enough for the 256 KiB limit
//!   at under 10 KiB/s); past it the answer is `408` problem+json and the
//!   connection is closed.
//!
//! Every connection is its own task: a slow one delays no other.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, warn};

use super::error::ApiError;
use crate::telemetry::Chain;

/// How long a client may take to send its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTimeouts {
    /// For the request line and headers.
    pub header: Duration,
    /// For the whole body, from the end of the headers.
    pub body: Duration,
}

impl Default for ReadTimeouts {
    fn default() -> Self {
        Self {
            header: Duration::from_secs(30),
            body: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets
/// requests in progress finish, for at most `grace`. Returns when the stop
/// began, from which the caller's own waits count.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    (timeouts, grace): (ReadTimeouts, Duration),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Instant> {
    let app = app.layer(middleware::from_fn_with_state(timeouts.body, body_deadline));
    let (stop_tx, stop_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors, say: the connections that
                    // hold them time out, so wait and accept again.
                    warn!(error = %Chain(&e), "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        let header = timeouts.header;
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                debug!(error = %Chain(&e), "connection ended with an error");
            }
            drop(stop);
        });
    }
    let stopped = Instant::now();
    drop(listener);
    let _ = stop_tx.send(());
    drop(stop_rx);
    // Every connection task holds a receiver: `closed` resolves when the
    // last one has finished.
    let _ = tokio::time::timeout(grace, stop_tx.closed()).await;
    Ok(stopped)
}

/// Gives the request body a deadline; a body that misses it is answered
/// `408` and its connection closed.
async fn body_deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    if req.body().size_hint().exact() == Some(0) {
        return next.run(req).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let body = Body::new(DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
    });
    let response = next.run(Request::from_parts(parts, body)).await;
    if !expired.load(Ordering::Relaxed) {
        return response;
    }
    let mut response = ApiError::request_timeout(limit).into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// A request body that fails once its deadline passes.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new("the request body timed out"))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
