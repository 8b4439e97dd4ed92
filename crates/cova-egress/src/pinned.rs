//! HTTP clients that reach one checked address only, kept per (host, address): a client's
//! connections are reused by the next request to the same host, and building one (which loads
//! the trust roots) is paid once rather than per request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

/// Clients kept at most; past it the cache starts again (hosts are few: receivers, CDNs).
const KEPT: usize = 1_024;

/// The kept clients of one kind of request (webhooks, media downloads).
#[derive(Debug, Default)]
pub struct PinnedClients {
    clients: Mutex<HashMap<(String, SocketAddr), reqwest::Client>>,
}

impl PinnedClients {
    /// The client connecting `url`'s host to `addr` only (an address [`crate::Guard`]
    /// admitted; TLS still verifies the name), built from `builder` the first time. A name that
    /// resolves elsewhere later gets a client of its own.
    pub fn get(
        &self,
        url: &url::Url,
        addr: SocketAddr,
        builder: impl FnOnce() -> reqwest::ClientBuilder,
    ) -> Result<reqwest::Client, reqwest::Error> {
        let key = (url.host_str().unwrap_or_default().to_owned(), addr);
        if let Some(client) = self.clients.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(client.clone());
        }
        let mut builder = builder();
        if !key.0.is_empty() {
            builder = builder.resolve(&key.0, addr);
        }
        let client = builder.build()?;
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= KEPT {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_built_once_per_host_and_address() {
        let kept = PinnedClients::default();
        let url = url::Url::parse("https://cdn.example.com/a.jpg").expect("url");
        let (one, two): (SocketAddr, SocketAddr) =
            ("93.184.216.34:443".parse().expect("addr"), "93.184.216.35:443".parse().expect("addr"));
        let mut built = 0;
        for addr in [one, one, two, one] {
            kept.get(&url, addr, || {
                built += 1;
                reqwest::Client::builder()
            })
            .expect("client");
        }
        assert_eq!(built, 2, "one client per (host, address)");
    }
}
