//! Which addresses `web_fetch` may reach: everything public; private, loopback, link-local,
//! unique-local, CGNAT, multicast, unspecified and reserved ranges only when the config allows
//! them (`allow_private`) or names the host (`allow_hosts`). IPv6 forms that carry an IPv4
//! address (mapped, compatible, NAT64, 6to4) are judged by that IPv4 address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The kind of range an address falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    /// A public (global unicast) address.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, and IPv6 site-local `fec0::/10`.
    Private,
    /// `169.254/16`, `fe80::/10` (cloud metadata services live here).
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// `100.64/10`, carrier-grade NAT.
    Cgnat,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// Documentation, benchmarking, broadcast, `240/4` and other special-purpose ranges.
    Reserved,
}

impl AddrClass {
    /// Whether only the config can open this range.
    pub fn is_restricted(self) -> bool {
        self != AddrClass::Public
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrClass::Public => "public",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private",
            AddrClass::LinkLocal => "link-local",
            AddrClass::UniqueLocal => "unique-local",
            AddrClass::Cgnat => "carrier-grade NAT",
            AddrClass::Multicast => "multicast",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Reserved => "reserved",
        })
    }
}

/// The range `ip` falls in.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => AddrClass::Unspecified,
        (127, _, _) => AddrClass::Loopback,
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => AddrClass::Private,
        (169, 254, _) => AddrClass::LinkLocal,
        (100, 64..=127, _) => AddrClass::Cgnat,
        (224..=239, _, _) => AddrClass::Multicast,
        (240..=255, _, _)
        | (192, 0, 0)
        | (192, 0, 2)
        | (198, 18..=19, _)
        | (198, 51, 100)
        | (203, 0, 113) => AddrClass::Reserved,
        _ => AddrClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        AddrClass::Unspecified
    } else if ip.is_loopback() {
        AddrClass::Loopback
    } else if s[0] & 0xff00 == 0xff00 {
        AddrClass::Multicast
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddrClass::LinkLocal
    } else if s[0] & 0xffc0 == 0xfec0 {
        AddrClass::Private
    } else if s[0] & 0xfe00 == 0xfc00 {
        AddrClass::UniqueLocal
    } else if (s[0], s[1]) == (0x2001, 0x0db8)
        || (s[0], s[1]) == (0x2001, 0)
        || (s[0], s[1], s[2], s[3]) == (0x100, 0, 0, 0)
        || s[0] & 0xe000 != 0x2000
    {
        // Documentation, Teredo (its IPv4 is hidden), discard-only, and everything outside
        // 2000::/3, the only range handed out as global unicast.
        AddrClass::Reserved
    } else {
        AddrClass::Public
    }
}

/// The IPv4 address an IPv6 address carries: `::ffff:a.b.c.d` (mapped), `::a.b.c.d`
/// (compatible, deprecated), `64:ff9b::a.b.c.d` (NAT64) and `2002:aabb:ccdd::/48` (6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_unspecified() && !ip.is_loopback() {
        return Some(tail);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// `host` as written in a URL, lower-case, without brackets or a trailing dot.
fn normal_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Whether `host` is named in `allow_hosts`: the same name or address, or a subdomain of a
/// `*.domain` entry.
pub fn host_listed(host: &str, allow_hosts: &[String]) -> bool {
    let host = normal_host(host);
    let host_ip = host.parse::<IpAddr>().ok();
    allow_hosts.iter().any(|entry| {
        let entry = normal_host(entry.trim());
        if let Some(suffix) = entry.strip_prefix("*.") {
            return host
                .strip_suffix(suffix)
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1);
        }
        match (host_ip, entry.parse::<IpAddr>()) {
            (Some(a), Ok(b)) => a == b,
            _ => host == entry,
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn class(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn ipv4_ranges() {
        for (ip, want) in [
            ("8.8.8.8", AddrClass::Public),
            ("93.184.216.34", AddrClass::Public),
            ("127.0.0.1", AddrClass::Loopback),
            ("127.255.0.9", AddrClass::Loopback),
            ("10.1.2.3", AddrClass::Private),
            ("172.16.0.1", AddrClass::Private),
            ("172.31.255.255", AddrClass::Private),
            ("172.32.0.1", AddrClass::Public),
            ("192.168.1.1", AddrClass::Private),
            ("169.254.169.254", AddrClass::LinkLocal),
            ("100.64.0.1", AddrClass::Cgnat),
            ("100.127.255.254", AddrClass::Cgnat),
            ("100.128.0.1", AddrClass::Public),
            ("224.0.0.1", AddrClass::Multicast),
            ("239.255.255.250", AddrClass::Multicast),
            ("0.0.0.0", AddrClass::Unspecified),
            ("0.1.2.3", AddrClass::Unspecified),
            ("255.255.255.255", AddrClass::Reserved),
            ("240.0.0.1", AddrClass::Reserved),
            ("192.0.2.7", AddrClass::Reserved),
            ("198.18.0.1", AddrClass::Reserved),
        ] {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_ranges() {
        for (ip, want) in [
            ("2606:4700::1111", AddrClass::Public),
            ("::1", AddrClass::Loopback),
            ("::", AddrClass::Unspecified),
            ("fe80::1", AddrClass::LinkLocal),
            ("febf::1", AddrClass::LinkLocal),
            ("fec0::1", AddrClass::Private),
            ("fc00::1", AddrClass::UniqueLocal),
            ("fd12:3456::1", AddrClass::UniqueLocal),
            ("ff02::1", AddrClass::Multicast),
            ("2001:db8::1", AddrClass::Reserved),
            ("2001::1", AddrClass::Reserved),
            ("100::1", AddrClass::Reserved),
            ("4000::1", AddrClass::Reserved),
        ] {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_carrying_ipv4_is_judged_by_the_ipv4() {
        for (ip, want) in [
            ("::ffff:127.0.0.1", AddrClass::Loopback),
            ("::ffff:7f00:1", AddrClass::Loopback),
            ("::ffff:10.0.0.1", AddrClass::Private),
            ("::ffff:169.254.169.254", AddrClass::LinkLocal),
            ("::ffff:8.8.8.8", AddrClass::Public),
            ("::127.0.0.1", AddrClass::Loopback),
            ("::10.0.0.1", AddrClass::Private),
            ("64:ff9b::a9fe:a9fe", AddrClass::LinkLocal),
            ("64:ff9b::808:808", AddrClass::Public),
            ("2002:c0a8:0101::1", AddrClass::Private),
            ("2002:7f00:1::", AddrClass::Loopback),
        ] {
            assert_eq!(class(ip), want, "{ip}");
        }
        assert!(!AddrClass::Public.is_restricted());
        assert!(AddrClass::LinkLocal.is_restricted());
    }

    #[test]
    fn allow_hosts_match_names_addresses_and_subdomains() {
        let list: Vec<String> = ["Wiki.LAN", "127.0.0.1", "::1", "*.corp.example"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert!(host_listed("wiki.lan", &list));
        assert!(host_listed("wiki.lan.", &list));
        assert!(!host_listed("evilwiki.lan", &list));
        assert!(host_listed("127.0.0.1", &list));
        assert!(host_listed("[::1]", &list));
        assert!(host_listed("[0:0:0:0:0:0:0:1]", &list));
        assert!(!host_listed("127.0.0.2", &list));
        assert!(host_listed("a.b.corp.example", &list));
        assert!(!host_listed("corp.example", &list));
        assert!(!host_listed("xcorp.example", &list));
        assert!(!host_listed("localhost", &list));
    }
}
