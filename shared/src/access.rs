//! Who a request speaks for (G14): the operator, or one tenant through a
//! tenant key or a portal session, and what each may do. The API's auth
//! middleware turns a bearer token into a [`Principal`] here; the store
//! keeps keys by hash only ([`crate::ports::Access`]).
//!
//! - A tenant key is `hlk_` and 32 random bytes (base64url). The store
//!   keeps its SHA-256 and looks it up by that: the key's entropy makes a
//!   slow hash needless, and a request costs one read.
//! - A portal session is `hlp_{payload}.{mac}`: the payload (base64url
//!   JSON) names the tenant, the read-only flag and the expiry, the MAC is
//!   HMAC-SHA256 under the portal key (`HOOKLANE_PORTAL_KEY`, or one
//!   generated once and kept in the store), so any process of a deployment
//!   checks it without a read, and it ends at its expiry. A session a
//!   tenant key minted names that key and ends with it (one read per
//!   request checks the key is still there); one the operator minted is
//!   not revoked by itself: configuring another portal key ends them all.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::domain::{KeyId, TenantId};

/// The prefix of a tenant key.
pub const KEY_PREFIX: &str = "hlk_";
/// The prefix of a portal session token.
pub const SESSION_PREFIX: &str = "hlp_";
/// The shortest and longest a portal session may last, in seconds.
pub const SESSION_SECS: (i64, i64) = (60, 604_800);
/// A session's life when the request names none, in seconds.
pub const DEFAULT_SESSION_SECS: i64 = 3600;

/// Who a request speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The operator token (or, on AWS, IAM or an operator JWT): every
    /// route of every tenant.
    Operator,
    /// A tenant key or a portal session: its own tenant's routes only.
    Tenant {
        /// The tenant it reaches.
        tenant: TenantId,
        /// Whether it may only read.
        read_only: bool,
        /// Whether it is a portal session (which cannot mint sessions).
        session: bool,
        /// The tenant key it is, or that minted the session.
        key: Option<KeyId>,
    },
}

/// What a principal may do with a route of `tenant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Allowed,
    /// Not its tenant: answered as if the route did not exist (404).
    Elsewhere,
    /// Its tenant, but not this (403).
    Forbidden,
}

/// The part of a tenant's routes a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// A read (`GET`, `HEAD`), but for revealing a secret.
    Read,
    /// A write (every other method), and revealing a secret.
    Write,
    /// The api-keys routes (operator only).
    Keys,
    /// Minting a portal session (operator or a tenant key that may write).
    Sessions,
}

impl Principal {
    /// What this principal may do with a route of `tenant` of this kind.
    pub fn may(&self, tenant: &TenantId, kind: RouteKind) -> Verdict {
        let Principal::Tenant {
            tenant: own,
            read_only,
            session,
            ..
        } = self
        else {
            return Verdict::Allowed;
        };
        if own != tenant {
            return Verdict::Elsewhere;
        }
        match kind {
            RouteKind::Read => Verdict::Allowed,
            RouteKind::Keys => Verdict::Forbidden,
            RouteKind::Sessions if *session => Verdict::Forbidden,
            RouteKind::Write | RouteKind::Sessions if *read_only => Verdict::Forbidden,
            RouteKind::Write | RouteKind::Sessions => Verdict::Allowed,
        }
    }
}

/// A tenant key as stored and listed (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Its id (`key_…`).
    pub id: KeyId,
    /// The tenant it reaches.
    pub tenant: TenantId,
    /// The operator's name for it.
    pub name: String,
    /// Whether it may only read.
    pub read_only: bool,
    /// When it was created.
    pub created_at: OffsetDateTime,
}

/// A new key: the text shown once, and the hash the store keeps.
pub fn new_key() -> (String, String) {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let key = format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    let hash = key_hash(&key);
    (key, hash)
}

/// The hash a key is stored and found by (hex SHA-256).
pub fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new portal key (32 random bytes), for a store that has none yet.
pub fn new_portal_key() -> Vec<u8> {
    let mut bytes = vec![0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// What a portal session token carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The tenant it reaches.
    #[serde(rename = "t")]
    pub tenant: String,
    /// Whether it may only read.
    #[serde(rename = "ro")]
    pub read_only: bool,
    /// When it ends (unix seconds).
    #[serde(rename = "exp")]
    pub expires: i64,
    /// The tenant key that minted it, when one did: it ends with the key.
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    pub minted_by: Option<String>,
}

/// Why a session token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a token this key signed (tampered, malformed, another key).
    Invalid,
    /// Past its expiry.
    Expired,
}

/// Why a request speaks for nobody (its 401 says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrecognized {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header of another scheme than `Bearer`.
    NotBearer,
    /// A bearer token that is not the API token.
    WrongToken,
    /// The operator's token where only tenant credentials are taken.
    OperatorHere,
    /// A tenant key that is not (or no longer) issued.
    UnknownKey,
    /// A portal session not signed by this deployment's portal key.
    Session(Refused),
    /// A portal session whose minting key was revoked.
    SessionKeyRevoked,
}

impl Unrecognized {
    /// The 401's detail, in the user's words.
    pub fn detail(self) -> &'static str {
        match self {
            Self::Missing => "send Authorization: Bearer <token>",
            Self::NotBearer => "the Authorization header must use the Bearer scheme: Bearer <token>",
            Self::WrongToken => "the bearer token is not this deployment's API token",
            Self::OperatorHere => {
                "the portal's API takes a tenant key (hlk_…) or a portal session (hlp_…), not the API token"
            }
            Self::UnknownKey => "the tenant key is not known: it was revoked, or never issued here",
            Self::Session(Refused::Invalid) => {
                "the portal session is not valid (altered, or signed with another portal key)"
            }
            Self::Session(Refused::Expired) => "the portal session has expired: ask for a new portal link",
            Self::SessionKeyRevoked => "the tenant key that made this portal session was revoked",
        }
    }
}

fn mac(key: &[u8], payload: &str) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(payload.as_bytes());
    mac
}

/// A signed session token for `session`.
pub fn sign_session(key: &[u8], session: &Session) -> String {
    let json = serde_json::to_vec(session).expect("a session serializes");
    let payload = URL_SAFE_NO_PAD.encode(json);
    let tag = URL_SAFE_NO_PAD.encode(mac(key, &payload).finalize().into_bytes());
    format!("{SESSION_PREFIX}{payload}.{tag}")
}

/// The session a token carries, if `key` signed it and it has not expired
/// at `now` (the MAC is checked in constant time before anything is read).
pub fn verify_session(key: &[u8], token: &str, now: OffsetDateTime) -> Result<Session, Refused> {
    let (payload, tag) = token
        .strip_prefix(SESSION_PREFIX)
        .and_then(|t| t.split_once('.'))
        .ok_or(Refused::Invalid)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Refused::Invalid)?;
    mac(key, payload)
        .verify_slice(&tag)
        .map_err(|_| Refused::Invalid)?;
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| Refused::Invalid)?;
    let session: Session = serde_json::from_slice(&json).map_err(|_| Refused::Invalid)?;
    if session.expires <= now.unix_timestamp() {
        return Err(Refused::Expired);
    }
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    #[test]
    fn a_tenant_principal_reaches_its_own_tenant_and_reads_only_when_read_only() {
        let (a, b) = (tenant("a"), tenant("b"));
        let key = |read_only, session| Principal::Tenant {
            tenant: a.clone(),
            read_only,
            session,
            key: None,
        };
        use RouteKind::*;
        use Verdict::*;
        for kind in [Read, Write, Keys, Sessions] {
            assert_eq!(Principal::Operator.may(&b, kind), Allowed);
            assert_eq!(key(false, false).may(&b, kind), Elsewhere);
        }
        let writer = key(false, false);
        assert_eq!(
            [Read, Write, Keys, Sessions].map(|k| writer.may(&a, k)),
            [Allowed, Allowed, Forbidden, Allowed]
        );
        let reader = key(true, false);
        assert_eq!(
            [Read, Write, Keys, Sessions].map(|k| reader.may(&a, k)),
            [Allowed, Forbidden, Forbidden, Forbidden]
        );
        let session = key(false, true);
        assert_eq!(
            [Read, Write, Keys, Sessions].map(|k| session.may(&a, k)),
            [Allowed, Allowed, Forbidden, Forbidden]
        );
    }

    #[test]
    fn keys_are_random_prefixed_and_found_by_their_hash() {
        let (k1, h1) = new_key();
        let (k2, h2) = new_key();
        assert!(k1.starts_with(KEY_PREFIX) && k1.len() == 4 + 43);
        assert_ne!(k1, k2);
        assert_eq!(key_hash(&k1), h1);
        assert_ne!(h1, h2);
        assert_eq!(h1.len(), 64);
        assert!(!h1.contains(&k1[4..]));
    }

    #[test]
    fn a_session_holds_until_its_expiry_and_only_under_its_key() {
        let key = new_portal_key();
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let session = Session {
            tenant: "a".into(),
            read_only: true,
            expires: now.unix_timestamp() + 60,
            minted_by: None,
        };
        let token = sign_session(&key, &session);
        assert_eq!(verify_session(&key, &token, now), Ok(session.clone()));
        let later = now + time::Duration::seconds(60);
        assert_eq!(verify_session(&key, &token, later), Err(Refused::Expired));
        assert_eq!(
            verify_session(&new_portal_key(), &token, now),
            Err(Refused::Invalid)
        );
        // The payload changed (another tenant, writes allowed): its MAC no
        // longer matches.
        let forged = Session {
            tenant: "b".into(),
            read_only: false,
            ..session
        };
        let forged_payload = sign_session(&key, &forged);
        let (_, forged_payload) = forged_payload[4..]
            .split_once('.')
            .map(|(p, _)| ((), p))
            .unwrap();
        let (_, tag) = token.split_once('.').unwrap();
        let tampered = format!("{SESSION_PREFIX}{forged_payload}.{tag}");
        assert_eq!(verify_session(&key, &tampered, now), Err(Refused::Invalid));
        for junk in ["", "hlp_", "hlp_x.y", "hlk_abc", "hlp_..."] {
            assert_eq!(verify_session(&key, junk, now), Err(Refused::Invalid));
        }
    }
}
