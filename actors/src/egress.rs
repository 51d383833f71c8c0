//! The egress policy for URLs a tenant gives (MCP servers, event webhook endpoints; DESIGN
//! §11): a tenant may not make Parley reach inside the machine or its network. A
//! destination that is, or resolves to, a loopback, private, link-local, shared, unspecified,
//! broadcast or multicast address (or an IPv4-mapped form of one) is refused:
//!
//! - at registration, when the URL's host is a literal address ([`Egress::check_url`]: a 400
//!   naming `url`);
//! - at every connection, by checking the addresses the resolver returned before connecting
//!   ([`Egress::client`]'s resolver, and [`Dialer`]'s, which checks the URL's text again too),
//!   so a name that resolves to an inside address, or starts to (DNS rebinding), is refused;
//! - and redirects are not followed.
//!
//! The refused set is every range of the IANA special-purpose registries that is not globally
//! reachable, and every IPv6 form that embeds an IPv4 address (IPv4-mapped and -compatible,
//! NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is judged by the address it embeds; the local-use
//! translation prefix `64:ff9b:1::/48` is refused whole.
//!
//! A refusal reads like an unreachable server ("error sending request"), so a tenant learns
//! nothing of the host's ports. The operator allows exceptions with `PARLEY_EGRESS_ALLOW`:
//! comma-separated addresses or networks (`10.0.0.0/8`, `127.0.0.1`: any port) and `host:port`
//! pairs (that port only: an address is matched in every spelling of it, `[::ffff:127.0.0.1]`
//! as `127.0.0.1`; a name is matched as written, and only that name reaches its addresses
//! through the entry). URLs the operator configures (the model, the Graph API) do not go
//! through this policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

mod dial;

pub use self::dial::{Connection, Dialer, Posted};

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

    /// Whether `ip` may be reached on any port: it is public, or in a network the operator
    /// allows. A `host:port` entry does not count: it opens one port, which only
    /// [`Egress::check_url`] sees.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_public(ip) || self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The ports a `host:port` entry opens for the address `ip`, in whatever spelling it was
    /// listed or is asked for.
    fn listed_ports_of(&self, ip: IpAddr) -> Vec<u16> {
        let ip = canonical(ip);
        self.hosts
            .iter()
            .filter(|(host, _)| host.parse::<IpAddr>().is_ok_and(|h| canonical(h) == ip))
            .map(|(_, port)| *port)
            .collect()
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
        let ip = host.parse::<IpAddr>().ok();
        let listed: Vec<u16> = match ip {
            Some(ip) => self.listed_ports_of(ip),
            None => self
                .hosts
                .iter()
                .filter(|(h, _)| *h == host)
                .map(|(_, p)| *p)
                .collect(),
        };
        if ip.is_some_and(|ip| self.allows_ip(ip)) || listed.contains(&port) {
            return Ok(());
        }
        // A listed name on another port, or an address neither public nor allowed.
        if !listed.is_empty() || ip.is_some() {
            return Err(Refused);
        }
        Ok(())
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
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let allowed = egress.resolve(&host, 0).await?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

impl Egress {
    /// The addresses of the name `host` on `port` that a tenant URL may reach: every one of a
    /// name the operator listed, otherwise those the policy allows.
    ///
    /// # Errors
    /// The resolver's; [`Refused`] when none is left.
    async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let host = host.to_ascii_lowercase();
        let found = tokio::net::lookup_host((host.as_str(), port)).await?;
        let listed = self.hosts.iter().any(|(h, _)| *h == host);
        let allowed: Vec<SocketAddr> = found
            .filter(|addr| listed || self.allows_ip(addr.ip()))
            .collect();
        if allowed.is_empty() {
            return Err(Box::new(Refused));
        }
        Ok(allowed)
    }
}

/// An IPv6 address that embeds an IPv4 address, as the IPv4 address it stands for: mapped
/// (`::ffff:a.b.c.d`), translated (`::ffff:0:a.b.c.d`), compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::/48`). (The local-use translation prefix
/// `64:ff9b:1::/48` is refused whole.)
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    let s = v6.segments();
    let [.., a, b, c, d] = v6.octets();
    let tail = Ipv4Addr::new(a, b, c, d);
    let compatible = s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified();
    let mapped = s[..6] == [0, 0, 0, 0, 0, 0xffff];
    let translated = s[..6] == [0, 0, 0, 0, 0xffff, 0];
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let embedded = if compatible || mapped || translated || nat64 {
        Some(tail)
    } else if s[0] == 0x2002 {
        let [_, _, a, b, c, d, ..] = v6.octets();
        Some(Ipv4Addr::new(a, b, c, d))
    } else {
        None
    };
    embedded.map_or(ip, IpAddr::V4)
}

/// Whether `ip` is outside every range a tenant may not reach (an IPv6 form that embeds an
/// IPv4 address judged by that address).
fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// IPv4 ranges of the IANA special-purpose registry that are not globally reachable (the
/// registry's few global exceptions inside them, 192.0.0.9 and 192.0.0.10, are tenants' to
/// reach no more than the rest).
const SPECIAL_V4: [(Ipv4Addr, u8); 15] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // deprecated 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and broadcast
];

/// IPv6 ranges of the IANA special-purpose registry that are not globally reachable (the
/// forms that embed an IPv4 address are judged by it before these are looked at).
const SPECIAL_V6: [(Ipv6Addr, u8); 12] = [
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 128), // unspecified
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1), 128), // loopback
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use IPv4/IPv6 translation
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64), // discard-only
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23), // IETF protocol assignments
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20), // documentation
    (Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16), // segment routing SIDs
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7), // unique local
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10), // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10), // site-local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8), // multicast
];

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    !SPECIAL_V4.iter().any(|(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
        bits & mask == u32::from(*net) & mask
    })
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    !SPECIAL_V6.iter().any(|(net, len)| {
        let mask = u128::MAX.checked_shl(128 - u32::from(*len)).unwrap_or(0);
        bits & mask == u128::from(*net) & mask
    })
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
            // Every IPv6 form that embeds an inside IPv4 address, and the registry's other
            // ranges that are not globally reachable.
            "http://[::ffff:7f00:1]/",
            "http://[0:0:0:0:0:ffff:127.0.0.1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b::a00:1]/",
            "http://[64:ff9b:1::a9fe:a9fe]/",
            "http://[2002:7f00:1::1]/",
            "http://[2002:c0a8:101::]/",
            "http://[fec0::1]/",
            "http://[100::1]/",
            "http://[2001:db8::1]/",
            "http://198.18.0.1/",
            "http://198.19.255.255/",
            "http://240.0.0.1/",
            "http://255.255.255.255/",
            "http://192.0.2.1/",
        ] {
            assert_eq!(egress.check_url(&url(raw)), Err(Refused), "{raw}");
        }
        for raw in [
            "https://mcp.example.com/",
            "http://93.184.216.34/",
            "http://[2606:4700::1]/",
            // A public IPv4 address in an IPv6 form is as public as the address.
            "http://[64:ff9b::5db8:d822]/",
            "http://[2002:5db8:d822::1]/",
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
    }

    #[test]
    fn a_host_port_entry_opens_that_port_only_in_every_spelling_of_the_address() {
        let egress = Egress::parse("127.0.0.1:19003").expect("list");
        for allowed in [
            "http://127.0.0.1:19003/",
            "http://[::ffff:127.0.0.1]:19003/",
            "http://[::ffff:7f00:1]:19003/",
        ] {
            assert_eq!(egress.check_url(&url(allowed)), Ok(()), "{allowed}");
        }
        for refused in [
            "http://127.0.0.1:19001/",
            "http://[::ffff:127.0.0.1]:19001/",
            "http://[::ffff:7f00:1]:19001/",
            "http://[0:0:0:0:0:ffff:127.0.0.1]:19001/",
        ] {
            assert_eq!(egress.check_url(&url(refused)), Err(Refused), "{refused}");
        }
        // A name that resolves to the address gets nothing from the entry, whatever the port.
        assert!(!egress.allows_ip("127.0.0.1".parse().expect("ip")));
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
