//! The egress policy for URLs a tenant gives (MCP servers today, event webhook endpoints
//! next; DESIGN §11): a tenant may not make Parley reach inside the machine or its network. A
//! destination that is, or resolves to, a loopback, private, link-local, shared, unspecified,
//! broadcast or multicast address (or an IPv4-mapped form of one) is refused:
//!
//! - at registration, when the URL's host is a literal address ([`Egress::check_url`]: a 400
//!   naming `url`);
//! - at every connection, by checking the addresses the resolver returned before connecting
//!   ([`Egress::client`]'s resolver), so a name that resolves to an inside address, or starts
//!   to (DNS rebinding), is refused too;
//! - and redirects are not followed.
//!
//! A refusal reads like an unreachable server ("error sending request"), so a tenant learns
//! nothing of the host's ports. The operator allows exceptions with `PARLEY_EGRESS_ALLOW`:
//! comma-separated addresses or networks (`10.0.0.0/8`, `127.0.0.1`) and `host:port` pairs (a
//! host listed there is reachable on its listed ports only). URLs the operator configures (the
//! model, the Graph API) do not go through this policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// What a refused destination reads as: the same words as a server that cannot be reached.
pub const REFUSED: &str = "error sending request";

/// The exceptions the operator allows; without any, only public addresses are reachable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Egress {
    /// Addresses and networks reachable on any port.
    nets: Vec<IpNet>,
    /// Hosts (names or addresses, lower-cased) reachable on the listed ports only.
    hosts: Vec<(String, u16)>,
}

/// Why an entry of `PARLEY_EGRESS_ALLOW` could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is neither an address, a network (10.0.0.0/8) nor host:port")]
pub struct BadAllowEntry(pub String);

/// A destination the policy refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{REFUSED}")]
pub struct Refused;

impl Egress {
    /// Reads a comma-separated allow list (blank entries are ignored).
    ///
    /// # Errors
    /// The first entry that is not an address, a network or `host:port`.
    pub fn parse(list: &str) -> Result<Self, BadAllowEntry> {
        let mut egress = Self::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            egress.allow(entry)?;
        }
        Ok(egress)
    }

    /// Allows one more entry.
    ///
    /// # Errors
    /// When `entry` is not an address, a network or `host:port`.
    pub fn allow(&mut self, entry: &str) -> Result<(), BadAllowEntry> {
        if let Ok(net) = entry.parse::<IpNet>() {
            self.nets.push(net);
        } else if let Ok(ip) = entry.parse::<IpAddr>() {
            self.nets.push(IpNet::from(ip));
        } else if let Ok(socket) = entry.parse::<SocketAddr>() {
            self.hosts.push((socket.ip().to_string(), socket.port()));
        } else {
            let (host, port) = entry
                .rsplit_once(':')
                .ok_or_else(|| BadAllowEntry(entry.to_owned()))?;
            let port = port
                .parse::<u16>()
                .map_err(|_| BadAllowEntry(entry.to_owned()))?;
            if host.is_empty() || host.contains('/') {
                return Err(BadAllowEntry(entry.to_owned()));
            }
            self.hosts.push((host.to_ascii_lowercase(), port));
        }
        Ok(())
    }

    /// Whether a connection to `ip` may be made (whatever the port: the URL's port was
    /// checked by [`Egress::check_url`]).
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_public(ip)
            || self.nets.iter().any(|net| net.contains(&ip))
            || self.hosts.iter().any(|(host, _)| host.parse() == Ok(ip))
    }

    /// Whether `url` may be asked for, as far as its own text tells: a literal address must be
    /// public or allowed; a host listed with `host:port` only on its listed ports. A name's
    /// addresses are checked when connecting.
    ///
    /// # Errors
    /// [`Refused`] for a URL the policy refuses.
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let port = url.port_or_known_default().ok_or(Refused)?;
        // The URL parser spells every form of an address (`0x7f000002`, `127.2`) canonically.
        let host = url
            .host_str()
            .ok_or(Refused)?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let listed: Vec<u16> = self
            .hosts
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, p)| *p)
            .collect();
        if !listed.is_empty() {
            return if listed.contains(&port) {
                Ok(())
            } else {
                Err(Refused)
            };
        }
        match host.parse::<IpAddr>() {
            Ok(ip) if !self.allows_ip(ip) => Err(Refused),
            _ => Ok(()),
        }
    }

    /// An HTTP client for tenant URLs: it connects only to addresses the policy allows (its
    /// resolver drops the others, and refuses a name left with none), follows no redirect, and
    /// gives up on a connection after `connect_timeout`.
    pub fn client(self: &Arc<Self>, connect_timeout: Duration) -> reqwest::Client {
        crate::llm::install_crypto_provider();
        reqwest::Client::builder()
            .dns_resolver(Arc::new(Resolver(self.clone())))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .build()
            .unwrap_or_default()
    }
}

/// Resolves with the system's resolver, then keeps only what the policy allows.
struct Resolver(Arc<Egress>);

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = self.0.clone();
        let host = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let listed = egress.hosts.iter().any(|(h, _)| *h == host);
            let allowed: Vec<SocketAddr> = found
                .filter(|addr| listed || egress.allows_ip(addr.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(Refused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// An IPv4-mapped (or -compatible) IPv6 address as the IPv4 address it stands for.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// Whether `ip` is outside every range a tenant may not reach.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (b & 0b1100_0000) == 64))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    // IPv4-compatible (::a.b.c.d) addresses stand for the IPv4 address they carry.
    if ip.segments()[..6].iter().all(|s| *s == 0) && !ip.is_loopback() && !ip.is_unspecified() {
        let [.., a, b, c, d] = ip.octets();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local, fc00::/7.
        || (first & 0xfe00) == 0xfc00
        // Link-local, fe80::/10.
        || (first & 0xffc0) == 0xfe80)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(raw: &str) -> Url {
        Url::parse(raw).expect("url")
    }

    #[test]
    fn inside_addresses_are_refused_in_every_spelling() {
        let egress = Egress::default();
        for raw in [
            "http://127.0.0.2:8080/",
            "http://[::1]:8080/",
            "http://0x7f000002:8080/",
            "http://127.2:8080/",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::127.0.0.1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://224.0.0.1/",
        ] {
            assert_eq!(egress.check_url(&url(raw)), Err(Refused), "{raw}");
        }
        for raw in [
            "https://mcp.example.com/",
            "http://93.184.216.34/",
            "http://[2606:4700::1]/",
        ] {
            assert_eq!(egress.check_url(&url(raw)), Ok(()), "{raw}");
        }
    }

    #[test]
    fn the_operator_allows_networks_and_host_ports() {
        let egress = Egress::parse("127.0.0.0/8, tools.internal:9000,10.0.0.7").expect("list");
        assert_eq!(egress.check_url(&url("http://127.0.0.2:1/")), Ok(()));
        assert_eq!(egress.check_url(&url("http://10.0.0.7/")), Ok(()));
        assert_eq!(egress.check_url(&url("http://10.0.0.8/")), Err(Refused));
        assert_eq!(
            egress.check_url(&url("http://tools.internal:9000/")),
            Ok(())
        );
        assert_eq!(
            egress.check_url(&url("http://tools.internal:22/")),
            Err(Refused)
        );
        assert!(egress.allows_ip("127.9.9.9".parse().expect("ip")));
        assert!(!egress.allows_ip("192.168.0.1".parse().expect("ip")));
        assert_eq!(
            Egress::parse("not an entry").map(|_| ()),
            Err(BadAllowEntry("not an entry".to_owned()))
        );
    }

    #[tokio::test]
    async fn a_name_that_resolves_inside_is_refused_when_connecting() {
        let resolver = Resolver(Arc::new(Egress::default()));
        let name: Name = "localhost".parse().expect("name");
        assert!(resolver.resolve(name).await.is_err());
        let allowed = Resolver(Arc::new(Egress::parse("127.0.0.0/8,::1").expect("list")));
        let name: Name = "localhost".parse().expect("name");
        assert!(allowed.resolve(name).await.is_ok());
    }
}
