//! The slow pool (DESIGN §3, isolation past the invocation pool): a lane
//! whose receiver does not answer in time leaves the main delivery pool,
//! so hung and slow receivers cannot hold the invocations that healthy
//! ones need.
//!
//! - In the main pool an attempt may take `HOOKLANE_SLOW_AFTER` (5 s) at
//!   most; one cut off there is a timeout like any other (it counts, and
//!   retries on the ladder), and it sets the lane's `slow` flag on the
//!   subscription item (`slow` for lane 0, `slow_n` for lane n).
//! - A first attempt to an endpoint that never answered, received after
//!   waiting in the queue longer than the first cut-off and a poll's pause
//!   (the pool is
//!   behind: a wall of new endpoints, many of them perhaps hung), moves
//!   the lane without an attempt, its message's mark in the same write
//!   ([`hooklane_core::lane_rules::moves_untried`]): each such attempt
//!   could only hold a main-pool invocation for the cut-off, so a burst of
//!   new hung receivers drains at hand-over speed. A new endpoint that
//!   answers is delivered by the slow pool and comes back at once.
//! - The main pool hands a slow lane's messages over instead of attempting
//!   them: the engine asks [`AwsStore::here`] right after its consistent
//!   read of the subscription, and the delivery function forwards the
//!   message, body and group unchanged, to the slow queue. The message that
//!   timed out goes first, with its retry's time in its `due` attribute:
//!   FIFO queues have no per-message delay, so the slow pool hides it until
//!   then at its first receive, without reading its record (which says the
//!   same), and attempts it when it comes back. Messages reach the slow queue in their group's
//!   order because only the main pool forwards, one at a time per group.
//! - The slow pool's own function (mapping, `SlowMaxConcurrency`) attempts
//!   them with the full `HOOKLANE_ATTEMPT_TIMEOUT`, with the same tombstone
//!   rule, ladder, spill and parking.
//! - Coming back: each forward writes the message's mark in its group's
//!   `fwd` attribute (`fwd`, `fwd_n`, `fwd_backfill`), on condition the
//!   lane is still slow. The message whose attempt just moved its lane
//!   writes its mark with the lane's flag, in one write ([`Received`]).
//!   When the slow pool finishes the message that carries its group's
//!   mark, nothing of that group is left in the slow
//!   queue: the mark goes, and if that message's last attempt ended within
//!   `HOOKLANE_SLOW_AFTER` (delivered, or parked after an answer: a
//!   receiver that fails at once holds no invocation either) and no other
//!   group of the lane has a mark, the
//!   flag goes too, in the same conditional write. From then on the main
//!   pool attempts the lane's messages again, none of them behind one still
//!   in the slow queue.
//!
//! Cost: nothing for lanes that answer in time; for a slow lane, one
//! conditional write and one `SendMessage` per forwarded message (the
//! first one's write is the lane's move) and one conditional write per
//! message finished in the slow pool; and a marker put when the lane moves
//! and deleted when it comes back, for the overview's count
//! ([`super::slow_lanes`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{Delivery, Subscription, SubscriptionId, TenantId};
use hooklane_core::lane_rules;
use hooklane_core::ports::StoreResult;

use super::items::lanes::{lane_attr, SLOW, SPILLING};
use super::received::Received;
use super::spill::Lane;
use super::{backend, is_condition_failed, took_effect, AwsStore, Pool};
use crate::messages::dedup_id;
use crate::string_attr;

/// The message attribute that carries a handed-over retry's time (unix
/// milliseconds).
pub const DUE: &str = "due";

/// The flag attribute of a lane.
fn slow_attr(lane: u16) -> String {
    lane_attr(SLOW, lane)
}

/// The mark attribute of a message group (`{sub}`, `{sub}#n`,
/// `{sub}#backfill`).
fn mark_attr(sub: &SubscriptionId, group: &str) -> String {
    match group
        .strip_prefix(sub.as_str())
        .and_then(|rest| rest.strip_prefix('#'))
    {
        Some(suffix) => format!("fwd_{suffix}"),
        None => "fwd".into(),
    }
}

/// The mark attributes of every group that runs on `lane`: lane 0 has the
/// one-lane group, lane 0 of several, and the backfill.
fn marks_of_lane(lane: u16) -> Vec<String> {
    match lane {
        0 => vec!["fwd".into(), "fwd_0".into(), "fwd_backfill".into()],
        n => vec![format!("fwd_{n}")],
    }
}

/// A message's mark: the same for its copy in either queue.
pub(crate) fn mark_of(group: &str, body: &str) -> String {
    dedup_id(&[group, body])
}

/// Why a lane moves to the slow pool.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Moved {
    /// An attempt in the main pool was cut off.
    TimedOut,
    /// A first attempt to an endpoint that has not shown it answers, while
    /// the main pool is behind ([`lane_rules::moves_untried`]).
    Untried,
}

/// One message being handed over: its subscription, lane, group and body.
pub struct Handover<'a> {
    /// The tenant.
    pub tenant: &'a TenantId,
    /// The subscription.
    pub sub: &'a SubscriptionId,
    /// Its live lane (0 for the backfill).
    pub lane: u16,
    /// Its message group.
    pub group: &'a str,
    /// Its body, as received.
    pub body: &'a str,
    /// When its next attempt is due, when the main pool just set it: sent
    /// along as the message's `due` attribute (unix milliseconds), so the
    /// slow pool hides it until then without reading its record first.
    pub due: Option<time::OffsetDateTime>,
    /// Its mark is written already (with its lane's move, [`Received`]).
    pub marked: bool,
}

impl AwsStore {
    /// Whether this process has a slow pool to hand over to.
    fn has_slow_pool(&self) -> bool {
        self.settings.slow_queue_url.is_some()
    }

    /// The pool this adapter runs, as the lane rules know it.
    pub fn rules_pool(&self) -> hooklane_core::lane_rules::Pool {
        match self.pool == Pool::Main && self.has_slow_pool() {
            true => hooklane_core::lane_rules::Pool::MainWithSlowPool,
            false => hooklane_core::lane_rules::Pool::Other,
        }
    }

    /// Whether the main pool attempts `d` (see [`super::lane_change`] for
    /// the placement, noted by the engine's read of `sub` just before): not
    /// when its lane is in the slow pool, nor when it moves there now
    /// ([`lane_rules::moves_untried`]: a first attempt to an endpoint that
    /// has not shown it answers, received when the pool is behind; the
    /// move writes the message's mark too).
    pub(crate) async fn attempts_here(
        &self,
        d: &Delivery,
        sub: &Subscription,
    ) -> StoreResult<bool> {
        if self.pool == Pool::Slow || !self.has_slow_pool() {
            return Ok(true);
        }
        if self.is_slow(&d.tenant, &d.subscription_id, d.lane).await? {
            return Ok(false);
        }
        let behind = Received::current().is_some_and(|m| m.behind);
        if !lane_rules::moves_untried(self.rules_pool(), d.attempts, &sub.health, behind) {
            return Ok(true);
        }
        let lane = (&d.tenant, &d.subscription_id, d.lane);
        Ok(!self.mark_slow(lane, false, true, Moved::Untried).await?)
    }

    /// Whether a lane is in the slow pool: moved there by this process or
    /// noted by a read within seconds, or as read now.
    pub async fn is_slow(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
        lane: u16,
    ) -> StoreResult<bool> {
        if self.subs.placements.moved_lately(sub, lane) {
            return Ok(true);
        }
        Ok(self
            .subs
            .placement(tenant, sub)
            .await?
            .is_some_and(|p| p.slow.contains(&lane)))
    }

    /// Whether a lane is in the slow pool, read now (strongly consistent).
    pub async fn is_slow_now(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
        lane: u16,
    ) -> StoreResult<bool> {
        Ok(self
            .subs
            .placement_now(tenant, sub)
            .await?
            .is_some_and(|p| p.slow.contains(&lane)))
    }

    /// Moves a lane to the slow pool (`why`), and when `spill`, starts its
    /// spill in the same write (the timed-out delivery waits for its
    /// retry): `true` when the lane moved. When `handing_over` (the
    /// delivery's message goes to the slow queue next), the same write sets
    /// the message's mark.
    pub(crate) async fn mark_slow(
        &self,
        lane: Lane<'_>,
        spill: bool,
        handing_over: bool,
        why: Moved,
    ) -> StoreResult<bool> {
        let (tenant, sub, lane) = lane;
        if self.pool == Pool::Slow || !self.has_slow_pool() {
            return Ok(false);
        }
        let mut names = HashMap::from([("#slow".to_owned(), slow_attr(lane))]);
        let mut values = HashMap::from([(":t".to_owned(), AttributeValue::Bool(true))]);
        let mut set = vec!["#slow = :t"];
        if spill {
            names.insert("#flag".to_owned(), lane_attr(SPILLING, lane));
            set.push("#flag = :t");
        }
        let received = Received::current().filter(|_| handing_over);
        if let Some(m) = &received {
            names.insert("#mark".to_owned(), mark_attr(sub, &m.group));
            values.insert(":mark".to_owned(), string_attr(mark_of(&m.group, &m.body)));
            set.push("#mark = :mark");
        }
        let res = self
            .update_sub(tenant, sub)
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression("attribute_exists(pk)")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        if !took_effect(res)? {
            return Ok(false);
        }
        if let Some(m) = received {
            m.note_marked();
        }
        self.subs.placements.note_slow(sub, lane, true);
        self.note_slow_lane(tenant, sub, lane).await;
        if spill {
            self.subs.lane_flags.note(sub, lane, true);
        }
        let why = match why {
            Moved::TimedOut => "an attempt timed out in the main pool",
            Moved::Untried => {
                "a first attempt to an endpoint not known to answer waited past the first cut-off"
            }
        };
        tracing::info!(
            subscription_id = sub.as_str(),
            lane,
            "{why}: the lane moves to the slow pool"
        );
        Ok(true)
    }

    /// Hands a message of a slow lane over to the slow queue; `false` when
    /// the lane came back meanwhile (attempt it here).
    pub async fn hand_over(&self, h: &Handover<'_>) -> StoreResult<bool> {
        let Some(url) = &self.settings.slow_queue_url else {
            return Ok(false);
        };
        let mark = mark_of(h.group, h.body);
        if !h.marked && !self.write_mark(h, &mark).await? {
            return Ok(false);
        }
        let due = match h.due {
            Some(t) => Some(
                aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type("Number")
                    .string_value(hooklane_core::record::ms(t).to_string())
                    .build()
                    .map_err(backend)?,
            ),
            None => None,
        };
        self.sqs
            .send_message()
            .queue_url(url)
            .message_body(h.body)
            .message_group_id(h.group)
            .message_deduplication_id(mark)
            .set_message_attributes(due.map(|d| HashMap::from([(DUE.to_owned(), d)])))
            .send()
            .await
            .map_err(backend)?;
        Ok(true)
    }

    /// Writes a handed-over message's mark, on condition its lane is still
    /// slow: `false` when it came back meanwhile.
    async fn write_mark(&self, h: &Handover<'_>, mark: &str) -> StoreResult<bool> {
        let res = self
            .update_sub(h.tenant, h.sub)
            .update_expression("SET #mark = :mark")
            .condition_expression("#slow = :t")
            .expression_attribute_names("#mark", mark_attr(h.sub, h.group))
            .expression_attribute_names("#slow", slow_attr(h.lane))
            .expression_attribute_values(":mark", string_attr(mark))
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => {
                self.subs.placements.note_slow(h.sub, h.lane, false);
                Ok(false)
            }
            Err(e) => Err(backend(e)),
        }
    }

    /// The slow pool finished a message: when it carries its group's mark,
    /// the mark goes, and, when `fast` (its last attempt ended, delivered
    /// or parked, within `HOOKLANE_SLOW_AFTER`) and no other group of the
    /// lane has one, the
    /// lane goes back to the main pool.
    pub async fn finished_slow(&self, h: &Handover<'_>, fast: bool) -> StoreResult<()> {
        let mark = mark_of(h.group, h.body);
        let own = mark_attr(h.sub, h.group);
        let others: Vec<String> = marks_of_lane(h.lane)
            .into_iter()
            .filter(|m| *m != own)
            .collect();
        if fast {
            let back_at = hooklane_core::record::ms(time::OffsetDateTime::now_utc());
            let mut guard = vec!["#mark = :mark".to_owned()];
            let mut req = self
                .update_sub(h.tenant, h.sub)
                .update_expression("REMOVE #mark, #slow")
                .expression_attribute_names("#mark", own.clone())
                .expression_attribute_names("#slow", slow_attr(h.lane))
                .expression_attribute_values(":mark", string_attr(&mark));
            for (i, other) in others.iter().enumerate() {
                guard.push(format!("attribute_not_exists(#o{i})"));
                req = req.expression_attribute_names(format!("#o{i}"), other);
            }
            match req.condition_expression(guard.join(" AND ")).send().await {
                Ok(_) => {
                    self.subs.placements.note_slow(h.sub, h.lane, false);
                    self.note_lane_back((h.tenant, h.sub, h.lane), back_at)
                        .await;
                    tracing::info!(
                        subscription_id = h.sub.as_str(),
                        lane = h.lane,
                        "the lane answers in time again: back to the main pool"
                    );
                    return Ok(());
                }
                Err(e) if is_condition_failed(&e) => {}
                Err(e) => return Err(backend(e)),
            }
        }
        let res = self
            .update_sub(h.tenant, h.sub)
            .update_expression("REMOVE #mark")
            .condition_expression("#mark = :mark")
            .expression_attribute_names("#mark", own)
            .expression_attribute_values(":mark", string_attr(&mark))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_has_its_own_mark_and_lane_zero_has_three() {
        let sub = SubscriptionId::parse("sub_01H000000000000000000000AB").unwrap();
        let g = |suffix: &str| format!("{sub}{suffix}");
        assert_eq!(mark_attr(&sub, &g("")), "fwd");
        assert_eq!(mark_attr(&sub, &g("#0")), "fwd_0");
        assert_eq!(mark_attr(&sub, &g("#7")), "fwd_7");
        assert_eq!(mark_attr(&sub, &g("#backfill")), "fwd_backfill");
        assert!(marks_of_lane(0).contains(&mark_attr(&sub, &g("#backfill"))));
        assert_eq!(marks_of_lane(7), vec![mark_attr(&sub, &g("#7"))]);
        assert_ne!(mark_of(&g(""), "{}"), mark_of(&g("#0"), "{}"));
    }
}
