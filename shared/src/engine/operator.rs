//! Operator events (`../shared/API.md`, "Operator events"):
//! `subscription.suspended`, `delivery.parked`, `subscription.recovered`
//! and `subscription.probe_failed`, to the operator webhook and the
//! notifier (SNS on AWS), each at most once per occurrence.
//!
//! The operator webhook is an ordinary subscription of the reserved tenant
//! `_operator` (id `sub_operator`), kept in step with the configuration at
//! start: an operator event is an event published to that tenant, so it is
//! signed, retried, parked and replayable like every delivery. Its id names
//! the occurrence: the kind, the subscription, and the time of a guarded
//! transition only one process wins (a suspension, an outcome written on
//! condition the delivery was pending at that attempt), or the streak a
//! recovery ends ([`crate::health::recovery`]). The archive's idempotency
//! (G12) then makes it once: a second process sending the same occurrence
//! gets a duplicate, and only the process whose accept was new tells the
//! notifier. Nothing goes to the operator webhook about its own
//! subscription, so its failures produce no events about itself; its
//! suspension still goes to the notifier.
//! `HOOKLANE_OPERATOR_EVENTS` chooses the kinds that go out; a failure to
//! send one is logged and leaves the outcome that caused it as it is.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tracing::warn;

use super::Engine;
use crate::domain::{
    rfc3339, Attempt, Delivery, Event, EventFilter, EventId, EventType, Health, OperatorEvent,
    Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::health::recovery;
use crate::ports::{Accepted, End, Finish, SendReport, StoreError, StoreResult};
use crate::record::ms;
use crate::telemetry::Chain;

/// The reserved tenant of the operator webhook.
pub const OPERATOR_TENANT: &str = "_operator";
/// The operator webhook's subscription id.
const OPERATOR_SUBSCRIPTION: &str = "sub_operator";
/// The event types the operator webhook's subscription takes.
const OPERATOR_FILTERS: [&str; 2] = ["subscription.*", "delivery.*"];

fn operator_tenant() -> StoreResult<TenantId> {
    TenantId::parse(OPERATOR_TENANT).map_err(|e| StoreError::backend(e.0))
}

/// At most 300 characters of an error text.
pub(super) fn excerpt(text: Option<&str>) -> Option<String> {
    text.map(|t| t.chars().take(300).collect())
}

/// A short name of an event id that fits in an operator event's id
/// whatever the id's length.
fn short_hash(id: &EventId) -> String {
    Sha256::digest(id.as_str().as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The prefix of a kind's event ids.
fn prefix(kind: OperatorEvent) -> &'static str {
    match kind {
        OperatorEvent::Suspended => "suspended",
        OperatorEvent::Parked => "parked",
        OperatorEvent::Recovered => "recovered",
        OperatorEvent::ProbeFailed => "probe-failed",
    }
}

impl Engine {
    /// Sends one operator event of `kind` about `about`, whose occurrence
    /// `occurrence` names alike in every process that sees it.
    pub(super) async fn operator_event(
        &self,
        kind: OperatorEvent,
        about: &Subscription,
        occurrence: &str,
        data: Value,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let nowhere = self.config.operator_webhook.is_none() && !self.ports.notifier.enabled();
        if nowhere || !self.config.operator_events.sends(kind) {
            return Ok(());
        }
        if about.tenant.as_str() == OPERATOR_TENANT {
            // Not to the operator webhook about itself; its suspension
            // (guarded, so once) still goes to the notifier.
            if kind == OperatorEvent::Suspended {
                self.ports.notifier.send(kind, &data).await?;
            }
            return Ok(());
        }
        let bad = |e: crate::domain::Invalid| StoreError::backend(e.0);
        let payload = json!({"type": kind.name(), "timestamp": rfc3339(now), "data": data});
        let event = Event {
            id: EventId::parse(&format!("{}-{occurrence}", prefix(kind))).map_err(bad)?,
            tenant: operator_tenant()?,
            event_type: EventType::parse(kind.name()).map_err(bad)?,
            created_at: now,
            payload: serde_json::to_vec(&payload)
                .map_err(|e| StoreError::backend_from("serializing an operator event", e))?
                .into(),
            ordering_key: None,
            traceparent: None,
            only_for: None,
        };
        if let Accepted::New(_) = self.publish(event).await? {
            self.ports.notifier.send(kind, &data).await?;
        }
        Ok(())
    }

    /// The operator events of an outcome this process recorded: a parked
    /// delivery, or a success that ends a streak of at least
    /// `HOOKLANE_RECOVERED_AFTER`.
    pub(super) async fn tell_operators_of_end(
        &self,
        d: &Delivery,
        sub: &Subscription,
        finish: &Finish,
        started_at: OffsetDateTime,
    ) {
        let sent = match &finish.end {
            End::Parked(reason) => {
                self.tell_parked(d, sub, reason, finish.attempt.as_ref())
                    .await
            }
            End::Delivered => self.tell_recovered(d, sub, started_at).await,
            _ => Ok(()),
        };
        if let Err(e) = sent {
            warn!(subscription_id = d.subscription_id.as_str(), error = %Chain(&e), "sending an operator event failed");
        }
    }

    async fn tell_parked(
        &self,
        d: &Delivery,
        sub: &Subscription,
        reason: &str,
        last: Option<&Attempt>,
    ) -> StoreResult<()> {
        let now = self.ports.clock.now();
        let data = json!({
            "tenant_id": d.tenant.as_str(),
            "subscription_id": d.subscription_id.as_str(),
            "url": sub.url.as_str(),
            "event_id": d.event_id.as_str(),
            "event_type": d.event_type.as_str(),
            "attempts": last.map_or(d.attempts, |a| a.attempt),
            "last_status_code": last.and_then(|a| a.status_code),
            "last_error": excerpt(last.and_then(|a| a.error.as_deref())),
            "reason": reason,
            "parked_at": rfc3339(now),
        });
        let occurrence = format!(
            "{}-{}-{}",
            d.subscription_id.as_str(),
            short_hash(&d.event_id),
            ms(now)
        );
        self.operator_event(OperatorEvent::Parked, sub, &occurrence, data, now)
            .await
    }

    async fn tell_recovered(
        &self,
        d: &Delivery,
        sub: &Subscription,
        started_at: OffsetDateTime,
    ) -> StoreResult<()> {
        let own = (d.attempts > 0).then_some(d.first_attempt_at).flatten();
        let after = self.config.recovered_after;
        let Some(r) = recovery(&sub.health, own, started_at, after) else {
            return Ok(());
        };
        let now = self.ports.clock.now();
        let data = json!({
            "tenant_id": sub.tenant.as_str(),
            "subscription_id": sub.id.as_str(),
            "url": sub.url.as_str(),
            "failing_since": rfc3339(r.failing_since),
            "failure_count": sub.health.consecutive_failures,
            "failed_attempts": d.attempts,
            "recovered_at": rfc3339(now),
        });
        let occurrence = format!("{}-{}", sub.id.as_str(), r.streak);
        self.operator_event(OperatorEvent::Recovered, sub, &occurrence, data, now)
            .await
    }

    /// `subscription.probe_failed`: the probe of an `enable` failed.
    pub(super) async fn tell_probe_failed(
        &self,
        sub: &Subscription,
        report: &SendReport,
        now: OffsetDateTime,
    ) {
        let data = json!({
            "tenant_id": sub.tenant.as_str(),
            "subscription_id": sub.id.as_str(),
            "url": sub.url.as_str(),
            "status_code": report.result.status(),
            "error": excerpt(Some(&report.result.describe())),
            "probed_at": rfc3339(now),
        });
        let occurrence = format!("{}-{}", sub.id.as_str(), ms(now));
        let sent = self
            .operator_event(OperatorEvent::ProbeFailed, sub, &occurrence, data, now)
            .await;
        if let Err(e) = sent {
            warn!(subscription_id = sub.id.as_str(), error = %Chain(&e), "sending an operator event failed");
        }
    }

    /// Registers (or updates) the operator webhook's subscription from the
    /// configuration; does nothing when none is configured.
    pub async fn ensure_operator_subscription(&self) -> StoreResult<()> {
        let Some((url, secret)) = &self.config.operator_webhook else {
            return Ok(());
        };
        let bad = |e: String| StoreError::backend(format!("operator webhook: {e}"));
        let tenant = operator_tenant()?;
        let id = SubscriptionId::parse(OPERATOR_SUBSCRIPTION).map_err(|e| bad(e.0))?;
        let now = self.ports.clock.now();
        let filters = OPERATOR_FILTERS
            .iter()
            .map(|f| EventFilter::parse(f).map_err(|e| bad(e.0)))
            .collect::<StoreResult<Vec<_>>>()?;
        let existing = self.ports.subscriptions.get(&tenant, &id).await?;
        let mut sub = existing.clone().unwrap_or(Subscription {
            id,
            tenant,
            url: url::Url::parse(url).map_err(|e| bad(e.to_string()))?,
            filters: filters.clone(),
            description: Some("operator notifications".into()),
            metadata: Default::default(),
            secret: secret.clone(),
            previous_secret: None,
            status: SubscriptionStatus::Active,
            health: Health::default(),
            suspended_at: None,
            status_reason: None,
            created_at: now,
            updated_at: now,
            lanes: Default::default(),
            rate_limit: None,
            options: Default::default(),
        });
        if existing.is_none() {
            return self.ports.subscriptions.insert(&sub).await;
        }
        sub.url = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        sub.secret = secret.clone();
        sub.filters = filters;
        sub.updated_at = now;
        self.ports.subscriptions.update(&sub).await.map(|_| ())
    }
}

#[cfg(all(test, feature = "embedded"))]
#[path = "operator_tests.rs"]
mod tests;
