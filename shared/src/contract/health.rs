//! The health record's writes in the storage contract (G8): a failed
//! sequence is counted over the record as stored when it is written, so
//! that sequences ending on several lanes (or in several processes) at
//! once each count; a success replaces the record.

use time::{Duration, OffsetDateTime};

use super::{attempt, event, new_delivery, subscription, tenant, Harness};
use crate::domain::Health;
use crate::health::{FailedSequence, HealthWrite, RampConfig, Sequence};
use crate::policy::FailureClass;
use crate::ports::{End, Finish};

/// Two failed sequences whose writes were both made from the record as it
/// was before either (as two lanes ending at once make them) count two,
/// and the store answers the record it wrote; a success then resets it.
pub async fn failed_sequences_each_count_over_the_stored_record(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, queue) = (&ports.subscriptions, &ports.lanes);
    let t = tenant("health");
    let sub = subscription(&t, &["*"]);
    subs.insert(&sub).await.expect("insert");
    let mut written = Vec::new();
    for (n, (status, outcome)) in [(410, "parked"), (410, "parked"), (204, "delivered")]
        .into_iter()
        .enumerate()
    {
        let e = event(&t, "a.b", OffsetDateTime::now_utc());
        queue
            .enqueue(&[new_delivery(&sub, &e)])
            .await
            .expect("enqueue");
        let d = h.next_delivery(&sub.id).await.expect("queued");
        let now = OffsetDateTime::now_utc();
        assert!(queue
            .begin(&d, now, now + Duration::seconds(30))
            .await
            .expect("begin"));
        let last = attempt(&d, 1, outcome, Some(status));
        let (end, health) = if n < 2 {
            let failed = FailedSequence {
                last: last.clone(),
                class: FailureClass::Permanent,
                seq: Sequence {
                    first_attempt_at: now,
                    event_at: e.created_at,
                },
                ramp: RampConfig::default(),
            };
            (
                End::Parked("status 410".into()),
                HealthWrite::Failed(failed),
            )
        } else {
            (End::Delivered, HealthWrite::Set(Health::default()))
        };
        let finish = Finish {
            end,
            attempt: Some(last),
            health: Some(health),
            timed_out: false,
        };
        let finished = queue.finish(&d, &finish).await.expect("finish");
        assert!(finished.took, "recorded");
        written.push(finished.health.expect("written").consecutive_failures);
        let stored = subs.get(&t, &sub.id).await.expect("get").expect("kept");
        assert_eq!(
            stored.health.consecutive_failures, written[n],
            "as answered"
        );
    }
    assert_eq!(written, [1, 2, 0], "each failure counts; a success resets");
}
