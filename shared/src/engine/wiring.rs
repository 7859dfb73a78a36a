//! The one wiring of the engine's ports: the store ports from the
//! backend's store ([`Store`]: one object per port, or one object for
//! all), the egress-guarded sender from the configuration, and the world
//! outside ([`Outside`]). `serve` on both backends, the Lambda
//! functions and the tests all build their ports here.

use std::sync::Arc;

use crate::config::Config;
use crate::ports::{
    Access, AttemptLog, Backfills, Clock, DeadLetters, DeliveryViews, Dns, EventArchive, LaneQueue,
    Notifier, Sender, SubscriptionStore, Suspensions, SystemClock, SystemDns, Wakeup,
};
use crate::rate::RateLimits;
use crate::sender::HttpSender;

/// The ports the engine works through: the store's ([`StorePorts`],
/// reached through `Deref`: `ports.subscriptions`) and the world's.
#[derive(Clone)]
pub struct Ports {
    /// The store ports.
    pub store: StorePorts,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// HTTP sender.
    pub sender: Arc<dyn Sender>,
    /// Name resolution for the egress guard: the registration check and
    /// the sender's resolver ask the same one.
    pub dns: Arc<dyn Dns>,
    /// Worker wake-ups.
    pub wakeup: Arc<dyn Wakeup>,
    /// Suspension notices beyond the operator webhook.
    pub notifier: Arc<dyn Notifier>,
}

impl std::ops::Deref for Ports {
    type Target = StorePorts;

    fn deref(&self) -> &StorePorts {
        &self.store
    }
}

impl std::ops::DerefMut for Ports {
    fn deref_mut(&mut self) -> &mut StorePorts {
        &mut self.store
    }
}

/// The store ports of one backend, each its own object (an adapter may
/// implement them all in one type, or one type per port).
#[derive(Clone)]
pub struct StorePorts {
    /// Subscriptions.
    pub subscriptions: Arc<dyn SubscriptionStore>,
    /// Suspension and re-enabling.
    pub suspensions: Arc<dyn Suspensions>,
    /// Event archive and fan-out intake.
    pub events: Arc<dyn EventArchive>,
    /// Delivery lanes.
    pub lanes: Arc<dyn LaneQueue>,
    /// Parked deliveries.
    pub dead_letters: Arc<dyn DeadLetters>,
    /// Delivery records by event.
    pub views: Arc<dyn DeliveryViews>,
    /// Backfills after re-enabling.
    pub backfills: Arc<dyn Backfills>,
    /// Attempt log.
    pub attempts: Arc<dyn AttemptLog>,
    /// Rate limits of rate-limited subscriptions.
    pub rates: Arc<dyn RateLimits>,
    /// Tenant keys and the portal key.
    pub access: Arc<dyn Access>,
}

/// A type that implements every store port itself.
pub trait EveryStorePort:
    SubscriptionStore
    + Suspensions
    + EventArchive
    + LaneQueue
    + DeadLetters
    + DeliveryViews
    + Backfills
    + AttemptLog
    + RateLimits
    + Access
    + Clone
    + 'static
{
}

impl<T> EveryStorePort for T where
    T: SubscriptionStore
        + Suspensions
        + EventArchive
        + LaneQueue
        + DeadLetters
        + DeliveryViews
        + Backfills
        + AttemptLog
        + RateLimits
        + Access
        + Clone
        + 'static
{
}

impl StorePorts {
    /// Every port from one object that implements them all.
    pub fn of_one<T: EveryStorePort>(store: T) -> Self {
        Self {
            subscriptions: Arc::new(store.clone()),
            suspensions: Arc::new(store.clone()),
            events: Arc::new(store.clone()),
            lanes: Arc::new(store.clone()),
            dead_letters: Arc::new(store.clone()),
            views: Arc::new(store.clone()),
            backfills: Arc::new(store.clone()),
            attempts: Arc::new(store.clone()),
            rates: Arc::new(store.clone()),
            access: Arc::new(store),
        }
    }
}

/// A backend's store: what gives the engine its store ports.
pub trait Store {
    /// The store ports over this backend.
    fn store_ports(self) -> StorePorts;
}

/// What the engine asks of the world outside the process: names and the
/// time. The system's by default; tests answer for names of their own or
/// move the clock.
#[derive(Clone)]
pub struct Outside {
    /// Resolves endpoint hosts (registration check and delivery).
    pub dns: Arc<dyn Dns>,
    /// The time the engine and the API go by.
    pub clock: Arc<dyn Clock>,
}

impl Default for Outside {
    fn default() -> Self {
        Self {
            dns: Arc::new(SystemDns),
            clock: Arc::new(SystemClock),
        }
    }
}

impl Ports {
    /// The one wiring of the ports, used by `serve` on both backends, the
    /// Lambda functions and the tests: every store port from `store`, the
    /// egress-guarded sender from the configuration, and the rest given.
    pub fn build<S: Store>(
        store: S,
        config: &Config,
        outside: Outside,
        wakeup: Arc<dyn Wakeup>,
        notifier: Arc<dyn Notifier>,
    ) -> Result<Self, reqwest::Error> {
        let sender = HttpSender::new(config.egress, config.attempt_timeout, outside.dns.clone())?;
        Ok(Self {
            store: store.store_ports(),
            clock: outside.clock,
            sender: Arc::new(sender),
            dns: outside.dns,
            wakeup,
            notifier,
        })
    }
}
