//! The storage contract every adapter must pass: the same checks run over
//! the embedded SQLite adapter (in this crate's tests) and over any other
//! adapter (behind the `contract` feature). Each check builds its own
//! tenant, so one store can run them all.

use std::sync::Arc;

use time::{Duration, OffsetDateTime};

use crate::config::Config;
use crate::domain::{
    Attempt, AttemptId, Delivery, Event, EventFilter, EventId, EventType, Health, PreviousSecret,
    Retake, Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::engine::{Outside, Ports, Store};
use crate::ports::{Accepted, End, Finish, NewDelivery, NoNotifier, NoWakeup, StoreError};
use crate::record::SubscriptionRecord;
use crate::signing::Secret;

/// What the contract needs from an adapter under test.
#[async_trait::async_trait]
pub trait Harness: Send + Sync {
    /// The engine's ports over the adapter ([`Ports::build`]).
    fn ports(&self) -> Ports;
    /// The next due delivery of a subscription's lane, as the adapter's
    /// runner would receive it.
    async fn next_delivery(&self, sub: &SubscriptionId) -> Option<Delivery>;
}

/// The ports over `store` that the contract drives: the store ports, a
/// default configuration, the system clock and DNS, nothing to wake.
pub fn ports_over<S: Store>(store: S) -> Ports {
    Ports::build(
        store,
        &Config::default(),
        Outside::default(),
        Arc::new(NoWakeup),
        Arc::new(NoNotifier),
    )
    .expect("the sender builds")
}

fn tenant(name: &str) -> TenantId {
    TenantId::parse(&format!(
        "{name}-{}",
        &SubscriptionId::generate().as_str()[20..]
    ))
    .expect("tenant")
}

/// A subscription of `tenant` for `filters`.
pub fn subscription(tenant: &TenantId, filters: &[&str]) -> Subscription {
    let now = OffsetDateTime::now_utc();
    Subscription {
        id: SubscriptionId::generate(),
        tenant: tenant.clone(),
        url: url::Url::parse("https://example.com/hook").expect("url"),
        filters: filters
            .iter()
            .map(|f| EventFilter::parse(f).expect("filter"))
            .collect(),
        description: Some("contract".into()),
        metadata: [("k".to_owned(), "v".to_owned())].into_iter().collect(),
        secret: Secret::generate(),
        previous_secret: None,
        status: SubscriptionStatus::Active,
        health: Health::default(),
        suspended_at: None,
        status_reason: None,
        created_at: now,
        updated_at: now,
    }
}

fn event(tenant: &TenantId, ty: &str, at: OffsetDateTime) -> Event {
    Event {
        id: EventId::generate(),
        tenant: tenant.clone(),
        event_type: EventType::parse(ty).expect("type"),
        created_at: at,
        payload: bytes::Bytes::from_static(b"{\"type\":\"x\"}"),
    }
}

fn attempt(d: &Delivery, n: u32, outcome: &str, status: Option<u16>) -> Attempt {
    Attempt {
        id: AttemptId::generate(),
        tenant: d.tenant.clone(),
        subscription_id: d.subscription_id.clone(),
        event_id: d.event_id.clone(),
        attempt: n,
        started_at: OffsetDateTime::now_utc(),
        duration_ms: 3,
        status_code: status,
        outcome: outcome.into(),
        error: None,
        response_excerpt: Some("ok".into()),
    }
}

fn new_delivery(sub: &Subscription, e: &Event) -> NewDelivery {
    NewDelivery {
        tenant: sub.tenant.clone(),
        subscription_id: sub.id.clone(),
        event_id: e.id.clone(),
        event_type: e.event_type.clone(),
        event: None,
    }
}

/// Subscriptions round-trip, are scoped to their tenant, and stay gone
/// once deleted.
pub async fn subscriptions_are_tenant_scoped_and_tombstoned(h: &dyn Harness) {
    let store = h.ports().subscriptions;
    let (a, b) = (tenant("a"), tenant("b"));
    let sub = subscription(&a, &["invoice.*"]);
    store.insert(&sub).await.expect("insert");
    let got = store.get(&a, &sub.id).await.expect("get").expect("found");
    assert_eq!(got.url, sub.url);
    assert_eq!(got.secret, sub.secret);
    assert_eq!(got.metadata, sub.metadata);
    assert!(
        store.get(&b, &sub.id).await.expect("get").is_none(),
        "other tenant"
    );
    assert!(store.list(&b, None, 10).await.expect("list").is_empty());
    assert_eq!(store.list(&a, None, 10).await.expect("list").len(), 1);
    assert_eq!(
        store.delete(&b, &sub.id).await.expect("delete"),
        None,
        "other tenant"
    );
    assert_eq!(store.delete(&a, &sub.id).await.expect("delete"), Some(0));
    assert!(store.get(&a, &sub.id).await.expect("get").is_none());
    assert_eq!(store.delete(&a, &sub.id).await.expect("delete"), None);
    let mut gone = sub.clone();
    gone.description = Some("changed".into());
    assert!(!store.update(&gone).await.expect("update"));
}

/// Matching finds exact, prefix and star filters of active subscriptions
/// of the tenant only, page by page.
pub async fn matching_respects_filters_tenants_and_pages(h: &dyn Harness) {
    let store = h.ports().subscriptions;
    let (a, b) = (tenant("a"), tenant("b"));
    let mut want = Vec::new();
    for f in ["invoice.paid", "invoice.*", "*"] {
        let s = subscription(&a, &[f]);
        store.insert(&s).await.expect("insert");
        want.push(s.id);
    }
    for (t, f) in [(&a, "order.*"), (&a, "invoice.paid.late"), (&b, "*")] {
        store.insert(&subscription(t, &[f])).await.expect("insert");
    }
    let deleted = subscription(&a, &["*"]);
    store.insert(&deleted).await.expect("insert");
    store.delete(&a, &deleted.id).await.expect("delete");
    let ty = EventType::parse("invoice.paid").expect("type");
    let first = store.matching(&a, &ty, None, 2).await.expect("page 1");
    let rest = store
        .matching(&a, &ty, first.last().map(|s| &s.id), 2)
        .await
        .expect("page 2");
    let got: Vec<SubscriptionId> = first.into_iter().chain(rest).map(|s| s.id).collect();
    want.sort();
    assert_eq!(got, want);
}

/// The same event id within 24 h answers the original; later it conflicts.
pub async fn accepting_is_idempotent_for_a_day(h: &dyn Harness) {
    let events = h.ports().events;
    let t = tenant("a");
    let now = OffsetDateTime::now_utc();
    let e = event(&t, "a.b", now);
    assert!(matches!(
        events.accept(e.clone()).await.expect("accept"),
        Accepted::New(_)
    ));
    let mut again = e.clone();
    again.created_at = now + Duration::hours(1);
    match events.accept(again).await.expect("accept") {
        Accepted::Duplicate(orig) => {
            assert_eq!(orig.created_at.unix_timestamp(), now.unix_timestamp())
        }
        Accepted::New(_) => panic!("a duplicate was accepted as new"),
    }
    let mut late = e.clone();
    late.created_at = now + Duration::hours(25);
    assert!(matches!(
        events.accept(late).await,
        Err(StoreError::Conflict(_))
    ));
    let got = events.get(&t, &e.id).await.expect("get").expect("archived");
    assert_eq!(got.payload, e.payload);
    assert!(events
        .get(&tenant("b"), &e.id)
        .await
        .expect("get")
        .is_none());
}

/// A delivery is queued once per pair, leased by its attempt, and finished
/// into the state the API shows.
pub async fn deliveries_lease_finish_park_and_replay(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, queue, log) = (&ports.subscriptions, &ports.lanes, &ports.attempts);
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    subs.insert(&sub).await.expect("insert");
    let e = event(&t, "a.b", OffsetDateTime::now_utc());
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue");
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue twice");
    let d = h.next_delivery(&sub.id).await.expect("queued");
    assert_eq!(d.attempts, 0);
    let now = OffsetDateTime::now_utc();
    assert!(queue
        .begin(&d, now, now + Duration::seconds(30))
        .await
        .expect("begin"));
    assert!(
        !queue
            .begin(&d, now, now + Duration::seconds(30))
            .await
            .expect("begin"),
        "stale attempt count"
    );
    let a1 = attempt(&d, 1, "parked", Some(410));
    let parked = Finish {
        end: End::Parked("status 410".into()),
        attempt: Some(a1),
        health: None,
    };
    queue.finish(&d, &parked).await.expect("finish");
    assert!(
        h.next_delivery(&sub.id).await.is_none(),
        "a parked delivery leaves the lane"
    );
    let views = ports.views.of_event(&t, &e.id).await.expect("views");
    assert_eq!(
        (
            views.len(),
            views[0].1.shown_state(),
            views[0].1.last_status_code
        ),
        (1, "parked", Some(410))
    );
    let parked = ports
        .dead_letters
        .list(&t, Some(&sub.id), None, 10)
        .await
        .expect("dead letters");
    assert_eq!(parked.len(), 1);
    assert_eq!(
        (parked[0].1.attempts, parked[0].1.reason.as_str()),
        (1, "status 410")
    );
    assert!(ports
        .dead_letters
        .list(&tenant("b"), None, None, 10)
        .await
        .expect("dl")
        .is_empty());

    let replayed = queue
        .requeue(&[new_delivery(&sub, &e)], Retake::Parked, false)
        .await
        .expect("replay");
    assert_eq!(replayed, vec![true]);
    let again = h.next_delivery(&sub.id).await.expect("back in the lane");
    assert_eq!(again.attempts, 0, "a fresh ladder");
    assert!(ports
        .dead_letters
        .list(&t, None, None, 10)
        .await
        .expect("dl")
        .is_empty());

    let listed = log.list(&t, &sub.id, None, 10).await.expect("attempts");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1.status_code, Some(410));
}

/// Deleting a subscription hides it from the read every attempt starts
/// with (so the engine drops its deliveries, G4) and from fan-out.
pub async fn a_deleted_subscription_is_gone_for_attempts_and_fan_out(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, queue) = (&ports.subscriptions, &ports.lanes);
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    subs.insert(&sub).await.expect("insert");
    let e = event(&t, "a.b", OffsetDateTime::now_utc());
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue");
    assert!(subs.delete(&t, &sub.id).await.expect("delete").is_some());
    assert!(subs.get(&t, &sub.id).await.expect("get").is_none());
    let ty = EventType::parse("a.b").expect("type");
    assert!(subs
        .matching(&t, &ty, None, 10)
        .await
        .expect("matching")
        .is_empty());
    let views = ports.views.of_event(&t, &e.id).await.expect("views");
    assert!(
        views.iter().all(|(_, v)| v.shown_state() == "dropped"),
        "never pending again"
    );
}

/// Suspension is a guarded transition: of two attempts exactly one takes
/// effect; re-enabling likewise, and it resets health (G8).
pub async fn suspension_is_a_guarded_transition(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, suspensions) = (&ports.subscriptions, &ports.suspensions);
    let t = tenant("a");
    let mut sub = subscription(&t, &["*"]);
    sub.health.consecutive_failures = 7;
    subs.insert(&sub).await.expect("insert");
    let now = OffsetDateTime::now_utc();
    // One after the other: the local AWS-compatible server does not make
    // two concurrent conditional writes atomic (DynamoDB does); the
    // embedded engine's concurrent case has its own test.
    let a = suspensions
        .suspend(&t, &sub.id, now, "permanent failures")
        .await;
    let b = suspensions
        .suspend(&t, &sub.id, now, "permanent failures")
        .await;
    assert_eq!(
        u8::from(a.expect("suspend")) + u8::from(b.expect("suspend")),
        1,
        "exactly one"
    );
    let got = subs.get(&t, &sub.id).await.expect("get").expect("kept");
    assert_eq!(got.status, SubscriptionStatus::Suspended);
    assert_eq!(got.status_reason.as_deref(), Some("permanent failures"));
    assert_eq!(got.secret, sub.secret, "secret survives");
    assert_eq!(got.filters, sub.filters, "filters survive");
    let ty = EventType::parse("a.b").expect("type");
    assert!(
        subs.matching(&t, &ty, None, 10)
            .await
            .expect("matching")
            .is_empty(),
        "no fan-out"
    );
    assert!(suspensions
        .activate(&t, &sub.id, now)
        .await
        .expect("activate"));
    assert!(
        !suspensions
            .activate(&t, &sub.id, now)
            .await
            .expect("activate"),
        "already active"
    );
    let got = subs.get(&t, &sub.id).await.expect("get").expect("kept");
    assert_eq!(got.status, SubscriptionStatus::Active);
    assert_eq!(got.health.consecutive_failures, 0, "health reset");
    assert!(got.suspended_at.is_none());
}

/// Ends one new delivery of `sub` as `end` (after an attempt, unless it is
/// held): the states the requeue rule and the views are checked against.
async fn ended(h: &dyn Harness, sub: &Subscription, end: Option<End>) -> Event {
    let ports = h.ports();
    let e = event(&sub.tenant, "a.b", OffsetDateTime::now_utc());
    ports.events.accept(e.clone()).await.expect("accept");
    ports
        .lanes
        .enqueue(&[new_delivery(sub, &e)])
        .await
        .expect("enqueue");
    let Some(end) = end else { return e };
    let d = h.next_delivery(&sub.id).await.expect("queued");
    let attempt = (end != End::Held).then(|| attempt(&d, 1, "x", Some(500)));
    if attempt.is_some() {
        let now = OffsetDateTime::now_utc();
        let began = ports.lanes.begin(&d, now, now + Duration::seconds(30));
        assert!(began.await.expect("begin"));
    }
    let finish = Finish {
        end,
        attempt,
        health: None,
    };
    ports.lanes.finish(&d, &finish).await.expect("finish");
    e
}

/// The one requeue rule ([`Retake`]) and the one view mapping hold on the
/// adapter: a backfill takes parked, held and never-queued deliveries and
/// leaves delivered, pending and retrying ones; a replay takes parked ones
/// only; what the API shows of each state is the same on every store.
pub async fn requeues_take_what_the_rule_takes_and_views_show_one_mapping(h: &dyn Harness) {
    let ports = h.ports();
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    ports.subscriptions.insert(&sub).await.expect("insert");
    let retry_at = OffsetDateTime::now_utc() + Duration::hours(1);
    // (how it ended, what the API shows, whether a backfill takes it)
    let cases = [
        (Some(End::Delivered), "delivered", Some(false)),
        (Some(End::Parked("status 410".into())), "parked", Some(true)),
        (Some(End::Held), "pending", Some(true)),
        (Some(End::Retry(retry_at)), "retrying", Some(false)),
        // Queued and never attempted: a store that keeps no record until
        // the first attempt (AWS) cannot tell it from one never queued and
        // may queue a copy; the conditional attempt start lets only one
        // attempt of the pair begin, so either answer is within the rule.
        (None, "pending", None),
    ];
    let mut events = Vec::new();
    for (end, shown, _) in &cases {
        let e = ended(h, &sub, end.clone()).await;
        let views = ports.views.of_event(&t, &e.id).await.expect("views");
        assert_eq!(views.len(), 1, "one delivery of {end:?}");
        assert_eq!(views[0].1.shown_state(), *shown, "{end:?} shows as {shown}");
        events.push(e);
    }
    let never = event(&t, "a.b", OffsetDateTime::now_utc());
    ports.events.accept(never.clone()).await.expect("accept");
    events.push(never);
    let all: Vec<NewDelivery> = events.iter().map(|e| new_delivery(&sub, e)).collect();
    let replayed = ports
        .lanes
        .requeue(&all, Retake::Parked, false)
        .await
        .expect("replay");
    assert_eq!(
        replayed,
        [false, true, false, false, false, false],
        "a replay takes the parked one"
    );
    let backfilled = ports
        .lanes
        .requeue(&all, Retake::Missed, true)
        .await
        .expect("backfill");
    let mut want: Vec<Option<bool>> = cases.iter().map(|c| c.2).collect();
    want[1] = Some(false); // replayed just now: pending again, so left alone
    want.push(Some(true)); // never queued
    let got: Vec<Option<bool>> = backfilled
        .iter()
        .zip(&want)
        .map(|(got, want)| want.map(|_| *got))
        .collect();
    assert_eq!(
        got, want,
        "a backfill takes the held and the never-queued ones"
    );
    for e in &events[2..3] {
        let views = ports.views.of_event(&t, &e.id).await.expect("views");
        assert_eq!(
            (views[0].1.shown_state(), views[0].1.attempts),
            ("pending", 0),
            "a requeued delivery starts a fresh ladder"
        );
    }
}

/// A subscription with every field set reads back as it was written, on
/// insert and on update: the one record mapping ([`SubscriptionRecord`]).
pub async fn a_subscription_reads_back_field_for_field(h: &dyn Harness) {
    let ports = h.ports();
    let t = tenant("a");
    let at = |secs: i64| {
        crate::record::from_ms(crate::record::ms(OffsetDateTime::now_utc()) + secs * 1000)
    };
    let mut sub = subscription(&t, &["invoice.*", "order.paid"]);
    (sub.created_at, sub.updated_at) = (at(0), at(0));
    sub.previous_secret = Some(PreviousSecret {
        secret: Secret::generate(),
        expires_at: at(86_400),
    });
    sub.health = Health {
        consecutive_failures: 3,
        first_failure_at: Some(at(-60)),
        last_outcome: Some("parked".into()),
        last_status_code: Some(503),
        last_error: Some("status 503".into()),
        last_attempt_at: Some(at(-1)),
        retryable_failures: 3,
        permanent_failures: 0,
        fatal_failures: 0,
        streak_events_since: Some(at(-61)),
    };
    ports.subscriptions.insert(&sub).await.expect("insert");
    let got = ports
        .subscriptions
        .get(&t, &sub.id)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        SubscriptionRecord::from(&got),
        SubscriptionRecord::from(&sub),
        "as inserted"
    );

    sub.description = None;
    sub.metadata.clear();
    sub.previous_secret = None;
    sub.url = url::Url::parse("https://example.com/other?x=1").expect("url");
    sub.updated_at = at(5);
    assert!(ports.subscriptions.update(&sub).await.expect("update"));
    let got = ports
        .subscriptions
        .get(&t, &sub.id)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        SubscriptionRecord::from(&got),
        SubscriptionRecord::from(&sub),
        "as updated"
    );
}

/// Every check, in order.
pub async fn run_all(h: &dyn Harness) {
    a_subscription_reads_back_field_for_field(h).await;
    subscriptions_are_tenant_scoped_and_tombstoned(h).await;
    matching_respects_filters_tenants_and_pages(h).await;
    accepting_is_idempotent_for_a_day(h).await;
    deliveries_lease_finish_park_and_replay(h).await;
    a_deleted_subscription_is_gone_for_attempts_and_fan_out(h).await;
    suspension_is_a_guarded_transition(h).await;
    // Last: it leaves deliveries in the lanes.
    requeues_take_what_the_rule_takes_and_views_show_one_mapping(h).await;
}
