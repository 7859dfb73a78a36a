//! A name resolver for tests: it answers for one name of its own, one
//! way until `switched` is set and another after (an address, or "no such
//! host"), and asks the system for every other name. It stands for a
//! receiver's DNS record changing under hooklane between registration and
//! delivery.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use hooklane_core::ports::{Dns, SystemDns};

/// Answers `name` with `before`, then, once `switched`, with `after`
/// (`None`: the name does not resolve).
#[derive(Debug)]
pub struct SwitchingDns {
    name: &'static str,
    before: Option<Ipv4Addr>,
    after: Option<Ipv4Addr>,
    /// Set to answer `after` from now on.
    pub switched: AtomicBool,
}

impl SwitchingDns {
    /// A resolver that answers `name` with `before`, then `after`.
    pub fn new(name: &'static str, before: Option<Ipv4Addr>, after: Option<Ipv4Addr>) -> Self {
        Self {
            name,
            before,
            after,
            switched: AtomicBool::new(false),
        }
    }

    /// Answers `after` from now on.
    pub fn switch(&self) {
        self.switched.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Dns for SwitchingDns {
    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        if host != self.name {
            return SystemDns.lookup(host, port).await;
        }
        let answer = match self.switched.load(Ordering::SeqCst) {
            false => self.before,
            true => self.after,
        };
        match answer {
            Some(ip) => Ok(vec![SocketAddr::new(IpAddr::V4(ip), port)]),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such host",
            )),
        }
    }
}
