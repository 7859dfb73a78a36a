//! The SQLite adapter against the shared storage contract, plus what only
//! the embedded store does (lanes, fan-out intake, group commit).

use crate::contract::{self, Harness};
use crate::domain::{Delivery, SubscriptionId};
use crate::ports::{DeliveryViews, LaneQueue, SubscriptionStore, TenantSlot};

use super::SqliteStore;

struct Sqlite {
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

fn open() -> Sqlite {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("t.db")).expect("open");
    Sqlite { store, _dir: dir }
}

#[async_trait::async_trait]
impl Harness for Sqlite {
    fn ports(&self) -> crate::engine::Ports {
        contract::ports_over(self.store.clone())
    }
    async fn next_delivery(&self, sub: &SubscriptionId) -> Option<Delivery> {
        self.store
            .lane_head(sub, super::Lane::Live(0))
            .await
            .expect("lane head")
    }
    /// The database file and its write-ahead log, as they are on disk.
    async fn raw_contents(&self) -> String {
        let db = self._dir.path().join("t.db");
        let wal = self._dir.path().join("t.db-wal");
        let mut bytes = std::fs::read(&db).expect("database file");
        bytes.extend(std::fs::read(&wal).unwrap_or_default());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[tokio::test]
async fn the_sqlite_adapter_passes_the_storage_contract() {
    contract::run_all(&open()).await;
}

#[tokio::test]
async fn concurrent_writes_commit_in_groups_and_each_caller_gets_its_answer() {
    let h = open();
    let t = crate::domain::TenantId::parse("grouped").unwrap();
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let store = h.store.clone();
        let sub = contract::subscription(&t, &["*"]);
        tasks.push(tokio::spawn(async move {
            store.insert(&sub).await.map(|_| sub.id)
        }));
    }
    for task in tasks {
        task.await.unwrap().expect("insert committed");
    }
    assert_eq!(
        SubscriptionStore::list(&h.store, &t, None, 250)
            .await
            .unwrap()
            .len(),
        200
    );
}

#[tokio::test]
async fn a_failing_write_does_not_undo_the_others_in_its_group() {
    let h = open();
    let t = crate::domain::TenantId::parse("dupes").unwrap();
    let sub = contract::subscription(&t, &["*"]);
    h.store.insert(&sub).await.unwrap();
    let (again, other) = (sub.clone(), contract::subscription(&t, &["*"]));
    let (s1, s2) = (h.store.clone(), h.store.clone());
    let (r1, r2) = tokio::join!(async move { s1.insert(&again).await }, async move {
        s2.insert(&other).await
    });
    assert!(r1.is_err(), "a duplicate id is refused");
    assert!(r2.is_ok());
    assert_eq!(
        SubscriptionStore::list(&h.store, &t, None, 10)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn deleting_a_subscription_drops_its_queued_deliveries_and_refuses_new_attempts() {
    let h = open();
    let t = crate::domain::TenantId::parse("gone").unwrap();
    let sub = contract::subscription(&t, &["*"]);
    h.store.insert(&sub).await.unwrap();
    let d = crate::ports::NewDelivery::to(
        &sub,
        &crate::domain::EventId::generate(),
        &crate::domain::EventType::parse("a.b").unwrap(),
        None,
    );
    h.store.enqueue(&[d]).await.unwrap();
    let head = h
        .store
        .lane_head(&sub.id, super::Lane::Live(0))
        .await
        .unwrap()
        .expect("queued");
    assert_eq!(
        h.store.delete(&t, &sub.id).await.unwrap(),
        Some(1),
        "one dropped"
    );
    let now = time::OffsetDateTime::now_utc();
    let lease = now + time::Duration::seconds(30);
    assert!(!h.store.begin(&head, now, lease).await.unwrap());
    assert!(h
        .store
        .lane_head(&sub.id, super::Lane::Live(0))
        .await
        .unwrap()
        .is_none());
}

#[test]
fn cached_statements_are_not_recompiled_when_bound_again() {
    let dir = tempfile::tempdir().unwrap();
    let conn = super::open_conn(&dir.path().join("q.db")).unwrap();
    conn.execute_batch(
        "CREATE TABLE t (k TEXT, lane INTEGER, n INTEGER); CREATE INDEX t_k ON t (k, lane, n);",
    )
    .unwrap();
    // The shapes of the hot queries: an equality on a small integer and a
    // bound LIMIT.
    let sql = "SELECT n FROM t WHERE k = ?1 AND lane = ?2 ORDER BY n LIMIT ?3";
    for lane in [0_i64, 1, 0, 1] {
        let mut stmt = conn.prepare_cached(sql).unwrap();
        let _: Vec<i64> = stmt
            .query_map(rusqlite::params!["a", lane, 500], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    }
    let stmt = conn.prepare_cached(sql).unwrap();
    assert_eq!(
        stmt.get_status(rusqlite::StatementStatus::RePrepare),
        0,
        "the statement was recompiled on rebinding"
    );
}

fn delivery_of(sub: &crate::domain::Subscription, n: u32) -> crate::ports::NewDelivery {
    crate::ports::NewDelivery::to(
        sub,
        &crate::domain::EventId::parse(&format!("evt_{n}")).unwrap(),
        &crate::domain::EventType::parse("a.b").unwrap(),
        None,
    )
}

#[tokio::test]
async fn a_queued_delivery_that_does_not_parse_is_parked_with_the_reason_reported_and_kept() {
    let h = open();
    let t = crate::domain::TenantId::parse("corrupt").unwrap();
    let sub = contract::subscription(&t, &["*"]);
    h.store.insert(&sub).await.unwrap();
    h.store
        .enqueue(&[delivery_of(&sub, 1), delivery_of(&sub, 2)])
        .await
        .unwrap();
    h.store
        .write(|conn| {
            conn.execute(
                "UPDATE deliveries SET event_type = 'not a type!' WHERE event_id = 'evt_1'",
                [],
            )
        })
        .await
        .unwrap();
    let before = crate::record::UNREADABLE.get();

    let head = h
        .store
        .lane_head(&sub.id, super::Lane::Live(0))
        .await
        .unwrap();
    assert_eq!(
        head.map(|d| d.event_id.as_str().to_owned()).as_deref(),
        Some("evt_2"),
        "the lane goes on past the unreadable delivery"
    );
    let (state, reason): (String, String) = h
        .store
        .read(|conn| {
            conn.query_row(
                "SELECT state, reason FROM deliveries WHERE event_id = 'evt_1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .await
        .unwrap();
    assert_eq!(state, "parked", "kept and parked, not deleted");
    assert!(reason.contains("does not parse"), "{reason}");
    let after = crate::record::UNREADABLE.get();
    assert!(after > before, "counted");

    // Lists leave the unreadable row out, count it, and still answer.
    let views = h
        .store
        .of_event(&t, &crate::domain::EventId::parse("evt_2").unwrap())
        .await
        .unwrap();
    assert_eq!(views.len(), 1);
    h.store
        .write(|conn| {
            conn.execute(
                "UPDATE deliveries SET state = 'bogus' WHERE event_id = 'evt_2'",
                [],
            )
        })
        .await
        .unwrap();
    let views = h
        .store
        .of_event(&t, &crate::domain::EventId::parse("evt_2").unwrap())
        .await
        .unwrap();
    assert!(views.is_empty(), "an unknown state is not read as another");
    assert!(crate::record::UNREADABLE.get() > after);
}

/// A lane queue that departs from the one requeue rule: a replay takes
/// whatever a backfill would. The contract must catch it.
struct Diverging(SqliteStore);

#[async_trait::async_trait]
impl LaneQueue for Diverging {
    async fn enqueue(&self, d: &[crate::ports::NewDelivery]) -> crate::ports::StoreResult<()> {
        self.0.enqueue(d).await
    }
    async fn begin(
        &self,
        d: &Delivery,
        now: time::OffsetDateTime,
        lease: time::OffsetDateTime,
    ) -> crate::ports::StoreResult<bool> {
        self.0.begin(d, now, lease).await
    }
    async fn finish(
        &self,
        d: &Delivery,
        f: &crate::ports::Finish,
    ) -> crate::ports::StoreResult<crate::ports::Finished> {
        self.0.finish(d, f).await
    }
    async fn defer(
        &self,
        d: &Delivery,
        until: time::OffsetDateTime,
    ) -> crate::ports::StoreResult<()> {
        self.0.defer(d, until).await
    }
    async fn requeue(
        &self,
        d: &[crate::ports::NewDelivery],
        _rule: crate::domain::Retake,
        backfill: bool,
    ) -> crate::ports::StoreResult<Vec<bool>> {
        self.0
            .requeue(d, crate::domain::Retake::Missed, backfill)
            .await
    }
}

struct DivergingHarness(Sqlite);

#[async_trait::async_trait]
impl Harness for DivergingHarness {
    fn ports(&self) -> crate::engine::Ports {
        let mut ports = contract::ports_over(self.0.store.clone());
        ports.lanes = std::sync::Arc::new(Diverging(self.0.store.clone()));
        ports
    }
    async fn next_delivery(&self, sub: &SubscriptionId) -> Option<Delivery> {
        self.0.next_delivery(sub).await
    }
    async fn raw_contents(&self) -> String {
        self.0.raw_contents().await
    }
}

#[tokio::test]
async fn an_adapter_that_departs_from_the_requeue_rule_fails_the_contract() {
    let h = DivergingHarness(open());
    let checked = tokio::spawn(async move {
        contract::requeues_take_what_the_rule_takes_and_views_show_one_mapping(&h).await
    })
    .await;
    assert!(
        checked.is_err_and(|e| e.is_panic()),
        "the contract passed an adapter that replays held deliveries"
    );
}

/// A lane queue whose tenant slots come with a lease already nearly over,
/// as after a slow store: the engine must renew it before the request, and
/// send nothing when the renewal finds the slot lost (G3).
struct ShortSlots {
    store: SqliteStore,
    /// Whether a renewal finds the lease still held.
    still_held: bool,
    renewals: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl LaneQueue for ShortSlots {
    async fn enqueue(&self, d: &[crate::ports::NewDelivery]) -> crate::ports::StoreResult<()> {
        self.store.enqueue(d).await
    }
    async fn begin(
        &self,
        d: &Delivery,
        now: time::OffsetDateTime,
        lease: time::OffsetDateTime,
    ) -> crate::ports::StoreResult<bool> {
        self.store.begin(d, now, lease).await
    }
    async fn finish(
        &self,
        d: &Delivery,
        f: &crate::ports::Finish,
    ) -> crate::ports::StoreResult<crate::ports::Finished> {
        self.store.finish(d, f).await
    }
    async fn defer(
        &self,
        d: &Delivery,
        until: time::OffsetDateTime,
    ) -> crate::ports::StoreResult<()> {
        self.store.defer(d, until).await
    }
    async fn requeue(
        &self,
        d: &[crate::ports::NewDelivery],
        rule: crate::domain::Retake,
        backfill: bool,
    ) -> crate::ports::StoreResult<Vec<bool>> {
        self.store.requeue(d, rule, backfill).await
    }
    async fn tenant_slot(
        &self,
        _d: &Delivery,
        _limit: usize,
        _hold: std::time::Duration,
    ) -> crate::ports::StoreResult<TenantSlot> {
        // Taken a while ago: a second of the lease is left, less than the
        // attempt timeout.
        Ok(TenantSlot::Held {
            shard: 0,
            lease: "l".into(),
            until: time::OffsetDateTime::now_utc() + std::time::Duration::from_secs(1),
        })
    }
    async fn renew_tenant_slot(
        &self,
        _d: &Delivery,
        slot: &TenantSlot,
        hold: std::time::Duration,
    ) -> crate::ports::StoreResult<Option<TenantSlot>> {
        self.renewals
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let TenantSlot::Held { shard, lease, .. } = slot.clone() else {
            return Ok(Some(slot.clone()));
        };
        Ok(self.still_held.then(|| TenantSlot::Held {
            shard,
            lease,
            until: time::OffsetDateTime::now_utc() + hold,
        }))
    }
}

/// A sender that answers 204 and counts.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl crate::ports::Sender for Counting {
    async fn send(&self, _request: crate::ports::Outbound) -> crate::ports::SendReport {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        crate::ports::SendReport {
            result: crate::policy::AttemptResult::Response {
                status: 204,
                retry_after: None,
            },
            excerpt: None,
            headers: None,
            elapsed: std::time::Duration::from_millis(1),
        }
    }
}

/// One delivery attempted over [`ShortSlots`]: the step, how many
/// requests went out, how many renewals were asked for.
async fn attempt_with_a_short_slot(still_held: bool) -> (crate::engine::Step, usize, usize) {
    let h = open();
    let lanes = std::sync::Arc::new(ShortSlots {
        store: h.store.clone(),
        still_held,
        renewals: Default::default(),
    });
    let sender = std::sync::Arc::new(Counting::default());
    let mut ports = contract::ports_over(h.store.clone());
    ports.lanes = lanes.clone();
    ports.sender = sender.clone();
    let engine = crate::engine::Engine::new(ports, crate::config::Config::default());
    let t = crate::domain::TenantId::parse("short-slot").unwrap();
    let sub = contract::subscription(&t, &["*"]);
    h.store.insert(&sub).await.unwrap();
    let event = contract::event(&t, "a.b", time::OffsetDateTime::now_utc());
    engine.publish(event.clone()).await.unwrap();
    engine.fan_out(&event).await.unwrap();
    let d = h.next_delivery(&sub.id).await.expect("queued");
    let step = engine.deliver(&d, None).await.unwrap();
    (
        step,
        sender.0.load(std::sync::atomic::Ordering::SeqCst),
        lanes.renewals.load(std::sync::atomic::Ordering::SeqCst),
    )
}

#[tokio::test]
async fn a_slot_lease_too_short_for_the_request_is_renewed_and_a_lost_one_sends_nothing() {
    let (step, sent, renewals) = attempt_with_a_short_slot(true).await;
    assert_eq!(renewals, 1, "a second left of the lease is renewed");
    assert_eq!(sent, 1);
    assert_eq!(
        step,
        crate::engine::Step::Ended(crate::ports::End::Delivered)
    );

    let (step, sent, renewals) = attempt_with_a_short_slot(false).await;
    assert_eq!(renewals, 1);
    assert_eq!(sent, 0, "no request without a slot held for all of it (G3)");
    assert!(
        matches!(step, crate::engine::Step::Deferred(_)),
        "the delivery comes round again: {step:?}"
    );
}

/// An archive that leaves fan-out to the caller for a request's first
/// event as long as its tenant has not moved, moves the tenant after the
/// first request (as another process's failed fan-out would), and records
/// what it was asked to schedule.
struct CallerFansOut {
    store: SqliteStore,
    moved: std::sync::atomic::AtomicBool,
    later: std::sync::Mutex<Vec<crate::domain::EventId>>,
}

#[async_trait::async_trait]
impl crate::ports::EventArchive for CallerFansOut {
    async fn accept(
        &self,
        event: crate::domain::Event,
    ) -> crate::ports::StoreResult<crate::ports::Accepted> {
        self.store.accept(event).await
    }
    async fn accept_routed(
        &self,
        event: crate::domain::Event,
        decided: Option<crate::ports::FanOutBy>,
    ) -> crate::ports::StoreResult<(crate::ports::Accepted, crate::ports::FanOutBy)> {
        use crate::ports::FanOutBy;
        let by = decided.unwrap_or(if self.moved.load(std::sync::atomic::Ordering::SeqCst) {
            FanOutBy::Schedule
        } else {
            FanOutBy::Caller
        });
        // Another process moves the tenant once this request has begun.
        self.moved.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok((self.store.accept(event).await?, by))
    }
    async fn fan_out_later(&self, event: &crate::domain::Event) -> crate::ports::StoreResult<()> {
        self.later.lock().unwrap().push(event.id.clone());
        Ok(())
    }
    async fn get(
        &self,
        tenant: &crate::domain::TenantId,
        id: &crate::domain::EventId,
    ) -> crate::ports::StoreResult<Option<crate::domain::Event>> {
        crate::ports::EventArchive::get(&self.store, tenant, id).await
    }
    async fn recent(
        &self,
        tenant: &crate::domain::TenantId,
        query: &crate::domain::RecentEvents,
    ) -> crate::ports::StoreResult<Vec<crate::domain::ArchivedEvent>> {
        self.store.recent(tenant, query).await
    }
    async fn window(
        &self,
        tenant: &crate::domain::TenantId,
        after: &crate::domain::ArchivePosition,
        until: time::OffsetDateTime,
        limit: usize,
    ) -> crate::ports::StoreResult<Vec<crate::domain::ArchivedEvent>> {
        crate::ports::EventArchive::window(&self.store, tenant, after, until, limit).await
    }
}

/// A request whose events the caller fans out: all of one request take
/// its first event's path even when the tenant moves meanwhile, and the
/// caller fans out at most 2,000 deliveries, scheduling the events after
/// them in order.
#[tokio::test]
async fn a_request_takes_one_fan_out_path_and_fans_out_at_most_2000_deliveries_itself() {
    let h = open();
    let archive = std::sync::Arc::new(CallerFansOut {
        store: h.store.clone(),
        moved: Default::default(),
        later: Default::default(),
    });
    let mut ports = contract::ports_over(h.store.clone());
    ports.events = archive.clone();
    let engine = crate::engine::Engine::new(ports, crate::config::Config::default());
    let t = crate::domain::TenantId::parse("inline").unwrap();
    for _ in 0..21 {
        h.store
            .insert(&contract::subscription(&t, &["*"]))
            .await
            .unwrap();
    }
    let start = time::OffsetDateTime::now_utc();
    let events: Vec<_> = (0..100i64)
        .map(|i| contract::event(&t, "a.b", start + time::Duration::milliseconds(i)))
        .collect();
    let ids: Vec<_> = events.iter().map(|e| e.id.clone()).collect();
    let answers = engine.publish_all(events).await;
    assert!(answers.iter().all(|a| a.is_ok()));
    // 96 events make 2,016 deliveries: the caller stops there.
    let inline = engine.metrics.deliveries_enqueued.get();
    assert_eq!(
        inline,
        96 * 21,
        "the first 96 events fanned out by the caller"
    );
    assert_eq!(*archive.later.lock().unwrap(), ids[96..].to_vec());

    // The tenant moved: the next request is scheduled whole.
    archive.later.lock().unwrap().clear();
    let more: Vec<_> = (0..3i64)
        .map(|i| contract::event(&t, "a.b", start + time::Duration::seconds(1 + i)))
        .collect();
    assert!(engine.publish_all(more).await.iter().all(|a| a.is_ok()));
    assert!(
        archive.later.lock().unwrap().is_empty(),
        "scheduled by the store"
    );
    assert_eq!(
        engine.metrics.deliveries_enqueued.get(),
        inline,
        "nothing fanned out by the caller"
    );
}
