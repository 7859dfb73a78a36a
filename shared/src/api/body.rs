//! Request bodies at the edge: a JSON object whose members are kept as the
//! caller's own JSON text (`RawValue`, borrowed from the body) until a
//! handler asks for one as a type. So a field meant to travel as published
//! (an event's `data`, G13) is never parsed into numbers and maps and
//! written out again, and malformed, unknown, duplicate, missing and
//! mistyped fields are each named (G11) before any state is touched.
//! `null` is a value like any other: a member is accepted as `null` only
//! where the OpenAPI document says so (an absent optional member is left
//! out, not sent as `null`).

use std::collections::BTreeMap;
use std::fmt;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::error::ApiError;

/// The largest request body accepted (256 KiB).
pub const MAX_BODY: usize = 256 * 1024;

/// The deepest nesting of arrays and objects accepted in a value kept as
/// published (an event's `data`). The body a receiver gets wraps it in one
/// more object, and stays within the 127 levels that common strict parsers
/// (serde_json's default among them) accept.
pub const MAX_DEPTH: usize = 126;

/// Which members a body may have and which it must have.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// Every member accepted.
    pub allowed: &'static [&'static str],
    /// The members that must be present.
    pub required: &'static [&'static str],
}

/// A JSON object body whose members were checked against its [`Fields`].
pub struct Body<'a> {
    members: Vec<(String, &'a RawValue)>,
}

/// The members of a JSON object in the order given, values unparsed.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    out.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(ObjectVisitor)
    }
}

/// A JSON number's value when it is a whole number within `i64`.
fn whole(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
    })
}

/// The body's bytes, or 413 over [`MAX_BODY`].
pub fn bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    bytes_up_to(body, MAX_BODY)
}

/// The body's bytes, or 413 over `limit` (the route's body limit).
pub fn bytes_up_to(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ApiError> {
    let bytes = body.map_err(|rej| {
        if rej.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(limit)
        } else {
            ApiError::bad_request("body", "the body could not be read")
        }
    })?;
    if bytes.len() > limit {
        return Err(ApiError::too_large(limit));
    }
    Ok(bytes)
}

/// Parses `bytes` as one JSON object with only `fields.allowed` members,
/// each at most once, and every one of `fields.required`.
pub fn object<'a>(bytes: &'a [u8], fields: &Fields) -> Result<Body<'a>, ApiError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ApiError::bad_request("body", format!("the body is not UTF-8: {e}")))?;
    let Members(members) = serde_json::from_str(text).map_err(|e| {
        if e.classify() == serde_json::error::Category::Data {
            ApiError::bad_request("body", "the body must be a JSON object")
        } else {
            ApiError::bad_request("body", format!("malformed JSON: {e}"))
        }
    })?;
    for (n, (key, _)) in members.iter().enumerate() {
        if !fields.allowed.contains(&key.as_str()) {
            return Err(ApiError::bad_request(
                key.clone(),
                format!(
                    "unknown field `{key}`; allowed: {}",
                    fields.allowed.join(", ")
                ),
            ));
        }
        if members[..n].iter().any(|(k, _)| k == key) {
            return Err(ApiError::bad_request(
                key.clone(),
                format!("`{key}` is given more than once"),
            ));
        }
    }
    let body = Body { members };
    if let Some(missing) = fields.required.iter().find(|k| !body.has(k)) {
        return Err(ApiError::bad_request(
            *missing,
            format!("`{missing}` is required"),
        ));
    }
    Ok(body)
}

impl<'a> Body<'a> {
    /// Whether the member is present.
    pub fn has(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// A member's JSON text as given, unchecked.
    pub(super) fn raw(&self, key: &str) -> Option<&'a RawValue> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A member parsed as `T`; a value that is not one is a 400 saying
    /// what `key` must be.
    fn typed<T: DeserializeOwned>(&self, key: &str, what: &str) -> Result<Option<T>, ApiError> {
        self.raw(key)
            .map(|raw| {
                serde_json::from_str::<T>(raw.get())
                    .map_err(|_| ApiError::bad_request(key, format!("`{key}` must be {what}")))
            })
            .transpose()
    }

    /// A string member (`None` when absent; `null` is refused).
    pub fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        self.typed(key, "a string")
    }

    /// A boolean member (`None` when absent; `null` is refused).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.typed(key, "true or false")
    }

    /// A required string member.
    pub fn required_string(&self, key: &str) -> Result<String, ApiError> {
        self.string(key)?
            .ok_or_else(|| ApiError::bad_request(key, format!("`{key}` is required")))
    }

    /// A member that is a string or `null` (`None` when absent).
    pub fn nullable_string(&self, key: &str) -> Result<Option<Option<String>>, ApiError> {
        self.typed(key, "a string or null")
    }

    /// An integer member (`None` when absent; `null` is refused). As in
    /// JSON Schema, a number with a zero fraction (`8.0`, `1e2`) is an
    /// integer.
    pub fn integer(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.nullable_integer(key)? {
            Some(None) => Err(ApiError::bad_request(
                key,
                format!("`{key}` must be an integer"),
            )),
            other => Ok(other.flatten()),
        }
    }

    /// A member that is an integer or `null` (`None` when absent).
    pub fn nullable_integer(&self, key: &str) -> Result<Option<Option<i64>>, ApiError> {
        let value: Option<Value> = self.typed(key, "an integer or null")?;
        value
            .map(|v| match v {
                Value::Null => Ok(None),
                Value::Number(n) => whole(&n).map(Some).ok_or_else(|| {
                    ApiError::bad_request(key, format!("`{key}` must be an integer or null"))
                }),
                _ => Err(ApiError::bad_request(
                    key,
                    format!("`{key}` must be an integer or null"),
                )),
            })
            .transpose()
    }

    /// An array of strings (`None` when absent; `null` is refused).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ApiError> {
        self.typed(key, "an array of strings")
    }

    /// An object of string values (`None` when absent; `null` is refused).
    pub fn string_map(&self, key: &str) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        self.typed(key, "an object of strings")
    }

    /// An object of string values or `null` (`None` when absent).
    pub fn nullable_string_map(
        &self,
        key: &str,
    ) -> Result<Option<Option<BTreeMap<String, String>>>, ApiError> {
        self.typed(key, "an object of strings or null")
    }

    /// Any JSON value, as the caller wrote it: checked to nest at most
    /// [`MAX_DEPTH`] levels and to escape no lone surrogate (422 naming
    /// `key` otherwise), never parsed into values.
    pub fn json_text(&self, key: &str) -> Result<Option<&'a RawValue>, ApiError> {
        self.raw(key)
            .map(|raw| {
                check_json_text(raw.get(), MAX_DEPTH)
                    .map(|()| raw)
                    .map_err(|why| ApiError::invalid(key, format!("`{key}` {why}")))
            })
            .transpose()
    }
}

pub use super::json_text::check_json_text;

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_level_is_refused() {
        assert!(check_json_text(&nested(MAX_DEPTH), MAX_DEPTH).is_ok());
        let err = check_json_text(&nested(MAX_DEPTH + 1), MAX_DEPTH).unwrap_err();
        assert!(err.contains("deeper"), "{err}");
        // Objects count as arrays do; brackets inside strings do not count.
        let objects = format!("{}1{}", r#"{"a":"#.repeat(3), "}".repeat(3));
        assert!(check_json_text(&objects, 3).is_ok());
        assert!(check_json_text(&objects, 2).is_err());
        assert!(check_json_text(r#"["[[[[", "\"[[["]"#, 1).is_ok());
    }

    #[test]
    fn a_body_at_the_limit_parses_with_serde_jsons_default_limit() {
        let body = format!(
            r#"{{"type":"t","timestamp":"x","data":{}}}"#,
            nested(MAX_DEPTH)
        );
        serde_json::from_str::<serde_json::Value>(&body).expect("within the default limit");
        let over = format!(r#"{{"data":{}}}"#, nested(MAX_DEPTH + 1));
        assert!(serde_json::from_str::<serde_json::Value>(&over).is_err());
    }

    #[test]
    fn lone_surrogate_escapes_are_refused_and_pairs_pass() {
        for ok in [
            r#""\ud83d\ude00""#,
            r#""\u00e9\"\/\\""#,
            r#"{"\uD83D\uDE00":"\uffff"}"#,
        ] {
            assert!(check_json_text(ok, 4).is_ok(), "{ok}");
        }
        for bad in [
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\ud83dx""#,
            r#""\ud83d\u0041""#,
            r#"{"\udc00":1}"#,
        ] {
            assert!(check_json_text(bad, 4).is_err(), "{bad}");
        }
    }

    #[test]
    fn null_is_refused_except_where_a_member_is_nullable() {
        const ANY: Fields = Fields {
            allowed: &["s", "l", "m", "d"],
            required: &[],
        };
        let body = object(br#"{"s":null,"l":null,"m":null,"d":null}"#, &ANY).unwrap();
        assert_eq!(body.string("s").unwrap_err().status().as_u16(), 400);
        assert_eq!(body.strings("l").unwrap_err().field_name(), Some("l"));
        assert_eq!(body.string_map("m").unwrap_err().field_name(), Some("m"));
        assert_eq!(body.nullable_string("d").unwrap(), Some(None));
        let body = object(br#"{"d":"x"}"#, &ANY).unwrap();
        assert_eq!(body.nullable_string("d").unwrap(), Some(Some("x".into())));
        assert_eq!(body.string("s").unwrap(), None);
    }

    const PUBLISH: Fields = Fields {
        allowed: &["type", "data"],
        required: &["type"],
    };

    #[test]
    fn members_keep_their_text_and_duplicates_unknowns_and_non_objects_are_named() {
        let text =
            br#"{"type":"t", "data" : {"z":1, "big":123456789012345678901234567890,"f":1.10} }"#;
        let body = object(text, &PUBLISH).unwrap();
        assert_eq!(
            body.json_text("data").unwrap().unwrap().get(),
            r#"{"z":1, "big":123456789012345678901234567890,"f":1.10}"#
        );
        let field = |t: &[u8]| {
            let e = object(t, &PUBLISH).err().expect("refused");
            (e.status().as_u16(), e.field_name().map(str::to_owned))
        };
        assert_eq!(
            field(br#"{"type":"a","type":"b"}"#),
            (400, Some("type".into()))
        );
        assert_eq!(field(br#"{"type":"a","x":1}"#), (400, Some("x".into())));
        assert_eq!(field(br#"[1]"#), (400, Some("body".into())));
        assert_eq!(field(br#"{"type":"a""#), (400, Some("body".into())));
        assert_eq!(field(br#"{"data":1}"#), (400, Some("type".into())));
        assert_eq!(field(b"{\"type\":\"\xff\"}"), (400, Some("body".into())));
    }
}
