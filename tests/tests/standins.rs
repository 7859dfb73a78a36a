//! The fast pair really answers in parallel (`tests/src/aws.rs`): a
//! hundred calls at once finish in far less than a hundred times one, so
//! a later change of stand-in cannot quietly bring back the queue moto
//! keeps (it answers one call at a time, and a burst's calls wait their
//! turn there, which is what the burst figures on moto measured).
//!
//! - SQS (ministack): a hundred long polls of one second on an empty
//!   queue, at once, end within a few seconds (one at a time: 100 s).
//! - DynamoDB (dynoxide) applies calls to its SQLite store one at a time,
//!   as moto does, but in microseconds to a few milliseconds each, so a
//!   call does not wait long behind a burst. Measured from this process,
//!   whose own client work on two cores dominates, a lone read during a
//!   hundred calls did not tell the two apart reliably (23 to 37 times a
//!   call on dynoxide, 29 to 63 on moto), so no test here claims it: the
//!   burst promise's tests (`aws_burst.rs`), which run on dynoxide, are
//!   what fail if its calls start to queue (on moto the same burst's
//!   slowest deliveries took 5 and 6 s, over their 3 and 5 s bounds).
//!
//! `HOOKLANE_STANDIN_CHECK=moto` runs the same checks against moto, to see
//! them fail there (`cargo test --test standins -- --nocapture`).

use std::time::{Duration, Instant};

use futures::future::join_all;
use hooklane_tests::aws::{self, Standin};

/// The stand-in checked: the fast pair, unless told moto.
fn checked() -> Standin {
    match std::env::var("HOOKLANE_STANDIN_CHECK").as_deref() {
        Ok("moto") => Standin::Moto,
        _ => Standin::Fast,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_long_polls_at_once_end_together() {
    let sdk = aws::sdk_on(checked()).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let url = sqs
        .create_queue()
        .queue_name(format!("{}-empty", aws::unique_prefix()))
        .send()
        .await
        .expect("a queue")
        .queue_url
        .expect("its URL");
    let started = Instant::now();
    let polls = (0..100).map(|_| {
        sqs.receive_message()
            .queue_url(&url)
            .wait_time_seconds(1)
            .send()
    });
    for answer in join_all(polls).await {
        answer.expect("a long poll answers");
    }
    let took = started.elapsed();
    eprintln!(
        "{:?}: 100 one-second long polls at once took {took:?}",
        checked()
    );
    assert!(
        took < Duration::from_secs(10),
        "a hundred one-second waits took {took:?}: the server answers them one after another"
    );
}
