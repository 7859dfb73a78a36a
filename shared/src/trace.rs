//! OTLP traces, off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set: then
//! [`crate::telemetry::init`] adds a `tracing-opentelemetry` layer that
//! exports the spans made here (and only these) over OTLP/HTTP
//! (`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`, the default, or
//! `http/json`; the other `OTEL_*` variables as the OpenTelemetry SDK
//! reads them; service name `hooklane` unless `OTEL_SERVICE_NAME` says
//! otherwise).
//!
//! Spans: `publish` (one request's events; it continues the request's
//! `traceparent`), `fan_out` (a run of one tenant's events), `attempt`
//! (one request to a receiver, which carries the attempt span's own
//! `traceparent`). Each names its tenant, and its event, subscription and
//! attempt where it has one. The publish span's `traceparent` is stored
//! with each event it accepted ([`Event::traceparent`]), so every attempt
//! joins the publish's trace, whichever process or Lambda function runs
//! it and however much later; a fan-out span is a child of its run's first
//! event's publish, with links to the other events' publishes.
//!
//! Off, every function here returns at its first branch (a disabled span,
//! no header): tracing costs one load of a flag per span.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::Layer;

use crate::domain::{Delivery, Event, TenantId};
use crate::policy::AttemptResult;

static ON: AtomicBool = AtomicBool::new(false);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Whether spans are exported.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The exporting layer, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its
/// traces-only form) is set; it sees this module's spans only.
pub(crate) fn layer<S>() -> Option<Box<dyn Layer<S> + Send + Sync>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    if !set("OTEL_EXPORTER_OTLP_ENDPOINT") && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("hooklane: OTLP traces are off: {e}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if !set("OTEL_SERVICE_NAME") {
        resource = resource.with_service_name("hooklane");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("hooklane");
    let _ = PROVIDER.set(provider);
    ON.store(true, Ordering::Relaxed);
    let only_ours = Targets::new().with_target(module_path!(), tracing::Level::TRACE);
    Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(only_ours)
            .boxed(),
    )
}

/// Sends the spans ended so far (a Lambda function, before it is frozen
/// between invocations; a process about to exit).
pub fn flush() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.force_flush();
    }
}

/// [`flush`] off the async threads, when traces are on (a Lambda
/// function's request or batch is done).
pub async fn flush_done() {
    if enabled() {
        let _ = tokio::task::spawn_blocking(flush).await;
    }
}

/// Reads a `traceparent` out of the request's headers.
struct Headers<'a>(&'a axum::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The span of publishing a request's `events` of `tenant` (continuing
/// the request's `traceparent` when it has one), named by the first
/// event's id; each event gets the span's `traceparent`, so its fan-out
/// and attempts join the trace.
pub fn publishing(
    tenant: &TenantId,
    events: &mut [Event],
    headers: &axum::http::HeaderMap,
) -> Span {
    let span = publish(tenant, events.len(), headers);
    if let Some(first) = events.first() {
        span.record("event_id", first.id.as_str());
    }
    let traceparent = traceparent_of(&span);
    for e in events {
        e.traceparent.clone_from(&traceparent);
    }
    span
}

/// The span of publishing `events` events of `tenant`, continuing the
/// request's `traceparent` when it has one.
fn publish(tenant: &TenantId, events: usize, headers: &axum::http::HeaderMap) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        "publish",
        tenant = tenant.as_str(),
        events,
        event_id = tracing::field::Empty
    );
    let parent = TraceContextPropagator::new().extract(&Headers(headers));
    let _ = span.set_parent(parent);
    span
}

/// The `traceparent` of `span` (for the events its publish accepts), when
/// traces are on.
pub fn traceparent_of(span: &Span) -> Option<String> {
    if !enabled() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    carrier.remove("traceparent")
}

/// The context a `traceparent` names.
fn context_of(traceparent: &str) -> opentelemetry::Context {
    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    TraceContextPropagator::new().extract(&carrier)
}

/// Makes `span` a child of the span `traceparent` names (an event's
/// publish), when there is one; before the span is entered.
fn child_of(span: Span, traceparent: Option<&str>) -> Span {
    if let Some(t) = traceparent {
        let _ = span.set_parent(context_of(t));
    }
    span
}

/// The span of fanning out a run of events, named by the first one's
/// tenant and id (the embedded worker's runs can hold several tenants'):
/// a child of the first one's publish, linked to the other publishes.
pub fn fan_out(events: &[Event]) -> Span {
    let Some(first) = events.first().filter(|_| enabled()) else {
        return Span::none();
    };
    let span = tracing::info_span!(
        "fan_out",
        tenant = first.tenant.as_str(),
        event_id = first.id.as_str(),
        events = events.len()
    );
    let span = child_of(span, first.traceparent.as_deref());
    let mut linked = std::collections::HashSet::new();
    linked.insert(first.traceparent.as_deref());
    for t in events.iter().map(|e| e.traceparent.as_deref()) {
        if let (Some(t), true) = (t, linked.insert(t)) {
            span.add_link(context_of(t).span().span_context().clone());
        }
    }
    span
}

/// The span of one attempt of a delivery of `event`, in its publish's
/// trace.
pub fn attempt(d: &Delivery, event: &Event, attempt: u32) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        "attempt",
        tenant = d.tenant.as_str(),
        subscription_id = d.subscription_id.as_str(),
        event_id = d.event_id.as_str(),
        attempt,
        status_code = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    child_of(span, event.traceparent.as_deref())
}

/// Records how an attempt came back on its span.
pub fn attempt_ended(span: &Span, result: &AttemptResult) {
    if !enabled() {
        return;
    }
    if let AttemptResult::Response { status, .. } = result {
        span.record("status_code", status);
    }
    span.record("outcome", result.outcome_class());
}

/// The `traceparent` of the current span, for a request going out.
pub fn traceparent() -> Option<String> {
    traceparent_of(&Span::current())
}
