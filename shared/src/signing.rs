//! Standard Webhooks signing (G7): secrets, the signature over
//! `{id}.{timestamp}.{body}`, and the headers every attempt carries.
//!
//! Pure: the timestamp is an argument, so the published example vector is a
//! golden test.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng as _;
use sha2::Sha256;

use crate::domain::Invalid;

const PREFIX: &str = "whsec_";

/// A signing secret: `whsec_` + base64 of 24–64 random bytes. `Debug`
/// redacts it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A fresh secret of 32 random bytes.
    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Self(key)
    }

    /// Parses `whsec_<base64>`; the key must be 24–64 bytes.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let b64 = raw
            .strip_prefix(PREFIX)
            .ok_or_else(|| Invalid("a secret starts with whsec_".into()))?;
        let key = STANDARD
            .decode(b64)
            .map_err(|_| Invalid("a secret is whsec_ followed by base64".into()))?;
        if !(24..=64).contains(&key.len()) {
            return Err(Invalid("a secret's key is 24 to 64 bytes".into()));
        }
        Ok(Self(key))
    }

    /// The `whsec_…` text, as shown to the subscription's owner.
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.0))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(whsec_…redacted)")
    }
}

/// One `v1,<base64>` signature of `{id}.{timestamp}.{body}`.
pub fn sign(secret: &Secret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&secret.0)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` value: one signature per live secret,
/// space-separated.
pub fn signature_header(secrets: &[&Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| sign(s, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The headers of one attempt, in sending order.
pub fn webhook_headers(
    secrets: &[&Secret],
    id: &str,
    timestamp: i64,
    attempt: u32,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    vec![
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        (
            "webhook-signature",
            signature_header(secrets, id, timestamp, body),
        ),
        ("webhook-attempt", attempt.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example vector published with the Standard Webhooks specification.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn signing_reproduces_the_published_example_vector() {
        let secret = Secret::parse(SECRET).unwrap();
        assert_eq!(sign(&secret, ID, TS, BODY), EXPECTED);
    }

    #[test]
    fn two_live_secrets_give_two_space_separated_signatures() {
        let old = Secret::parse(SECRET).unwrap();
        let new = Secret::generate();
        let header = signature_header(&[&new, &old], ID, TS, BODY);
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1], EXPECTED);
        assert_ne!(parts[0], EXPECTED);
    }

    #[test]
    fn secrets_round_trip_and_bad_ones_are_refused() {
        let s = Secret::generate();
        assert_eq!(Secret::parse(&s.expose()).unwrap(), s);
        assert!(Secret::parse("abc").is_err());
        assert!(Secret::parse("whsec_!!!").is_err());
        assert!(Secret::parse(&format!("whsec_{}", STANDARD.encode([0u8; 16]))).is_err());
        assert!(!format!("{s:?}").contains(&s.expose()[6..]));
    }
}
