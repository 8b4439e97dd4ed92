//! The SSRF guard for URLs cova is told to contact (customers' webhooks, platform CDN links):
//! every address the host resolves to must be public (loopback, private, link-local, CGNAT,
//! multicast, unspecified, broadcast, documentation and benchmarking ranges, IPv6 unique-local
//! and site-local, and IPv4 addresses hidden in IPv4-mapped, IPv4-compatible, NAT64 or 6to4
//! IPv6 are refused). The caller connects to an address this guard returned, so the name is
//! not resolved twice. Configured ranges are admitted (tests, private deployments).

mod pinned;

pub use pinned::PinnedClients;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Why a URL is refused; the text is shown to the customer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the URL is not valid: {0}")]
    Invalid(String),
    #[error("only https URLs are accepted")]
    NotHttps,
    #[error("the host `{0}` could not be resolved")]
    Unresolvable(String),
    #[error("the host `{host}` resolves to {addr}, which is not a public address")]
    NotPublic { host: String, addr: IpAddr },
}

/// A network range, e.g. `10.0.0.0/8` or `::1/128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    base: IpAddr,
    bits: u8,
}

impl Cidr {
    fn parse(s: &str) -> Option<Self> {
        let (ip, bits) = match s.split_once('/') {
            Some((ip, bits)) => (ip.parse::<IpAddr>().ok()?, bits.parse::<u8>().ok()?),
            None => {
                let ip = s.parse::<IpAddr>().ok()?;
                (ip, if ip.is_ipv4() { 32 } else { 128 })
            }
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        (bits <= max).then_some(Self { base: ip, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        match (self.base, ip) {
            (IpAddr::V4(b), IpAddr::V4(i)) => prefix(u128::from(u32::from(b)), u128::from(u32::from(i)), self.bits, 32),
            (IpAddr::V6(b), IpAddr::V6(i)) => prefix(u128::from(b), u128::from(i), self.bits, 128),
            _ => false,
        }
    }
}

fn prefix(base: u128, ip: u128, bits: u8, width: u32) -> bool {
    if bits == 0 {
        return true;
    }
    let shift = width - u32::from(bits);
    (base >> shift) == (ip >> shift)
}

fn v4_public(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments 192.0.0.0/24
        || (a == 198 && (b == 18 || b == 19))) // benchmarking 198.18.0.0/15
}

/// True for an address a customer's webhook may point at.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_public(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_public(v4);
            }
            let seg = v6.segments();
            // IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16: the IPv4 inside decides.
            let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            if seg[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() {
                return v4_public(embedded(seg[6], seg[7]));
            }
            if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0; 4] {
                return v4_public(embedded(seg[6], seg[7]));
            }
            if seg[0] == 0x2002 {
                return v4_public(embedded(seg[1], seg[2]));
            }
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (seg[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation 2001:db8::/32
                || (seg[0] == 0x0100 && seg[1..4] == [0; 3])) // discard-only 100::/64
        }
    }
}

/// Checks URLs and resolves their hosts to addresses that may be contacted.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allowed: Vec<Cidr>,
    /// Static host entries, consulted before DNS (like `/etc/hosts`).
    hosts: BTreeMap<String, IpAddr>,
}

impl Guard {
    /// `allow_private`: ranges admitted although not public; `hosts`: static name → address.
    pub fn new(allow_private: &[String], hosts: &BTreeMap<String, String>) -> Result<Self, String> {
        let allowed = allow_private
            .iter()
            .map(|s| Cidr::parse(s).ok_or_else(|| format!("`{s}` is not an address or a range like 10.0.0.0/8")))
            .collect::<Result<_, _>>()?;
        let hosts = hosts
            .iter()
            .map(|(h, ip)| {
                ip.parse::<IpAddr>()
                    .map(|ip| (h.to_ascii_lowercase(), ip))
                    .map_err(|_| format!("`{ip}` is not an address"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed, hosts })
    }

    fn admits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allowed.iter().any(|c| c.contains(ip))
    }

    /// Checks the URL's form without resolving it.
    pub fn check_form(&self, raw: &str) -> Result<url::Url, Refusal> {
        let url = url::Url::parse(raw).map_err(|e| Refusal::Invalid(e.to_string()))?;
        if url.scheme() != "https" {
            return Err(Refusal::NotHttps);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Invalid("credentials in the URL are not accepted".into()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Refusal::Invalid("the URL has no host".into()));
        }
        // Port 0 is no port: nothing listens there, and some stacks read it as "any".
        if url.port() == Some(0) {
            return Err(Refusal::Invalid("port 0 is not a port a receiver can listen on".into()));
        }
        Ok(url)
    }

    /// Checks the URL and resolves its host: the address to connect to (every address the
    /// name has must be admitted, so a name cannot mix a public and a private address).
    pub async fn resolve(&self, raw: &str) -> Result<(url::Url, SocketAddr), Refusal> {
        let url = self.check_form(raw)?;
        let addr = self.resolve_url(&url).await?;
        Ok((url, addr))
    }

    /// Resolves the host of an already checked URL of any scheme: the address to connect to,
    /// when every address of the name is admitted.
    pub async fn resolve_url(&self, url: &url::Url) -> Result<SocketAddr, Refusal> {
        let host =
            url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(443);
        if port == 0 {
            return Err(Refusal::Invalid("port 0 is not a port a receiver can listen on".into()));
        }
        let addrs: Vec<IpAddr> = if let Ok(ip) = host.parse::<IpAddr>() {
            vec![ip]
        } else if let Some(ip) = self.hosts.get(&host) {
            vec![*ip]
        } else {
            tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| Refusal::Unresolvable(host.clone()))?
                .map(|a| a.ip())
                .collect()
        };
        let first = *addrs.first().ok_or_else(|| Refusal::Unresolvable(host.clone()))?;
        if let Some(bad) = addrs.iter().find(|ip| !self.admits(**ip)) {
            return Err(Refusal::NotPublic { host, addr: *bad });
        }
        Ok(SocketAddr::new(first, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        for bad in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.10",
            "198.51.100.2",
            "203.0.113.9",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(!is_public(ip(bad)), "{bad} must be refused");
        }
        for good in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34"] {
            assert!(is_public(ip(good)), "{good} is public");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_and_resolved_once() {
        let hosts = BTreeMap::from([("hooks.example.com".to_owned(), "127.0.0.1".to_owned())]);
        let guard = Guard::new(&[], &hosts).expect("guard");
        assert_eq!(guard.resolve("http://93.184.216.34/x").await.expect_err("http"), Refusal::NotHttps);
        assert_eq!(guard.resolve("file:///etc/passwd").await.expect_err("file"), Refusal::NotHttps);
        assert!(matches!(guard.resolve("https://user:pw@93.184.216.34/").await, Err(Refusal::Invalid(_))));
        assert!(matches!(guard.resolve("https://8.8.8.8:0/h").await, Err(Refusal::Invalid(_))));
        assert!(matches!(guard.resolve("https://[::1]/").await, Err(Refusal::NotPublic { .. })));
        assert!(matches!(guard.resolve("https://hooks.example.com/").await, Err(Refusal::NotPublic { .. })));
        let (_, addr) = guard.resolve("https://93.184.216.34:8443/hook").await.expect("public");
        assert_eq!(addr, "93.184.216.34:8443".parse().expect("addr"));
        let allowed = Guard::new(&["127.0.0.0/8".to_owned()], &hosts).expect("guard");
        let (_, addr) = allowed.resolve("https://hooks.example.com/x").await.expect("allow-listed");
        assert_eq!(addr.ip(), ip("127.0.0.1"));
        assert!(Guard::new(&["nope".to_owned()], &BTreeMap::new()).is_err());
    }
}
