use super::*;
use std::net::Ipv6Addr;

#[test]
fn rfc_5782_query_names() {
    // RFC 5782 2.1: "192.0.2.99" in dnsbl.example.com.
    let ip: IpAddr = "192.0.2.99".parse().expect("ip");
    assert_eq!(
        ip_query(ip, "dnsbl.example.com"),
        "99.2.0.192.dnsbl.example.com"
    );
    // RFC 5782 2.4: "2001:db8:1:2:3:4:567:89ab".
    let ip: IpAddr = "2001:db8:1:2:3:4:567:89ab".parse().expect("ip");
    assert_eq!(
        ip_query(ip, "ugly.example.com"),
        "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ugly.example.com"
    );
    // A dual-stack socket's IPv4 client.
    let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 99).to_ipv6_mapped());
    assert_eq!(ip_query(mapped, "zen.example"), "99.2.0.192.zen.example");
    // RFC 5782 2.3.
    assert_eq!(
        domain_query("Bad.Example.", "dbl.example"),
        "bad.example.dbl.example"
    );
}

#[test]
fn code_ranges_parse() {
    let one: CodeRange = "127.0.0.2".parse().expect("one");
    assert_eq!(one.first, one.last);
    let range: CodeRange = " 127.0.0.2 - 127.0.0.11 ".parse().expect("range");
    assert_eq!(range.last, Ipv4Addr::new(127, 0, 0, 11));
    assert!("127.0.0.11-127.0.0.2".parse::<CodeRange>().is_err());
    assert!("127.0.0".parse::<CodeRange>().is_err());
    assert!("".parse::<CodeRange>().is_err());
}

#[test]
fn listings() {
    let a = |s: &str| s.parse::<Ipv4Addr>().expect("address");
    // RFC 5782 5: 127.0.0.2 is the test listing, 127.0.0.1 never one.
    assert!(listed(a("127.0.0.2"), &[]));
    assert!(listed(a("127.0.1.4"), &[]));
    assert!(!listed(a("127.0.0.1"), &[]));
    assert!(
        !listed(a("10.0.0.2"), &[]),
        "RFC 5782 2.1: answers are in 127/8"
    );
    assert!(
        !listed(a("127.255.255.254"), &[]),
        "Spamhaus: a public resolver"
    );
    let codes: Vec<CodeRange> = ["127.0.0.2-127.0.0.3", "127.0.0.10"]
        .iter()
        .map(|c| c.parse().expect("code"))
        .collect();
    assert!(listed(a("127.0.0.3"), &codes));
    assert!(listed(a("127.0.0.10"), &codes));
    assert!(!listed(a("127.0.0.4"), &codes));
    let everything: Vec<CodeRange> = vec!["0.0.0.0-255.255.255.255".parse().expect("all")];
    assert!(!listed(a("127.0.0.1"), &everything));
    assert!(!listed(a("192.0.2.1"), &everything));
}

#[test]
fn link_domains_of_text_and_html() {
    let message = b"From: a@example.com\r\n\
        Content-Type: multipart/alternative; boundary=b\r\n\r\n\
        --b\r\nContent-Type: text/plain\r\n\r\n\
        See https://Shop.Bad.Example./x and http://192.0.2.1/y, http://[2001:db8::1]/,\r\n\
        (http://other.example) ftp://ftp.example/ https://shop.bad.example/again\r\n\
        --b\r\nContent-Type: text/html\r\n\r\n\
        <a href=\"http://third.example/z\">x</a> <a href='https://b\xc3\xbccher.example/'>y</a>\r\n\
        --b--\r\n";
    assert_eq!(
        link_domains(message, 10),
        ["shop.bad.example", "other.example", "third.example"]
    );
    assert_eq!(
        link_domains(message, 2),
        ["shop.bad.example", "other.example"]
    );
    assert!(link_domains(message, 0).is_empty());
    assert!(link_domains(b"", 10).is_empty());
}

#[test]
fn from_addresses() {
    let from = |m: &[u8]| from_address(m);
    assert_eq!(
        from(b"From: \"Alice M\" <Alice@Example.COM>\r\n\r\n").as_deref(),
        Some("alice@example.com")
    );
    assert_eq!(
        from(b"Subject: x\r\nfrom: bob@example.org, carol@example.org\r\n\r\n").as_deref(),
        Some("bob@example.org")
    );
    assert_eq!(from(b"From: undisclosed\r\n\r\n"), None);
    assert_eq!(from(b"Subject: x\r\n\r\nFrom: a@b.example\r\n"), None);
    assert_eq!(from(b"From: <@example.com>\r\n\r\n"), None);
}

#[test]
fn network_keys() {
    assert_eq!(
        network_key("203.0.113.77".parse().expect("ip")),
        "203.0.113.0/24"
    );
    assert_eq!(
        network_key("2001:db8:1:2:3:4:5:6".parse().expect("ip")),
        "2001:db8:1::/48"
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(203, 0, 113, 77).to_ipv6_mapped());
    assert_eq!(network_key(mapped), "203.0.113.0/24");
    assert_eq!(network_key(IpAddr::V6(Ipv6Addr::LOCALHOST)), "::/48");
}
