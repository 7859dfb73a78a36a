//! The stored form of a subscription for document stores (DynamoDB): plain
//! serde fields, times as unix milliseconds, with the one conversion back
//! into the domain type that re-parses every field; and the one report of
//! a stored record that does not parse ([`unreadable`]), for both adapters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::domain::{
    EndpointOptions, EventFilter, Health, Invalid, LaneCount, PreviousSecret, RateLimit,
    Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::signing::Secret;

/// Stored records read that did not parse back, since the process started
/// (served as `hooklane_unreadable_records_total`).
pub static UNREADABLE: std::sync::LazyLock<prometheus_client::metrics::counter::Counter> =
    std::sync::LazyLock::new(Default::default);

/// Reports a stored record that does not parse: logs its kind and key and
/// counts it. The caller keeps the record (and parks it, if a delivery).
pub fn unreadable(kind: &str, key: &str, why: &str) {
    UNREADABLE.inc();
    tracing::error!(kind, key, why, "stored record does not parse; kept");
}

/// Unix milliseconds of a time.
pub fn ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// A unix-milliseconds value as a time.
pub fn from_ms(v: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(v as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// A subscription as a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// Subscription id.
    pub id: String,
    /// Tenant id.
    pub tenant: String,
    /// Endpoint URL.
    pub url: String,
    /// Event type filters.
    pub filters: Vec<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Metadata.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Current secret (`whsec_…`).
    pub secret: String,
    /// Previous secret while it still signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_secret: Option<String>,
    /// When the previous secret stops signing (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_secret_expires_at: Option<i64>,
    /// `active` or `suspended`.
    pub status: String,
    /// Health record.
    #[serde(default)]
    pub health: Health,
    /// When suspended (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<i64>,
    /// Why suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Created (ms).
    pub created_at: i64,
    /// Updated (ms).
    pub updated_at: i64,
    /// Lanes (absent on records written before lanes: one).
    #[serde(default = "one_lane")]
    pub lanes: u16,
    /// Attempts per second, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    /// Endpoint options, a JSON document ([`crate::domain::OptionsRecord`]),
    /// when any is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}

fn one_lane() -> u16 {
    1
}

impl From<&Subscription> for SubscriptionRecord {
    fn from(s: &Subscription) -> Self {
        Self {
            id: s.id.as_str().to_owned(),
            tenant: s.tenant.as_str().to_owned(),
            url: s.url.as_str().to_owned(),
            filters: s.filters.iter().map(|f| f.as_str().to_owned()).collect(),
            description: s.description.clone(),
            metadata: s.metadata.clone(),
            secret: s.secret.expose(),
            prev_secret: s.previous_secret.as_ref().map(|p| p.secret.expose()),
            prev_secret_expires_at: s.previous_secret.as_ref().map(|p| ms(p.expires_at)),
            status: s.status.as_str().to_owned(),
            health: s.health.clone(),
            suspended_at: s.suspended_at.map(ms),
            status_reason: s.status_reason.clone(),
            created_at: ms(s.created_at),
            updated_at: ms(s.updated_at),
            lanes: s.lanes.get(),
            rate_limit: s.rate_limit.map(RateLimit::per_second),
            options: s.options.to_stored(),
        }
    }
}

impl TryFrom<SubscriptionRecord> for Subscription {
    type Error = Invalid;

    fn try_from(r: SubscriptionRecord) -> Result<Self, Invalid> {
        let bad = |what: &str| Invalid(format!("stored {what} does not parse"));
        let previous_secret = match (r.prev_secret, r.prev_secret_expires_at) {
            (Some(s), Some(exp)) => Some(PreviousSecret {
                secret: Secret::parse(&s).map_err(|_| bad("secret"))?,
                expires_at: from_ms(exp),
            }),
            _ => None,
        };
        Ok(Subscription {
            id: SubscriptionId::parse(&r.id)?,
            tenant: TenantId::parse(&r.tenant)?,
            url: url::Url::parse(&r.url).map_err(|_| bad("url"))?,
            filters: r
                .filters
                .iter()
                .map(|f| EventFilter::parse(f))
                .collect::<Result<_, _>>()?,
            description: r.description,
            metadata: r.metadata,
            secret: Secret::parse(&r.secret).map_err(|_| bad("secret"))?,
            previous_secret,
            status: SubscriptionStatus::parse(&r.status).ok_or_else(|| bad("status"))?,
            health: r.health,
            suspended_at: r.suspended_at.map(from_ms),
            status_reason: r.status_reason,
            created_at: from_ms(r.created_at),
            updated_at: from_ms(r.updated_at),
            lanes: LaneCount::parse(r.lanes.into())?,
            rate_limit: r
                .rate_limit
                .map(|n| RateLimit::parse(n.into()))
                .transpose()?,
            options: EndpointOptions::from_stored(r.options.as_deref())?,
        })
    }
}
