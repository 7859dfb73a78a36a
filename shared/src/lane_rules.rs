//! What follows each end of a delivery's turn on its lane, decided once,
//! here, from the end, the attempt and what the lane's store knows of it;
//! the adapters only carry the decisions out.
//!
//! Two decisions, both pure:
//! - [`after_outcome`]: the lane's bookkeeping once the outcome is recorded
//!   (move the lane to the slow pool, start or end its spill, park to the
//!   dead-letter queue). On AWS these are item writes and sends
//!   (`shared/aws`'s `LaneQueue::finish`). The embedded lanes have no spill
//!   and no slow pool: a lane is rows in one table, its head due again at
//!   the retry's time, and the one write of the outcome is all there is
//!   ([`crate::ports::End::state`]).
//! - [`message_after`]: what becomes of the queue message that carried the
//!   delivery (delete it, hide it until it is due, hand it over to the slow
//!   pool). On AWS this is `DeleteMessage`, `ChangeMessageVisibility` or a
//!   send to the slow queue (the delivery handler); the embedded lanes have
//!   no message.

use time::{Duration, OffsetDateTime};

use crate::domain::Health;
use crate::engine::Step;
use crate::ports::End;

/// Where the attempt ran, as the lane rules need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// The main pool of a deployment with a slow pool: an attempt there is
    /// cut short, and a lane that times out moves.
    MainWithSlowPool,
    /// Anywhere else (the slow pool, a deployment without one).
    Other,
}

/// What the lane's bookkeeping does once a turn's outcome is recorded: the
/// dead-letter copy first (whether it goes does not depend on the lane's
/// state, so it needs no read), then the move to the slow pool, the
/// refill, the spill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LanePlan {
    /// Move the lane to the slow pool (its attempt timed out in the main
    /// pool), writing the spill flag with it when `start_spill`; when that
    /// write did both, nothing below follows.
    pub to_slow_pool: bool,
    /// Start the lane's spill: while it retries, its new deliveries wait in
    /// the store rather than the queue.
    pub start_spill: bool,
    /// Send the delivery to the dead-letter queue with its reason.
    pub park: bool,
    /// Move the spilled deliveries back to the queue, in order, and end
    /// the spill.
    pub refill: bool,
}

/// The lane's plan after a turn that ended with `end`: `timed_out` when the
/// attempt was cut off for not answering in time, `spilling` as the store
/// knows the lane. A turn that ended without an attempt (dropped, held)
/// changes nothing on the lane.
pub fn after_outcome(end: &End, timed_out: bool, pool: Pool, spilling: bool) -> LanePlan {
    let retry = matches!(end, End::Retry(_));
    LanePlan {
        to_slow_pool: timed_out && pool == Pool::MainWithSlowPool,
        start_spill: retry && !spilling,
        park: matches!(end, End::Parked(_)),
        refill: spilling && matches!(end, End::Delivered | End::Parked(_)),
    }
}

/// Whether a delivery's lane moves to the slow pool before any attempt
/// in the main pool: its first attempt (`attempts` 0), to an endpoint that
/// has not shown it answers at all (its last delivery neither arrived nor
/// got an HTTP answer: a new endpoint, or one that timed out or could not
/// be reached), received when the pool is `behind` ([`behind`]).
/// Attempted, it could only hold a main-pool invocation for the first
/// cut-off and then move the lane; moved at once, a wall of new hung
/// endpoints drains at the speed of a hand-over, and a new endpoint that
/// answers is delivered (or parked, failing at once) by the slow pool and
/// comes back. An endpoint whose last delivery ended with an HTTP answer,
/// an error included, stays in the main pool (health is written when a
/// delivery ends: a new endpoint with several lanes whose first delivery
/// still retries on errors can have lanes moved meanwhile, which come back
/// as their messages there end).
pub fn moves_untried(pool: Pool, attempts: u32, health: &Health, behind: bool) -> bool {
    let answered = health.answers() || health.last_status_code.is_some();
    pool == Pool::MainWithSlowPool && attempts == 0 && !answered && behind
}

/// How much longer than the first cut-off a message must have waited to
/// count as behind: a poll's pause (Lambda's pollers long-poll and receive
/// at once; `serve`'s stand-in pauses up to a second on an idle queue), so
/// that an idle queue never reads as a pool behind.
pub const POLL_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the main pool is behind, as a message received for the first
/// time sees it: it `waited` in the queue longer than the pool's first
/// cut-off (`cut_off`; none where the pool has no slow pool beside it) and
/// a poll's pause ([`POLL_ALLOWANCE`]).
pub fn behind(
    first_receive: bool,
    waited: std::time::Duration,
    cut_off: Option<std::time::Duration>,
) -> bool {
    first_receive && cut_off.is_some_and(|cut| waited > cut + POLL_ALLOWANCE)
}

/// What becomes of the queue message that carried a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageNext {
    /// Done with: delete it.
    Delete,
    /// Due later: hidden this long (the queue's own delay), then received
    /// again.
    HideFor(Duration),
    /// Its lane runs in the slow pool: send it there, in order.
    HandOver,
}

/// The least a put-off message stays hidden, so that a head that cannot
/// start yet does not come straight back and ask again.
pub const LEAST_PUT_OFF: Duration = Duration::SECOND;

/// Whether the message's next step needs to know if its lane is in the
/// slow pool now: a retry in the main pool may have moved it there.
pub fn asks_if_slow(step: &Step, pool: Pool) -> bool {
    matches!(step, Step::Ended(End::Retry(_))) && pool == Pool::MainWithSlowPool
}

/// The message's next step after the engine's `step`, at `now`;
/// `lane_slow` answers [`asks_if_slow`] when it asked; `lease` is the
/// longest an attempt's lease lasts ([`crate::engine::Engine::lease`]).
///
/// A skipped step (the attempt's start refused after the record was read
/// pending) means another receive holds the attempt: the same message
/// received again because its visibility ran out while the first receive
/// still worked on it (the delete was lost when it then retried), or a
/// copy of it. The message is kept, hidden until that lease has surely
/// ended, and its record read again then: deleted here, it could be the
/// only one left. A copy in another group (a replay racing a redrive) is
/// kept too, and goes once its delivery ends; until then it holds its own
/// group back a lease at each of the delivery's retries, which is the
/// price of never telling a copy from the original wrongly.
pub fn message_after(
    step: &Step,
    lane_slow: bool,
    now: OffsetDateTime,
    lease: Duration,
) -> MessageNext {
    match step {
        Step::Ended(End::Retry(_)) if lane_slow => MessageNext::HandOver,
        Step::Ended(End::Retry(at)) => MessageNext::HideFor(*at - now),
        Step::Deferred(at) => MessageNext::HideFor((*at - now).max(LEAST_PUT_OFF)),
        Step::Elsewhere => MessageNext::HandOver,
        Step::Skipped => MessageNext::HideFor(lease.max(LEAST_PUT_OFF)),
        Step::Ended(_) => MessageNext::Delete,
    }
}

#[cfg(test)]
mod tests {
    //! One golden test per transition.

    use super::*;

    const AT: OffsetDateTime = OffsetDateTime::UNIX_EPOCH;
    const LEASE: Duration = Duration::seconds(35);

    fn plan(to_slow_pool: bool, start_spill: bool, park: bool, refill: bool) -> LanePlan {
        LanePlan {
            to_slow_pool,
            start_spill,
            park,
            refill,
        }
    }

    fn parked() -> End {
        End::Parked("gone".into())
    }

    #[test]
    fn delivered_refills_a_spilling_lane_and_does_nothing_else() {
        let other = Pool::Other;
        assert_eq!(
            after_outcome(&End::Delivered, false, other, false),
            LanePlan::default()
        );
        assert_eq!(
            after_outcome(&End::Delivered, false, other, true),
            plan(false, false, false, true)
        );
    }

    #[test]
    fn a_first_retry_starts_the_spill_and_a_later_one_does_nothing() {
        let retry = End::Retry(AT);
        assert_eq!(
            after_outcome(&retry, false, Pool::Other, false),
            plan(false, true, false, false)
        );
        assert_eq!(
            after_outcome(&retry, false, Pool::Other, true),
            LanePlan::default()
        );
        let main = Pool::MainWithSlowPool;
        assert_eq!(
            after_outcome(&retry, false, main, false),
            plan(false, true, false, false)
        );
    }

    #[test]
    fn parked_goes_to_the_dead_letters_and_refills_a_spilling_lane() {
        assert_eq!(
            after_outcome(&parked(), false, Pool::Other, false),
            plan(false, false, true, false)
        );
        assert_eq!(
            after_outcome(&parked(), false, Pool::Other, true),
            plan(false, false, true, true)
        );
    }

    #[test]
    fn a_timeout_in_the_main_pool_moves_the_lane_with_its_spill_and_elsewhere_does_not() {
        let retry = End::Retry(AT);
        let main = Pool::MainWithSlowPool;
        assert_eq!(
            after_outcome(&retry, true, main, false),
            plan(true, true, false, false)
        );
        assert_eq!(
            after_outcome(&retry, true, main, true),
            plan(true, false, false, false)
        );
        // The last attempt timed out: the lane moves and the delivery parks.
        assert_eq!(
            after_outcome(&parked(), true, main, false),
            plan(true, false, true, false)
        );
        assert_eq!(
            after_outcome(&retry, true, Pool::Other, false),
            plan(false, true, false, false)
        );
    }

    #[test]
    fn a_turn_without_an_attempt_leaves_the_lane_alone() {
        for end in [End::Dropped, End::Held] {
            for spilling in [false, true] {
                let p = after_outcome(&end, false, Pool::MainWithSlowPool, spilling);
                assert_eq!(p, LanePlan::default(), "{end:?}");
            }
        }
    }

    #[test]
    fn a_retry_hides_its_message_until_due_or_hands_it_over_when_the_lane_moved() {
        let retry = Step::Ended(End::Retry(AT + Duration::seconds(30)));
        assert!(asks_if_slow(&retry, Pool::MainWithSlowPool));
        assert!(!asks_if_slow(&retry, Pool::Other));
        assert_eq!(
            message_after(&retry, true, AT, LEASE),
            MessageNext::HandOver
        );
        assert_eq!(
            message_after(&retry, false, AT, LEASE),
            MessageNext::HideFor(Duration::seconds(30))
        );
    }

    #[test]
    fn a_put_off_hides_its_message_a_second_at_least() {
        let soon = Step::Deferred(AT + Duration::milliseconds(200));
        let later = Step::Deferred(AT + Duration::seconds(7));
        assert!(!asks_if_slow(&soon, Pool::MainWithSlowPool));
        assert_eq!(
            message_after(&soon, false, AT, LEASE),
            MessageNext::HideFor(LEAST_PUT_OFF)
        );
        assert_eq!(
            message_after(&later, false, AT, LEASE),
            MessageNext::HideFor(Duration::seconds(7))
        );
    }

    #[test]
    fn a_skipped_step_keeps_its_message_hidden_for_a_lease() {
        // Deleted, the message of an attempt held elsewhere could be lost.
        assert!(!asks_if_slow(&Step::Skipped, Pool::MainWithSlowPool));
        assert_eq!(
            message_after(&Step::Skipped, false, AT, LEASE),
            MessageNext::HideFor(LEASE)
        );
    }

    #[test]
    fn elsewhere_hands_over_and_every_other_end_deletes() {
        assert_eq!(
            message_after(&Step::Elsewhere, false, AT, LEASE),
            MessageNext::HandOver
        );
        for step in [
            Step::Ended(End::Delivered),
            Step::Ended(parked()),
            Step::Ended(End::Dropped),
            Step::Ended(End::Held),
        ] {
            assert!(!asks_if_slow(&step, Pool::MainWithSlowPool));
            assert_eq!(
                message_after(&step, false, AT, LEASE),
                MessageNext::Delete,
                "{step:?}"
            );
        }
    }

    #[test]
    fn only_a_first_attempt_to_an_endpoint_never_answering_moves_while_the_pool_is_behind() {
        let main = Pool::MainWithSlowPool;
        let new = Health::default();
        let delivered = Health {
            last_outcome: Some("delivered".into()),
            last_status_code: Some(204),
            ..Health::default()
        };
        let failing = Health {
            last_outcome: Some("parked".into()),
            last_status_code: Some(500),
            consecutive_failures: 3,
            ..Health::default()
        };
        let timing_out = Health {
            last_outcome: Some("parked".into()),
            last_error: Some("timeout".into()),
            consecutive_failures: 3,
            ..Health::default()
        };
        assert!(moves_untried(main, 0, &new, true));
        assert!(moves_untried(main, 0, &timing_out, true));
        assert!(!moves_untried(main, 0, &new, false), "the pool keeps up");
        assert!(!moves_untried(main, 0, &delivered, true), "it answers");
        assert!(
            !moves_untried(main, 0, &failing, true),
            "it answers, with errors"
        );
        assert!(!moves_untried(main, 1, &new, true), "tried before");
        assert!(!moves_untried(Pool::Other, 0, &new, true), "no slow pool");
    }

    #[test]
    fn behind_is_a_first_receive_that_waited_past_the_cut_off() {
        let s = std::time::Duration::from_millis;
        let cut = Some(s(1000));
        assert!(behind(true, s(2001), cut));
        assert!(
            !behind(true, s(2000), cut),
            "a poll's pause past the cut-off"
        );
        assert!(!behind(false, s(5000), cut), "a message received again");
        assert!(!behind(true, s(5000), None), "no first cut-off here");
    }
}
