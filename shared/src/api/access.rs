//! The api-keys and portal-sessions routes (G14): the operator makes,
//! lists and revokes a tenant's keys (a key's text is shown once, at
//! creation), and the operator or a tenant key mints portal sessions.
//! Who may call which is the auth middleware's ([`super::auth`]).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::body::{self, Fields};
use super::error::ApiError;
use super::input::{self, rfc3339};
use super::AppState;
use crate::access::{ApiKey, Principal, DEFAULT_SESSION_SECS, SESSION_SECS};
use crate::domain::KeyId;

/// The members of a new key.
pub(super) const CREATE_KEY: Fields = Fields {
    allowed: &["name", "read_only"],
    required: &["name"],
};

/// The members of a new portal session.
pub(super) const CREATE_SESSION: Fields = Fields {
    allowed: &["read_only", "expires_in", "theme", "brand_color"],
    required: &[],
};

/// The portal's looks a link may ask for: `theme` (`light`, `dark`, or
/// `auto` to follow the reader's system) and `brand_color` (`#rrggbb`),
/// checked here and carried in the link's query, where the portal reads
/// them (its stylesheet's custom properties; no inline script or style).
fn looks(body: &body::Body<'_>) -> Result<String, ApiError> {
    let mut query = Vec::new();
    if let Some(theme) = body.string("theme")? {
        if !matches!(theme.as_str(), "light" | "dark" | "auto") {
            return Err(ApiError::invalid("theme", "`theme` is light, dark or auto"));
        }
        query.push(format!("theme={theme}"));
    }
    if let Some(color) = body.string("brand_color")? {
        let hex = color.strip_prefix('#').unwrap_or("");
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::invalid(
                "brand_color",
                "`brand_color` is a colour as #rrggbb (#2747b5)",
            ));
        }
        query.push(format!("brand={}", hex.to_ascii_lowercase()));
    }
    Ok(if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    })
}

/// The longest name a key may have, in bytes.
const MAX_NAME: usize = 200;

fn shown(key: &ApiKey) -> Value {
    json!({
        "id": key.id.as_str(),
        "name": key.name,
        "read_only": key.read_only,
        "created_at": rfc3339(key.created_at),
    })
}

pub(super) async fn create_key(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, super::Secret), ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &CREATE_KEY)?;
    let name = body.required_string("name")?;
    if name.trim().is_empty() || name.len() > MAX_NAME {
        return Err(ApiError::invalid(
            "name",
            format!("`name` must be 1 to {MAX_NAME} bytes"),
        ));
    }
    let read_only = body.boolean("read_only")?.unwrap_or(false);
    let (key, text) = state.engine.create_key(&tenant, name, read_only).await?;
    let mut shown = shown(&key);
    shown["key"] = json!(text);
    Ok((StatusCode::CREATED, super::no_store(shown)))
}

pub(super) async fn list_keys(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let keys = state.engine.keys(&tenant).await?;
    Ok(Json(
        json!({ "items": keys.iter().map(shown).collect::<Vec<_>>() }),
    ))
}

pub(super) async fn revoke_key(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let gone = || ApiError::not_found("api key").field("id");
    let id = KeyId::parse(&id).map_err(|_| gone())?;
    match state.engine.revoke_key(&tenant, &id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(gone()),
    }
}

/// Where the portal is reached: the configured public URL, or the
/// request's own scheme and host.
fn portal_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.engine.config.public_url {
        return url.clone();
    }
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let proto = text("x-forwarded-proto").unwrap_or("http");
    let host = text(header::HOST.as_str()).unwrap_or("localhost");
    format!("{proto}://{host}")
}

pub(super) async fn create_session(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, super::Secret), ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes(body)?;
    // The body is optional: none is `{}`.
    let bytes = if bytes.is_empty() {
        Bytes::from_static(b"{}")
    } else {
        bytes
    };
    let body = body::object(&bytes, &CREATE_SESSION)?;
    let read_only = body.boolean("read_only")?.unwrap_or(false);
    let secs = body.integer("expires_in")?.unwrap_or(DEFAULT_SESSION_SECS);
    if !(SESSION_SECS.0..=SESSION_SECS.1).contains(&secs) {
        return Err(ApiError::invalid(
            "expires_in",
            format!(
                "`expires_in` must be {} to {} seconds",
                SESSION_SECS.0, SESSION_SECS.1
            ),
        ));
    }
    let looks = looks(&body)?;
    let minted_by = match &who {
        Principal::Tenant { key, .. } => key.as_ref(),
        Principal::Operator => None,
    };
    let (token, expires_at) = state
        .engine
        .mint_session(&tenant, (read_only, secs), minted_by)
        .await?;
    let url = format!(
        "{}/portal/{looks}#session={token}",
        portal_base(&state, &headers)
    );
    let minted = json!({ "url": url, "expires_at": rfc3339(expires_at) });
    Ok((StatusCode::CREATED, super::no_store(minted)))
}
