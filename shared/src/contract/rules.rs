//! The checks of the rules the core owns: the requeue rule, the one view
//! mapping of delivery states, and the one subscription record mapping.

use time::{Duration, OffsetDateTime};

use super::{attempt, event, new_delivery, subscription, tenant, Harness};
use crate::domain::{
    ArchivePosition, BackfillJob, ContentFilter, EndpointAuth, EndpointOptions, Event, Health,
    LaneCount, PreviousSecret, RateLimit, Retake, Subscription,
};
use crate::engine::Ports;
use crate::ports::{End, Finish, NewDelivery};
use crate::record::SubscriptionRecord;
use crate::signing::Secret;

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
        timed_out: false,
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

/// The stored subscription, read back, maps to the same record as `sub`.
async fn reads_back_as(ports: &Ports, sub: &Subscription, what: &str) {
    let got = ports
        .subscriptions
        .get(&sub.tenant, &sub.id)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        SubscriptionRecord::from(&got),
        SubscriptionRecord::from(sub),
        "{what}"
    );
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
        ramp_until: Some(at(120)),
        at_suspension: true,
    };
    sub.lanes = LaneCount::parse(8).expect("lanes");
    sub.rate_limit = Some(RateLimit::parse(40).expect("rate"));
    sub.options = EndpointOptions {
        filter: Some(
            ContentFilter::parse(r#"{"data":{"n":{"$gt":18446744073709551616}}}"#).expect("filter"),
        ),
        headers: [("X-Api-Key".to_owned(), "k 1".to_owned())].into(),
        auth: Some(EndpointAuth::Basic {
            username: "hook".into(),
            password: "pw".into(),
        }),
    };
    ports.subscriptions.insert(&sub).await.expect("insert");
    reads_back_as(&ports, &sub, "as inserted").await;

    sub.description = None;
    sub.metadata.clear();
    sub.previous_secret = None;
    sub.url = url::Url::parse("https://example.com/other?x=1").expect("url");
    sub.updated_at = at(5);
    sub.lanes = LaneCount::parse(256).expect("lanes");
    sub.rate_limit = None;
    sub.options = EndpointOptions::default();
    assert!(ports.subscriptions.update(&sub).await.expect("update"));
    reads_back_as(&ports, &sub, "as updated").await;
}

/// A backfill replaced by another (a recovery) is not moved on or ended by
/// a pass of the one it replaced.
pub async fn a_replaced_backfill_is_left_to_its_replacement(h: &dyn Harness) {
    let ports = h.ports();
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    let at = |ms: i64| crate::record::from_ms(ms);
    let job = |started: i64| BackfillJob {
        tenant: t.clone(),
        subscription_id: sub.id.clone(),
        after: ArchivePosition::before(at(1_000)),
        until: at(9_000),
        started_at: at(started),
    };
    let (old, new) = (job(5_000), job(6_000));
    ports.backfills.start(&old).await.expect("start");
    ports.backfills.start(&new).await.expect("replace");
    let mut moved = old.clone();
    moved.after = ArchivePosition::before(at(8_000));
    ports.backfills.save(&moved).await.expect("save");
    ports.backfills.end(&old).await.expect("end");
    let kept = ports.backfills.load(&t, &sub.id).await.expect("load");
    assert_eq!(kept, Some(new.clone()), "the replacement, where it started");
    ports.backfills.end(&new).await.expect("end");
    assert_eq!(ports.backfills.load(&t, &sub.id).await.expect("load"), None);
}
