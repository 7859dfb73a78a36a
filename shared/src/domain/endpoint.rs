//! A subscription's endpoint options (`../shared/API.md` "Endpoint
//! options"): static headers and an `Authorization` sent on every attempt
//! and on the re-enable probe, and the content filter
//! ([`super::ContentFilter`]). Parsed at the edge, stored as one JSON
//! document beside the subscription ([`OptionsRecord`]: a column on
//! SQLite, an attribute of the subscription's item on DynamoDB, never in
//! a queue message), shown by reads without the password or token.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{ContentFilter, Invalid};

/// The most static headers a subscription has.
pub const MAX_HEADERS: usize = 20;
/// The longest header name, in bytes.
pub const MAX_HEADER_NAME: usize = 256;
/// The longest header value, in bytes.
pub const MAX_HEADER_VALUE: usize = 1024;
/// The longest username, password or token, in bytes.
pub const MAX_CREDENTIAL: usize = 4096;

/// Header names hooklane sets itself, or that would change how the request
/// travels: refused as static headers (names are compared in lower case;
/// `webhook-*` and `content-*` are refused by prefix).
const RESERVED: &[&str] = &[
    "host",
    "user-agent",
    "authorization",
    "connection",
    "transfer-encoding",
    "te",
];

/// How a subscription's requests authenticate to its endpoint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum EndpointAuth {
    /// `Authorization: Basic base64(username:password)`.
    Basic {
        /// The username (shown by reads).
        username: String,
        /// The password (never shown).
        password: String,
    },
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// The token (never shown).
        token: String,
    },
}

impl std::fmt::Debug for EndpointAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown().to_string())
    }
}

/// Checks one credential: 1 to [`MAX_CREDENTIAL`] bytes of visible ASCII.
fn credential(what: &str, v: &str) -> Result<(), Invalid> {
    if v.is_empty() || v.len() > MAX_CREDENTIAL || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Invalid(format!(
            "{what} is 1 to {MAX_CREDENTIAL} bytes of visible ASCII"
        )));
    }
    Ok(())
}

impl EndpointAuth {
    /// Parses `auth` as given (`{"type": "basic", "username", "password"}`
    /// or `{"type": "bearer", "token"}`).
    pub fn parse(v: &serde_json::Value) -> Result<Self, Invalid> {
        let auth: Self = serde_json::from_value(v.clone()).map_err(|_| {
            Invalid(
                "auth is null, {\"type\": \"basic\", \"username\", \"password\"} or \
                 {\"type\": \"bearer\", \"token\"}"
                    .into(),
            )
        })?;
        match &auth {
            Self::Basic { username, password } => {
                credential("username", username)?;
                if username.contains(':') {
                    return Err(Invalid("a basic auth username has no `:`".into()));
                }
                credential("password", password)?;
            }
            Self::Bearer { token } => credential("token", token)?,
        }
        Ok(auth)
    }

    /// The `Authorization` header's value.
    pub fn header_value(&self) -> String {
        match self {
            Self::Basic { username, password } => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            ),
            Self::Bearer { token } => format!("Bearer {token}"),
        }
    }

    /// What reads show: the type and the username, never the secret.
    pub fn shown(&self) -> serde_json::Value {
        match self {
            Self::Basic { username, .. } => {
                serde_json::json!({"type": "basic", "username": username})
            }
            Self::Bearer { .. } => serde_json::json!({"type": "bearer"}),
        }
    }

    /// The secret, and the encoded credentials made of it, each as it is
    /// and as JSON escapes it: what a receiver's answer may echo.
    fn secret_forms(&self) -> Vec<String> {
        let secrets = match self {
            Self::Basic { username, password } => vec![
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}")),
                password.clone(),
            ],
            Self::Bearer { token } => vec![token.clone()],
        };
        let mut forms = Vec::new();
        for s in secrets {
            let json = serde_json::to_string(&s).unwrap_or_default();
            let json = json.trim_matches('"').to_owned();
            forms.push(json.replace('/', "\\/"));
            forms.push(json);
            forms.push(s);
        }
        forms.sort();
        forms.dedup();
        // Longest first: a form inside another is replaced with it.
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms
    }

    /// `excerpt` (the start of a receiver's answer, cut at 1 KiB) with the
    /// secret replaced by `[redacted]` wherever it is echoed: whole, JSON
    /// escaped, or begun at the end where the answer was cut.
    pub fn redact(&self, excerpt: &str) -> String {
        const REDACTED: &str = "[redacted]";
        let forms = self.secret_forms();
        let mut out = excerpt.to_owned();
        for form in &forms {
            out = out.replace(form.as_str(), REDACTED);
        }
        for form in &forms {
            let cut = (3..form.len()).rev().find(|&n| out.ends_with(&form[..n]));
            if let Some(n) = cut {
                out.truncate(out.len() - n);
                out.push_str(REDACTED);
                break;
            }
        }
        out
    }
}

/// Parses `headers` as given: at most [`MAX_HEADERS`] pairs, names HTTP
/// tokens and not reserved, values visible ASCII (and spaces inside) of
/// at most [`MAX_HEADER_VALUE`] bytes.
pub fn parse_headers(map: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Invalid> {
    if map.len() > MAX_HEADERS {
        return Err(Invalid(format!("at most {MAX_HEADERS} headers")));
    }
    let token = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in map {
        if name.is_empty() || name.len() > MAX_HEADER_NAME || !name.bytes().all(token) {
            return Err(Invalid(format!(
                "`{name}` is not an HTTP header name of at most {MAX_HEADER_NAME} bytes"
            )));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED.contains(&lower.as_str())
            || lower.starts_with("webhook-")
            || lower.starts_with("content-")
        {
            return Err(Invalid(format!(
                "`{name}` is set by hooklane (webhook-*, content-*, host, user-agent, \
                 authorization, connection, transfer-encoding and te are reserved)"
            )));
        }
        if !seen.insert(lower) {
            return Err(Invalid(format!("`{name}` is given twice")));
        }
        let visible = value.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
        if value.len() > MAX_HEADER_VALUE || !visible || value.trim() != value {
            return Err(Invalid(format!(
                "the value of `{name}` is at most {MAX_HEADER_VALUE} bytes of visible ASCII \
                 (spaces inside only)"
            )));
        }
    }
    Ok(map.clone())
}

/// A subscription's endpoint options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointOptions {
    /// The content filter, when it has one.
    pub filter: Option<ContentFilter>,
    /// Static headers sent on every attempt.
    pub headers: BTreeMap<String, String>,
    /// How requests authenticate, when they do.
    pub auth: Option<EndpointAuth>,
}

/// The stored form of [`EndpointOptions`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OptionsRecord {
    /// The filter's JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Static headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The auth, with its secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<EndpointAuth>,
}

impl EndpointOptions {
    /// Whether it has no option set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The stored document (`None` when no option is set).
    pub fn to_stored(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let rec = OptionsRecord {
            filter: self.filter.as_ref().map(|f| f.text().to_owned()),
            headers: self.headers.clone(),
            auth: self.auth.clone(),
        };
        serde_json::to_string(&rec).ok()
    }

    /// The options back from their stored document.
    pub fn from_stored(text: Option<&str>) -> Result<Self, Invalid> {
        let Some(text) = text else {
            return Ok(Self::default());
        };
        let bad = || Invalid("stored endpoint options do not parse".into());
        let rec: OptionsRecord = serde_json::from_str(text).map_err(|_| bad())?;
        Ok(Self {
            filter: rec
                .filter
                .as_deref()
                .map(ContentFilter::parse)
                .transpose()
                .map_err(|_| bad())?,
            headers: rec.headers,
            auth: rec.auth,
        })
    }

    /// The headers an attempt carries beside hooklane's own: the static
    /// ones, then `Authorization`.
    pub fn request_headers(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(
                self.auth
                    .as_ref()
                    .map(|a| ("authorization".to_owned(), a.header_value())),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Result<BTreeMap<String, String>, Invalid> {
        parse_headers(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn reserved_bad_and_oversize_headers_are_refused() {
        assert!(headers(&[("X-Api-Key", "k 1"), ("x-tenant", "acme")]).is_ok());
        for (name, value) in [
            ("Webhook-Id", "x"),
            ("content-type", "x"),
            ("Authorization", "x"),
            ("HOST", "x"),
            ("te", "x"),
            ("bad name", "x"),
            ("", "x"),
            (&"n".repeat(MAX_HEADER_NAME + 1), "x"),
            ("x-a", "caf\u{e9}"),
            ("x-a", "line\nbreak"),
            ("x-a", " padded"),
        ] {
            assert!(headers(&[(name, value)]).is_err(), "{name}: {value:?}");
        }
        let long = "v".repeat(MAX_HEADER_VALUE + 1);
        assert!(headers(&[("x-a", long.as_str())]).is_err());
        let many: Vec<(String, String)> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(parse_headers(&many.into_iter().collect()).is_err());
        assert!(
            headers(&[("X-A", "1"), ("x-a", "2")]).is_err(),
            "one name twice"
        );
    }

    #[test]
    fn auth_is_sent_whole_and_shown_without_its_secret() {
        let basic = EndpointAuth::parse(
            &serde_json::json!({"type": "basic", "username": "hook", "password": "s3cret"}),
        )
        .unwrap();
        assert_eq!(basic.header_value(), "Basic aG9vazpzM2NyZXQ=");
        assert_eq!(
            basic.shown(),
            serde_json::json!({"type": "basic", "username": "hook"})
        );
        assert!(!format!("{basic:?}").contains("s3cret"));
        let bearer =
            EndpointAuth::parse(&serde_json::json!({"type": "bearer", "token": "tok"})).unwrap();
        assert_eq!(bearer.header_value(), "Bearer tok");
        assert_eq!(bearer.shown(), serde_json::json!({"type": "bearer"}));
        // Echoed whole, JSON-escaped, or cut off at the excerpt's end.
        let tricky = EndpointAuth::Bearer {
            token: "a/b\"c-0123456789".into(),
        };
        for echo in [
            "saw a/b\"c-0123456789 ok",
            r#"{"seen":"a\/b\"c-0123456789"}"#,
            r#"{"seen":"a/b\"c-0123456789"}"#,
            "cut at a/b\"c-01",
        ] {
            let shown = tricky.redact(echo);
            assert!(shown.contains("[redacted]"), "{echo} → {shown}");
            assert!(!shown.contains("c-01"), "{echo} → {shown}");
        }
        assert_eq!(tricky.redact("nothing here"), "nothing here");
        let long = "x".repeat(2000);
        let shown = basic.redact("Basic aG9vazpzM2NyZXQ");
        assert!(!shown.contains("aG9vazpzM2"), "{shown}");
        assert_eq!(
            EndpointAuth::Bearer {
                token: long.clone()
            }
            .redact(&long[..1024]),
            "[redacted]"
        );
        for bad in [
            serde_json::json!({"type": "oauth2"}),
            serde_json::json!({"type": "basic", "username": "a:b", "password": "p"}),
            serde_json::json!({"type": "basic", "username": "a"}),
            serde_json::json!({"type": "bearer", "token": ""}),
            serde_json::json!({"type": "bearer", "token": "has space"}),
            serde_json::json!("bearer x"),
        ] {
            assert!(EndpointAuth::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_go_to_their_stored_form_and_back() {
        assert_eq!(EndpointOptions::default().to_stored(), None);
        let opts = EndpointOptions {
            filter: Some(
                ContentFilter::parse(r#"{"data":{"n":{"$gt":18446744073709551616}}}"#).unwrap(),
            ),
            headers: headers(&[("x-a", "1")]).unwrap(),
            auth: Some(EndpointAuth::Bearer { token: "t".into() }),
        };
        let stored = opts.to_stored().unwrap();
        assert!(
            stored.contains("18446744073709551616"),
            "the filter's text as given"
        );
        assert_eq!(EndpointOptions::from_stored(Some(&stored)).unwrap(), opts);
        let sent: Vec<(String, String)> = opts.request_headers().collect();
        assert_eq!(
            sent,
            [
                ("x-a".into(), "1".into()),
                ("authorization".into(), "Bearer t".into())
            ]
        );
    }
}
