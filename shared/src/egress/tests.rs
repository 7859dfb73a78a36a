//! The egress guard's unit tests: refused ranges in every form, URL checks,
//! and the guarded resolver.

use super::*;
use std::str::FromStr;
use std::sync::Arc;

const fn policy(allow_http: bool, allow_private: bool) -> EgressPolicy {
    EgressPolicy {
        allow_http,
        allow_private,
        allow_metadata: false,
    }
}
const STRICT: EgressPolicy = policy(false, false);
const HTTP: EgressPolicy = policy(true, false);
const PRIVATE: EgressPolicy = policy(false, true);

/// Asserts `is_forbidden` gives `expected` for each whitespace-separated address.
fn expect_forbidden(addrs: &str, expected: bool) {
    for a in addrs.split_whitespace() {
        let ip: IpAddr = a.parse().expect("test address parses");
        assert_eq!(is_forbidden(ip), expected, "is_forbidden({a})");
    }
}

fn refused(raw: &str) -> bool {
    matches!(
        check_url(raw, STRICT),
        Err(EgressError::Forbidden { .. } | EgressError::Metadata { .. })
    )
}

/// A resolver answering one address for every name.
#[derive(Debug)]
struct OneAnswer(IpAddr);

#[async_trait]
impl Dns for OneAnswer {
    async fn lookup(&self, _host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(vec![SocketAddr::new(self.0, port)])
    }
}

#[tokio::test]
async fn metadata_addresses_and_names_resolving_to_them_are_refused_under_every_setting() {
    let metadata = [
        "169.254.169.254",
        "169.254.170.2",
        "100.100.100.200",
        "168.63.129.16",
        "[fd00:ec2::254]",
        "[::ffff:169.254.169.254]",
        "[64:ff9b::a9fe:a9fe]",
        "[64:ff9b:1::a9fe:a9fe]",
        "[::ffff:0:169.254.169.254]",
        "[fd20:ce::254]",
        "[2001:0:4136:e378:8000:63bf:5601:5601]",
    ];
    for allow_http in [false, true] {
        for allow_private in [false, true] {
            let p = policy(allow_http, allow_private);
            for host in metadata {
                let got = check_url(&format!("https://{host}/latest/meta-data/"), p);
                assert!(
                    matches!(got, Err(EgressError::Metadata { .. })),
                    "{host} under {p:?}: {got:?}"
                );
                let lifted = EgressPolicy {
                    allow_metadata: true,
                    ..policy(allow_http, true)
                };
                assert!(check_url(&format!("https://{host}/"), lifted).is_ok());
            }
            let ip: IpAddr = "169.254.169.254".parse().unwrap();
            let dns = OneAnswer(ip);
            let url = "https://metadata.google.internal/computeMetadata/v1/";
            let got = check_url_resolved(url, p, &dns).await;
            assert!(matches!(got, Err(EgressError::Metadata { .. })), "{got:?}");
            let name = Name::from_str("metadata.google.internal").unwrap();
            let resolved = GuardedResolver::new(p, Arc::new(dns)).resolve(name).await;
            let err = resolved.err().expect("refused at connect time");
            assert!(
                matches!(
                    find_egress_error(err.as_ref()),
                    Some(EgressError::Metadata { .. })
                ),
                "{err:?}"
            );
        }
    }
    assert!(
        check_url("https://169.254.1.1/", PRIVATE).is_ok(),
        "other link-local"
    );
}

#[test]
fn a_url_without_a_scheme_is_refused_in_the_users_words() {
    let got = check_url("example.com/hooks", STRICT);
    assert!(
        matches!(&got, Err(EgressError::Invalid(why)) if why.contains("has no scheme")),
        "{got:?}"
    );
}

#[test]
fn loopback_addresses_are_forbidden() {
    expect_forbidden("127.0.0.1 127.1.2.3 ::1", true);
}

#[test]
fn rfc1918_ranges_are_forbidden_up_to_their_edges() {
    expect_forbidden("10.0.0.1 10.255.255.255 172.16.0.0 172.31.255.255", true);
    expect_forbidden("192.168.0.1 192.168.255.255", true);
    expect_forbidden("172.15.255.255 172.32.0.0 9.255.255.255 11.0.0.0", false);
}

#[test]
fn metadata_cgnat_and_special_v4_ranges_are_forbidden() {
    expect_forbidden("169.254.169.254 100.64.0.1 100.100.100.200 0.0.0.0", true);
    expect_forbidden("224.0.0.1 255.255.255.255 192.0.2.1 198.51.100.7", true);
    expect_forbidden("203.0.113.9 198.18.0.1 198.19.255.255 240.0.0.1", true);
    expect_forbidden("100.63.255.255 100.128.0.0 198.20.0.0", false);
}

#[test]
fn special_v6_ranges_are_forbidden() {
    expect_forbidden(":: fd00::1 fd00:ec2::254 fe80::1 ff02::1 2001:db8::1", true);
}

#[test]
fn v6_forms_wrapping_a_forbidden_v4_are_forbidden() {
    expect_forbidden("::ffff:127.0.0.1 ::ffff:10.0.0.1 ::127.0.0.1", true);
    expect_forbidden("64:ff9b::a9fe:a9fe 2002:7f00:1::", true);
    expect_forbidden(
        "::ffff:93.184.215.14 64:ff9b::5db8:d70e 2002:5db8:d70e::1",
        false,
    );
}

#[test]
fn public_addresses_are_allowed() {
    expect_forbidden("93.184.215.14 2606:2800:21f:cb07:6820:80da:af6b:1b2", false);
    assert!(check_url("https://93.184.215.14/hook", STRICT).is_ok());
    assert!(check_url("https://[2606:2800:21f:cb07:6820:80da:af6b:1b2]/", STRICT).is_ok());
}

#[test]
fn ip_literal_urls_in_forbidden_ranges_are_refused() {
    assert!(refused("https://127.0.0.1/"));
    assert!(refused("https://[::1]:8443/"));
    assert!(refused("https://169.254.169.254/latest/meta-data/"));
    assert!(refused("https://[::ffff:7f00:1]/"));
    assert!(refused("https://[::ffff:10.0.0.1]/"));
}

#[test]
fn decimal_octal_and_hex_ipv4_hosts_are_refused() {
    assert!(refused("https://2130706433/"));
    assert!(refused("https://0177.0.0.1/"));
    assert!(refused("https://0x7f.0.0.1/"));
}

#[test]
fn http_is_refused_unless_allowed() {
    assert_eq!(
        check_url("http://example.com/", STRICT),
        Err(EgressError::Scheme)
    );
    assert!(check_url("http://example.com/", HTTP).is_ok());
    assert_eq!(
        check_url("ftp://example.com/", HTTP),
        Err(EgressError::Scheme)
    );
}

#[test]
fn credentials_in_the_url_are_refused() {
    let err = Err(EgressError::Credentials);
    assert_eq!(check_url("https://user:pass@example.com/", STRICT), err);
    assert_eq!(check_url("https://user@example.com/", STRICT), err);
}

#[test]
fn malformed_and_overlong_urls_are_invalid() {
    let invalid = |raw: &str| matches!(check_url(raw, STRICT), Err(EgressError::Invalid(_)));
    assert!(invalid("not a url"));
    assert!(invalid(&format!(
        "https://example.com/{}",
        "a".repeat(MAX_URL_LEN)
    )));
}

#[test]
fn allow_private_lets_loopback_through() {
    assert!(check_url("https://127.0.0.1/", PRIVATE).is_ok());
}

#[tokio::test]
async fn a_hostname_resolving_to_loopback_is_refused_at_registration() {
    let err = check_url_resolved("https://localhost/hook", STRICT, &SystemDns).await;
    assert!(
        matches!(err, Err(EgressError::Forbidden { ref host, .. }) if host == "localhost"),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_guarded_resolver_refuses_localhost() {
    let name = Name::from_str("localhost").expect("valid name");
    let err = match GuardedResolver::new(STRICT, Arc::new(SystemDns))
        .resolve(name)
        .await
    {
        Ok(addrs) => panic!("resolved to {:?}", addrs.collect::<Vec<_>>()),
        Err(e) => e,
    };
    let found = find_egress_error(err.as_ref());
    assert!(
        matches!(found, Some(EgressError::Forbidden { .. })),
        "{found:?}"
    );
}

#[tokio::test]
async fn the_guarded_resolver_lets_localhost_through_when_private_is_allowed() {
    let name = Name::from_str("localhost").expect("valid name");
    let addrs = GuardedResolver::new(PRIVATE, Arc::new(SystemDns))
        .resolve(name)
        .await;
    assert!(addrs.is_ok_and(|mut a| a.all(|sa| sa.ip().is_loopback())));
}

#[tokio::test]
async fn find_egress_error_finds_the_refusal_inside_a_reqwest_error() {
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver::new(STRICT, Arc::new(SystemDns))))
        .build()
        .expect("client builds");
    let sent = client.get("http://localhost:1/").send().await;
    let err = sent.expect_err("localhost must be refused");
    let found = find_egress_error(&err);
    assert!(
        matches!(found, Some(EgressError::Forbidden { .. })),
        "{found:?}"
    );
}

#[test]
fn find_egress_error_looks_inside_io_errors() {
    let gone = EgressError::Unresolvable("gone.example".into());
    let io = std::io::Error::other(gone.clone());
    assert_eq!(find_egress_error(&io), Some(&gone));
    assert_eq!(find_egress_error(&std::io::Error::other("plain")), None);
}
