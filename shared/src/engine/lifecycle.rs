//! A subscription's lifecycle under endpoint health (G8): the guarded
//! suspension when a streak reaches the policy's limits, the one notice it
//! sends, and re-enabling: a signed `endpoint.probe`, then the guarded
//! return to active and the backfill of what was missed.
//!
//! The suspension notice is an operator event ([`super::operator`]).

use serde_json::json;
use time::OffsetDateTime;
use tracing::warn;

use super::operator::excerpt;
use super::Engine;
use crate::domain::{
    rfc3339, Attempt, AttemptId, EventId, Health, OperatorEvent, Subscription, SubscriptionStatus,
};
use crate::health::projected;
use crate::policy::FailureClass;
use crate::ports::{SendReport, StoreError, StoreResult};
use crate::record::ms;
use crate::telemetry::Chain;

/// How far back a backfill reaches at most (the archive's retention).
const BACKFILL_REACH: time::Duration = time::Duration::days(14);

/// Why re-enabling did not happen.
#[derive(Debug, thiserror::Error)]
pub enum EnableError {
    /// The probe failed; the subscription stays suspended.
    #[error("{0}")]
    ProbeFailed(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn class_name(c: FailureClass) -> &'static str {
    match c {
        FailureClass::Retryable => "retryable",
        FailureClass::Permanent => "permanent",
        FailureClass::Fatal => "fatal",
    }
}

impl Engine {
    /// [`Engine::suspend_if_due`] for a delivery gone into retry, whose
    /// health record is not written yet: the deliveries failing and not
    /// ended (`since` the first attempt of this one) count too. How many
    /// is read only when the streak is already long enough for a limit,
    /// counting any number, so a first failure costs no read.
    pub(super) async fn suspend_if_due_in_retry(
        &self,
        sub: &Subscription,
        class: FailureClass,
        since: OffsetDateTime,
        last: &Attempt,
    ) -> StoreResult<()> {
        let longest = projected(&sub.health, class, u64::MAX, since);
        let policy = &self.config.suspend_policy;
        if policy.reached(&longest, self.ports.clock.now()).is_none() {
            return Ok(());
        }
        let failing = self.ports.backfills.failing(sub).await?;
        let health = projected(&sub.health, class, failing, since);
        self.suspend_if_due(sub, &health, last).await
    }

    /// Suspends the subscription when its health reached a limit; only the
    /// caller whose guarded transition took effect sends the notice.
    pub(super) async fn suspend_if_due(
        &self,
        sub: &Subscription,
        health: &Health,
        last: &Attempt,
    ) -> StoreResult<()> {
        let now = self.ports.clock.now();
        let Some(class) = self.config.suspend_policy.reached(health, now) else {
            return Ok(());
        };
        let since = health.first_failure_at.unwrap_or(now);
        let reason = format!(
            "{} failures: {} since {} (last: {})",
            class_name(class),
            health.consecutive_failures,
            rfc3339(since),
            last.error.as_deref().unwrap_or("unknown")
        );
        if !self
            .ports
            .suspensions
            .suspend(&sub.tenant, &sub.id, now, &reason, health)
            .await?
        {
            return Ok(());
        }
        self.metrics.suspended_for(class);
        warn!(tenant = sub.tenant.as_str(), subscription_id = sub.id.as_str(), %reason, "subscription suspended");
        let mut entry = last.clone();
        entry.id = AttemptId::generate();
        entry.outcome = "suspended".into();
        entry.error = Some(reason);
        self.ports.attempts.record(&entry).await?;
        let notice = self.notice(sub, health, class, now).await;
        let occurrence = format!("{}-{}", sub.id.as_str(), ms(now));
        self.operator_event(OperatorEvent::Suspended, sub, &occurrence, notice, now)
            .await
    }

    /// The suspension notice: who, why, since when, what waits, and how to
    /// re-enable.
    async fn notice(
        &self,
        sub: &Subscription,
        health: &Health,
        class: FailureClass,
        now: OffsetDateTime,
    ) -> serde_json::Value {
        // The notice goes out even when the count cannot be read: it says
        // null then, never a made-up number.
        let held = match self.ports.backfills.waiting(sub).await {
            Ok(n) => Some(n),
            Err(e) => {
                warn!(subscription_id = sub.id.as_str(), error = %Chain(&e), "counting held deliveries failed");
                None
            }
        };
        json!({
            "subscription_id": sub.id.as_str(),
            "tenant_id": sub.tenant.as_str(),
            "url": sub.url.as_str(),
            "failure_class": class_name(class),
            "failure_count": health.consecutive_failures,
            "failing_since": rfc3339(health.first_failure_at.unwrap_or(now)),
            "suspended_at": rfc3339(now),
            "last_status_code": health.last_status_code,
            "last_error": excerpt(health.last_error.as_deref()),
            "held_events": held,
            "reenable": format!(
                "POST /v1/tenants/{}/subscriptions/{}/enable (probes the endpoint, then delivers what was missed)",
                sub.tenant.as_str(),
                sub.id.as_str()
            ),
        })
    }

    /// Sends one signed `endpoint.probe` to the subscription and logs it
    /// in its attempt log.
    async fn probe(&self, sub: &Subscription, now: OffsetDateTime) -> StoreResult<SendReport> {
        let probe_id = format!("probe_{}", &EventId::generate().as_str()[4..]);
        let body = json!({
            "type": "endpoint.probe",
            "timestamp": rfc3339(now),
            "data": {"subscription_id": sub.id.as_str()},
        });
        let body = serde_json::to_vec(&body)
            .map_err(|e| StoreError::backend_from("serializing a probe", e))?;
        let report = self.send_signed(sub, &probe_id, 1, body.into(), now).await;
        let ok = report.result.is_success();
        self.ports
            .attempts
            .record(&Attempt {
                id: AttemptId::generate(),
                tenant: sub.tenant.clone(),
                subscription_id: sub.id.clone(),
                event_id: EventId::parse(&probe_id).map_err(|e| StoreError::backend(e.0))?,
                event_type: None,
                attempt: 1,
                started_at: now,
                duration_ms: report.elapsed.as_millis() as u64,
                status_code: report.result.status(),
                outcome: if ok {
                    "probe_succeeded"
                } else {
                    "probe_failed"
                }
                .into(),
                error: (!ok).then(|| report.result.describe()),
                response_excerpt: report.excerpt.clone(),
                response_headers: report.headers.clone(),
            })
            .await?;
        Ok(report)
    }

    /// Re-enables a suspended subscription: a signed `endpoint.probe`
    /// first; on success it goes active with its health reset and the
    /// backfill of what it missed starts. An active one is returned as is.
    pub async fn enable(&self, sub: Subscription) -> Result<Subscription, EnableError> {
        if sub.status == SubscriptionStatus::Active {
            return Ok(sub);
        }
        let now = self.ports.clock.now();
        let report = self.probe(&sub, now).await?;
        let ok = report.result.is_success();
        if !ok {
            let reason = format!("re-enable probe failed: {}", report.result.describe());
            self.ports
                .suspensions
                .set_status_reason(&sub.tenant, &sub.id, &reason)
                .await?;
            self.tell_probe_failed(&sub, &report, now).await;
            return Err(EnableError::ProbeFailed(reason));
        }
        if self
            .ports
            .suspensions
            .activate(&sub.tenant, &sub.id, now)
            .await?
        {
            let since = sub
                .health
                .streak_events_since
                .or(sub.health.first_failure_at)
                .or(sub.suspended_at)
                .unwrap_or(now)
                .max(now - BACKFILL_REACH);
            self.start_backfill(&sub, since, now).await?;
        }
        let current = self.ports.subscriptions.get(&sub.tenant, &sub.id).await?;
        current.ok_or_else(|| EnableError::ProbeFailed("the subscription was deleted".into()))
    }
}

#[cfg(all(test, feature = "embedded"))]
#[path = "lifecycle_tests.rs"]
mod tests;
