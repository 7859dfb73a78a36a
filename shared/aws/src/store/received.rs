//! The queue message whose step runs in a task of the main pool, kept at
//! hand for the slow pool's writes ([`super::slow_pool`]): the write that
//! moves its lane to the slow pool also writes its hand-over mark, and a
//! message received after waiting in the queue past the first cut-off
//! tells the store so, which may move its lane before any attempt
//! ([`hooklane_core::lane_rules::moves_untried`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

tokio::task_local! {
    /// The queue message whose step runs in this task.
    static RECEIVED: Arc<Received>;
}

/// A message of the main pool's queue, as received: its group and body,
/// whether the pool is behind (the message, received for the first time,
/// waited in the queue longer than the first cut-off), and whether its
/// mark was written with its lane's move to the slow pool (then its
/// hand-over sends it without a write of its own).
#[derive(Debug)]
pub struct Received {
    pub(super) group: String,
    pub(super) body: String,
    pub(super) behind: bool,
    marked: AtomicBool,
}

impl Received {
    /// Runs `step` (the engine's step of the message with group `group`
    /// and body `body`, `behind` as above) with the message at hand; also
    /// says whether the message's mark was written meanwhile.
    pub async fn scope<T>(
        (group, body): (&str, &str),
        behind: bool,
        step: impl Future<Output = T>,
    ) -> (T, bool) {
        let received = Arc::new(Received {
            group: group.to_owned(),
            body: body.to_owned(),
            behind,
            marked: AtomicBool::new(false),
        });
        let out = RECEIVED.scope(received.clone(), step).await;
        (out, received.marked.load(Ordering::Acquire))
    }

    /// The message whose step runs in this task, if any.
    pub(super) fn current() -> Option<Arc<Received>> {
        RECEIVED.try_with(Arc::clone).ok()
    }

    /// Notes that the message's mark was written with its lane's move.
    pub(super) fn note_marked(&self) {
        self.marked.store(true, Ordering::Release);
    }
}
