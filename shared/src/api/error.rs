//! API errors as `application/problem+json`: the one place that maps an
//! error to an HTTP status. Callers get a title, a detail and the field at
//! fault; storage causes go to the log, never to the caller.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::error;

use crate::access::Unrecognized;
use crate::ports::StoreError;
use crate::telemetry::Chain;

/// Seconds a caller is asked to wait (`Retry-After`) after a 503.
pub const RETRY_AFTER: u64 = 5;

/// An error answered to an API caller.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    slug: &'static str,
    title: &'static str,
    detail: String,
    field: Option<String>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(
        status: StatusCode,
        slug: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            slug,
            title,
            detail: detail.into(),
            field: None,
            retry_after: None,
        }
    }

    /// Names the field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// 400: the request's shape is wrong (malformed JSON, unknown or missing
    /// field, wrong type, bad cursor or query).
    pub fn bad_request(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad request",
            detail,
        )
        .field(field)
    }

    /// 422: a field has the right type but a value that cannot be used.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-field",
            "Invalid field",
            detail,
        )
        .field(field)
    }

    /// 401: no credential, or one that speaks for nobody (the detail
    /// says which).
    pub fn unauthorized(why: Unrecognized) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            why.detail(),
        )
    }

    /// 403: the credential reaches this tenant but may not do this (a
    /// read-only one writing, a tenant's own managing its keys).
    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Forbidden",
            "this credential may not do this",
        )
    }

    /// 404: no such resource for this tenant.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            format!("no such {what}"),
        )
    }

    /// 409: the request conflicts with existing state.
    pub fn conflict(field: Option<&str>, detail: impl Into<String>) -> Self {
        let e = Self::new(StatusCode::CONFLICT, "conflict", "Conflict", detail);
        match field {
            Some(f) => e.field(f),
            None => e,
        }
    }

    /// 413: the body is over the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "Payload too large",
            format!("the body is over {} KiB", limit / 1024),
        )
        .field("body")
    }

    /// 408: the request body did not arrive within `limit`.
    pub fn request_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "request-timeout",
            "Request timeout",
            format!(
                "the body did not arrive within {} s; send it again",
                limit.as_secs_f64()
            ),
        )
        .field("body")
    }

    /// 503: storage cannot take the request for now (a full disk, say);
    /// nothing changed, and the same request can be sent again after
    /// [`RETRY_AFTER`] seconds. The cause is logged, not answered.
    pub fn unavailable(cause: impl std::fmt::Display) -> Self {
        error!(error = %cause, "storage unavailable");
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            "storage cannot take this request now; nothing was changed, send it again later",
        );
        e.retry_after = Some(RETRY_AFTER);
        e
    }

    /// 500: something failed inside; the cause is logged, not answered.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        error!(error = %cause, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "the request could not be completed; it is safe to retry",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The field at fault, if one is named.
    pub fn field_name(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The same problem, naming `to` where it named `from` (a member
    /// passed on under another name).
    pub fn renamed(self, from: &str, to: &str) -> Self {
        if self.field_name() == Some(from) {
            self.field(to)
        } else {
            self
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(detail) => Self::conflict(None, detail),
            e @ StoreError::Unavailable(..) => Self::unavailable(Chain(&e)),
            other => Self::internal(Chain(&other)),
        }
    }
}

impl ApiError {
    /// The problem document (RFC 9457) this error answers with.
    pub fn problem(&self) -> serde_json::Value {
        let mut body = json!({
            "type": format!("urn:hooklane:problem:{}", self.slug),
            "title": self.title,
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        if let Some(f) = &self.field {
            body["field"] = json!(f);
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.problem();
        let mut resp = (self.status, body.to_string()).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}
