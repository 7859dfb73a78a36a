//! What follows one attempt: its attempt-log entry, the queue outcome
//! (delivered, retry at T, parked), the health record when the retry
//! sequence ends, the suspension check (G8), and the operator events of an
//! outcome this process recorded ([`super::operator`]).

use time::OffsetDateTime;
use tracing::info;

use super::{Engine, Step};
use crate::domain::{Attempt, AttemptId, Delivery, Health, Subscription};
use crate::health::{
    health_write_due, next_health, recovery, FailedSequence, HealthWrite, Sequence,
};
use crate::policy::Decision;
use crate::ports::{End, Finish, SendReport, StoreResult};

impl Engine {
    /// Logs the attempt, records the queue outcome and, when the retry
    /// sequence ended, the health record (and a suspension, if it is due).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record(
        &self,
        d: &Delivery,
        sub: &Subscription,
        attempt_no: u32,
        started_at: OffsetDateTime,
        report: &SendReport,
        decision: Decision,
        seq: Sequence,
    ) -> StoreResult<Step> {
        let (outcome, end) = match decision {
            Decision::Delivered => ("delivered", End::Delivered),
            Decision::RetryIn(delay) => ("retrying", End::Retry(self.ports.clock.now() + delay)),
            Decision::Park(reason) => ("parked", End::Parked(reason)),
        };
        let attempt = logged(d, attempt_no, started_at, report, outcome);
        let health = self.health_after(d, sub, &end, &attempt, report, seq, started_at);
        let finish = Finish {
            end,
            attempt: Some(attempt),
            health,
            timed_out: report.result == crate::policy::AttemptResult::Timeout,
        };
        // The operator events first: an outcome recorded is told even if
        // what follows it fails.
        let finished = self.ports.lanes.finish(d, &finish).await?;
        if finished.took {
            self.tell_operators_of_end(d, sub, &finish, started_at)
                .await;
        }
        let written = finished.health.as_ref();
        self.after_finish(d, sub, (&finish, written), report, started_at)
            .await?;
        info!(
            subscription_id = d.subscription_id.as_str(),
            event_id = d.event_id.as_str(),
            attempt = attempt_no,
            outcome,
            "attempt finished"
        );
        Ok(Step::Ended(finish.end))
    }

    /// The health record to write after an attempt whose retry sequence
    /// ended (delivered or parked), when it needs writing.
    #[allow(clippy::too_many_arguments)]
    fn health_after(
        &self,
        d: &Delivery,
        sub: &Subscription,
        end: &End,
        attempt: &Attempt,
        report: &SendReport,
        seq: Sequence,
        started_at: OffsetDateTime,
    ) -> Option<HealthWrite> {
        if !matches!(end, End::Delivered | End::Parked(_)) {
            return None;
        }
        if let Some(class) = report.result.failure_class() {
            // Counted over the record as stored when written.
            return Some(HealthWrite::Failed(FailedSequence {
                last: attempt.clone(),
                class,
                seq,
                ramp: self.config.recovery_ramp,
            }));
        }
        let mut h = next_health(&sub.health, attempt, None, seq);
        // A delivery that failed before this success was failing since its
        // first attempt, parked or not.
        let own = (d.attempts > 0).then_some(d.first_attempt_at).flatten();
        h.ramp_until = self
            .config
            .recovery_ramp
            .until(&sub.health, &h, own, started_at);
        // Only a subscription of one lane delivers one attempt at a time:
        // with more, another lane's failure may be written after
        // `sub.health` was read, and this success must overwrite it. A
        // success that ends a streak is written too: the next streak is
        // named after it ([`crate::health::recovery`]).
        let recovers = recovery(&sub.health, own, started_at, self.config.recovered_after);
        let refresh = if sub.lanes.get() == 1 && recovers.is_none() {
            self.ports.lanes.health_refresh()
        } else {
            std::time::Duration::ZERO
        };
        health_write_due(&sub.health, &h, refresh).then_some(HealthWrite::Set(h))
    }

    /// What follows a recorded outcome: its counter, and the suspension
    /// check (G8) on the health record written, or, in retry, on the
    /// deliveries failing and not ended.
    async fn after_finish(
        &self,
        d: &Delivery,
        sub: &Subscription,
        (finish, written): (&Finish, Option<&Health>),
        report: &SendReport,
        started_at: OffsetDateTime,
    ) -> StoreResult<()> {
        let counter = match &finish.end {
            End::Delivered => &self.metrics.delivered,
            End::Retry(_) => &self.metrics.retried,
            _ => &self.metrics.parked,
        };
        counter.inc();
        match (written, &finish.attempt, &finish.end) {
            (Some(health), Some(attempt), _) => self.suspend_if_due(sub, health, attempt).await?,
            // In retry: the deliveries failing and not ended count too.
            (None, Some(attempt), End::Retry(_)) => {
                if let Some(class) = report.result.failure_class() {
                    let since = d.first_attempt_at.unwrap_or(started_at);
                    self.suspend_if_due_in_retry(sub, class, since, attempt)
                        .await?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The attempt-log entry of one attempt.
fn logged(
    d: &Delivery,
    attempt_no: u32,
    started_at: OffsetDateTime,
    report: &SendReport,
    outcome: &str,
) -> Attempt {
    Attempt {
        id: AttemptId::generate(),
        tenant: d.tenant.clone(),
        subscription_id: d.subscription_id.clone(),
        event_id: d.event_id.clone(),
        event_type: Some(d.event_type.clone()),
        attempt: attempt_no,
        started_at,
        duration_ms: report.elapsed.as_millis() as u64,
        status_code: report.result.status(),
        outcome: outcome.to_owned(),
        error: (!report.result.is_success()).then(|| report.result.describe()),
        response_excerpt: report.excerpt.clone(),
        response_headers: report.headers.clone(),
    }
}
