//! The egress guard (design guarantee G9): hooklane only ever connects to
//! public destinations.
//!
//! Its place in the flow:
//!
//! 1. **Registration.** When an endpoint is created or its URL changes, the
//!    API calls [`check_url_resolved`]: the URL must be `https` (plain `http`
//!    only where [`EgressPolicy::allow_http`] is set), name a host, carry no
//!    credentials, and neither an IP-literal host nor any address its domain
//!    resolves to may be refused by [`is_forbidden`].
//! 2. **Delivery.** The delivery client is built with a [`GuardedResolver`]
//!    (`reqwest::ClientBuilder::dns_resolver`). It resolves each host once,
//!    drops refused addresses and hands only checked addresses to reqwest, so
//!    the connection goes to an address that was checked — a DNS answer that
//!    changes between registration and delivery (DNS rebinding) cannot steer
//!    a delivery inside the network.
//! 3. **IP literals.** reqwest does not consult the resolver for IP-literal
//!    hosts, so callers also call [`check_url`] before each send.
//!
//! Both steps resolve through one [`Dns`] (the system resolver in
//! production; tests substitute answers, to show that a name answering a
//! public address at registration and loopback at delivery is refused).
//!
//! [`EgressPolicy::allow_private`] (a development flag, off by default) lets
//! private and loopback targets through; the scheme, host and credential
//! rules still apply, and so does the refusal of cloud metadata addresses
//! ([`is_metadata`]: a webhook must never be able to read an instance's
//! credentials), which only [`EgressPolicy::allow_metadata`] lifts.

use std::error::Error as StdError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;

use crate::telemetry::Chain;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// The longest URL accepted, in bytes.
const MAX_URL_LEN: usize = 2048;

/// What the egress guard lets through beyond the defaults (all off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Accept plain `http` URLs as well as `https`.
    pub allow_http: bool,
    /// Accept targets that [`is_forbidden`] refuses (development only),
    /// cloud metadata addresses aside.
    pub allow_private: bool,
    /// Accept the cloud metadata addresses [`is_metadata`] names.
    pub allow_metadata: bool,
}

impl EgressPolicy {
    /// Why `addr` (of `host`) may not be a target under this policy, if so.
    pub fn refuse(self, host: &str, addr: IpAddr) -> Option<EgressError> {
        let host = host.to_owned();
        if !self.allow_metadata && is_metadata(addr) {
            return Some(EgressError::Metadata { host, addr });
        }
        (!self.allow_private && is_forbidden(addr)).then_some(EgressError::Forbidden { host, addr })
    }
}

/// Why a URL or a resolved address was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum EgressError {
    /// The URL does not parse, or is too long.
    #[error("the URL is not valid: {0}")]
    Invalid(String),
    /// The scheme is neither `https` nor (where allowed) `http`.
    #[error("the scheme must be https (or http where allowed)")]
    Scheme,
    /// The URL has no host.
    #[error("the URL must name a host")]
    NoHost,
    /// The URL carries a user name or password.
    #[error("the URL must not carry credentials")]
    Credentials,
    /// The host is, or resolves to, an address [`is_forbidden`] refuses.
    #[error("{host} resolves to a refused address ({addr})")]
    Forbidden {
        /// The host as written in the URL (or as asked of the resolver).
        host: String,
        /// The refused address.
        addr: IpAddr,
    },
    /// The host is, or resolves to, a cloud metadata address.
    #[error(
        "{host} is a cloud metadata address ({addr}), refused whatever \
         HOOKLANE_ALLOW_PRIVATE_TARGETS says (HOOKLANE_ALLOW_METADATA_TARGETS lifts it)"
    )]
    Metadata {
        /// The host as written in the URL (or as asked of the resolver).
        host: String,
        /// The metadata address.
        addr: IpAddr,
    },
    /// The host does not resolve to any address.
    #[error("{0} does not resolve")]
    Unresolvable(String),
}

/// The URL parser's refusal in the user's words.
fn unparsable(e: url::ParseError) -> EgressError {
    use url::ParseError::*;
    EgressError::Invalid(
        match e {
            RelativeUrlWithoutBase => {
                "it has no scheme: write it whole, as https://example.com/hooks"
            }
            EmptyHost => "its host is empty",
            InvalidPort => "its port is not a number from 0 to 65535",
            InvalidIpv4Address => "its host is not a valid IPv4 address",
            InvalidIpv6Address => "its host is not a valid IPv6 address",
            InvalidDomainCharacter | IdnaError => "its host is not a valid host name",
            other => return EgressError::Invalid(other.to_string()),
        }
        .to_owned(),
    )
}

/// True when the address may never be a delivery target (unless private
/// targets are allowed): loopback, private, link-local (including cloud
/// metadata), CGNAT, multicast, broadcast, unspecified, documentation,
/// benchmarking, reserved and `0.0.0.0/8` IPv4; IPv6 loopback, unspecified,
/// multicast, unique-local, link-local, site-local and documentation; and any
/// IPv6 form wrapping a refused IPv4 address (IPv4-mapped, IPv4-compatible,
/// NAT64 `64:ff9b::/96`, 6to4 `2002::/16`).
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // 0.0.0.0/8, "this network" (includes the unspecified address)
        || a == 10 // 10/8, RFC 1918
        || a == 127 // 127/8, loopback
        || (a == 100 && (64..128).contains(&b)) // 100.64/10, CGNAT (incl. 100.100.100.200)
        || (a == 169 && b == 254) // 169.254/16, link-local (incl. 169.254.169.254)
        || (a == 172 && (16..32).contains(&b)) // 172.16/12, RFC 1918
        || (a == 192 && b == 168) // 192.168/16, RFC 1918
        || (a == 192 && b == 0 && c == 2) // 192.0.2/24, TEST-NET-1
        || (a == 198 && (b == 18 || b == 19)) // 198.18/15, benchmarking
        || (a == 198 && b == 51 && c == 100) // 198.51.100/24, TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // 203.0.113/24, TEST-NET-3
        || a >= 224 // 224/4 multicast, 240/4 reserved, 255.255.255.255 broadcast
}

/// The IPv4 address an IPv6 form wraps: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d` (`::`
/// and `::1` as 0.0.0.0/8), NAT64 `64:ff9b::/96` and local-use
/// `64:ff9b:1::/48`, 6to4 `2002::/16`, and Teredo `2001::/32` (its client
/// address, inverted).
fn wrapped_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let last = matches!(
        s[..6],
        [0, 0, 0, 0, 0, 0] | [0, 0, 0, 0, 0xffff, 0] | [0x64, 0xff9b, 0, 0, 0, 0]
    ) || s[..3] == [0x64, 0xff9b, 1];
    match s[0] {
        _ if last => Some(embedded(s[6], s[7])),
        0x2002 => Some(embedded(s[1], s[2])),
        0x2001 if s[1] == 0 => Some(embedded(!s[6], !s[7])),
        _ => None,
    }
}

/// True for the cloud metadata and credential addresses, refused whatever
/// [`EgressPolicy::allow_private`] says: 169.254.169.0/24 (the instance
/// metadata of AWS, Google Cloud, Azure, Oracle and DigitalOcean, and
/// AWS's DNS and time servers), 169.254.170.0/24 (ECS task and EKS pod
/// credentials), 100.100.100.200 (Alibaba Cloud), 168.63.129.16 (Azure's
/// host), `fd00:ec2::/32` (AWS's IPv6 metadata), `fd20:ce::/32` (Google
/// Cloud's), and any IPv6 form wrapping one of them. A name resolving to
/// one is refused with it.
pub fn is_metadata(ip: IpAddr) -> bool {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match wrapped_v4(v6) {
            Some(v4) => v4,
            None => return matches!(v6.segments()[..2], [0xfd00, 0x0ec2] | [0xfd20, 0x00ce]),
        },
    };
    matches!(
        v4.octets(),
        [169, 254, 169 | 170, _] | [100, 100, 100, 200] | [168, 63, 129, 16]
    )
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = wrapped_v4(ip) {
        return is_forbidden_v4(v4);
    }
    (s[0] & 0xff00) == 0xff00 // ff00::/8, multicast
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7, unique-local (incl. fd00:ec2::254)
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10, link-local
        || (s[0] & 0xffc0) == 0xfec0 // fec0::/10, deprecated site-local
        || (s[0] == 0x2001 && s[1] == 0x0db8) // 2001:db8::/32, documentation
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // 64:ff9b:1::/48, local-use NAT64
}

/// Parses and checks a URL's form without DNS: the scheme (`https`, or
/// `http` when `policy.allow_http`), a host, no credentials, at most 2048
/// characters, and an IP-literal host against [`is_forbidden`] (unless
/// `policy.allow_private`). Decimal, octal and hex IPv4 hosts such as
/// `https://2130706433/` are normalised by the URL parser and checked too.
///
/// reqwest does not consult [`GuardedResolver`] for IP-literal hosts, so
/// callers call this before each send as well as at registration.
pub fn check_url(raw: &str, policy: EgressPolicy) -> Result<Url, EgressError> {
    if raw.len() > MAX_URL_LEN {
        return Err(EgressError::Invalid(format!(
            "longer than {MAX_URL_LEN} characters"
        )));
    }
    let url = Url::parse(raw).map_err(unparsable)?;
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        _ => return Err(EgressError::Scheme),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EgressError::Credentials);
    }
    let addr = match url.host() {
        None => return Err(EgressError::NoHost),
        Some(Host::Domain("")) => return Err(EgressError::NoHost),
        Some(Host::Domain(_)) => None,
        Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
    };
    if let Some(refused) = addr.and_then(|a| policy.refuse(url.host_str().unwrap_or_default(), a)) {
        return Err(refused);
    }
    Ok(url)
}

/// Looks up a host's addresses: the registration check and the delivery
/// client's resolver both ask it.
#[async_trait]
pub trait Dns: Send + Sync + std::fmt::Debug {
    /// The addresses `host` resolves to (with `port`); an error when it does
    /// not resolve.
    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver (`getaddrinfo`, through Tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemDns;

#[async_trait]
impl Dns for SystemDns {
    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        tokio::net::lookup_host((host, port))
            .await
            .map(Iterator::collect)
    }
}

/// [`check_url`], then, for a domain host, resolves it once and refuses the
/// URL if ANY resolved address is forbidden (unless `policy.allow_private`).
///
/// A host that does not resolve at all is accepted here: DNS for a new
/// endpoint may not be set up yet at registration. That is safe because the
/// delivery client's [`GuardedResolver`] resolves and checks again at connect
/// time, and reports a host that still does not resolve as
/// [`EgressError::Unresolvable`].
pub async fn check_url_resolved(
    raw: &str,
    policy: EgressPolicy,
    dns: &dyn Dns,
) -> Result<Url, EgressError> {
    let url = check_url(raw, policy)?;
    if policy.allow_private && policy.allow_metadata {
        return Ok(url);
    }
    let Some(Host::Domain(domain)) = url.host() else {
        return Ok(url);
    };
    let port = url.port_or_known_default().unwrap_or(443);
    match dns.lookup(domain, port).await {
        Ok(addrs) => {
            if let Some(refused) = addrs.iter().find_map(|sa| policy.refuse(domain, sa.ip())) {
                return Err(refused);
            }
        }
        Err(e) => {
            tracing::debug!(host = domain, error = %Chain(&e), "host does not resolve yet; accepted, checked again at connect time");
        }
    }
    Ok(url)
}

/// The delivery client's DNS resolver (implements [`reqwest::dns::Resolve`]):
/// resolves each name once, drops the addresses its policy refuses, and
/// fails with that refusal when none remain or [`EgressError::Unresolvable`]
/// when the name does not resolve, so reqwest connects only to checked
/// addresses. Install with
/// `reqwest::ClientBuilder::dns_resolver(Arc::new(GuardedResolver::new(policy, dns)))`.
/// IP-literal URLs bypass resolvers: see [`check_url`].
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: EgressPolicy,
    dns: Arc<dyn Dns>,
}

impl GuardedResolver {
    /// A resolver over `dns` that refuses what `policy` refuses.
    pub fn new(policy: EgressPolicy, dns: Arc<dyn Dns>) -> Self {
        Self { policy, dns }
    }

    async fn resolve_checked(
        host: String,
        policy: EgressPolicy,
        dns: Arc<dyn Dns>,
    ) -> Result<Addrs, EgressError> {
        let Ok(resolved) = dns.lookup(&host, 0).await else {
            return Err(EgressError::Unresolvable(host));
        };
        let Some(first) = resolved.first().copied() else {
            return Err(EgressError::Unresolvable(host));
        };
        let allowed: Vec<SocketAddr> = resolved
            .iter()
            .copied()
            .filter(|sa| policy.refuse(&host, sa.ip()).is_none())
            .collect();
        if allowed.is_empty() {
            let addr = first.ip();
            return Err(policy
                .refuse(&host, addr)
                .unwrap_or(EgressError::Forbidden { host, addr }));
        }
        if allowed.len() < resolved.len() {
            tracing::warn!(
                host = %host,
                dropped = resolved.len() - allowed.len(),
                "dropped refused addresses from a DNS answer"
            );
        }
        Ok(Box::new(allowed.into_iter()))
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let (policy, dns) = (self.policy, self.dns.clone());
        Box::pin(async move {
            Self::resolve_checked(host, policy, dns)
                .await
                .map_err(Into::into)
        })
    }
}

/// Walks an error's source chain and returns the [`EgressError`] inside it,
/// if any, so the delivery classifier can tell "host no longer resolves"
/// (fatal) and "refused address" from other connect errors. Looks inside
/// `std::io::Error` wrappers too, whose `source` skips the wrapped error.
pub fn find_egress_error<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a EgressError> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<EgressError>() {
            return Some(found);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<EgressError>())
        {
            return Some(inner);
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests;
