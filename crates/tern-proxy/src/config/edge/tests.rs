use super::*;

#[test]
fn templates_name_known_variables_only() {
    let t = Template::parse("ip=${client_ip}; id=${request_id}").unwrap();
    assert_eq!(
        t.0,
        vec![
            Part::Text("ip=".into()),
            Part::Var(Var::ClientIp),
            Part::Text("; id=".into()),
            Part::Var(Var::RequestId),
        ]
    );
    assert_eq!(Template::parse("DENY").unwrap().literal(), Some("DENY"));
    let e = Template::parse("${nope}").unwrap_err();
    assert!(e.contains("unknown variable ${nope}"), "{e}");
    assert!(Template::parse("${sni").is_err());
    assert!(Template::parse("a\nb").is_err());
}

#[test]
fn rules_cannot_touch_forwarding_or_framing_fields() {
    for name in [
        "X-Forwarded-For",
        "Forwarded",
        "Content-Length",
        "Transfer-Encoding",
    ] {
        let mut o = HeaderRuleOptions::default();
        o.set.insert(name.into(), "x".into());
        let e = header_rules(&o, "request_headers").unwrap_err();
        assert!(e.message.contains("cannot change it"), "{}", e.message);
    }
}

#[test]
fn hsts_needs_a_max_age() {
    assert!(hsts("max-age=31536000; includeSubDomains; preload").is_ok());
    assert!(hsts("includeSubDomains").is_err());
    assert!(hsts("max-age=1; sometimes").is_err());
}

#[test]
fn rates_and_lists_parse() {
    let r = Rate::parse("20/s").unwrap();
    assert_eq!((r.count, r.per), (20, Duration::from_secs(1)));
    assert!(Rate::parse("0/s").is_err());
    assert!(Rate::parse("20").is_err());
    let deny = nets(&["192.0.2.0/24".into(), "2001:db8::1".into()], "deny").unwrap();
    assert!(!admits(&[], &deny, "192.0.2.9".parse().unwrap()));
    assert!(!admits(&[], &deny, "::ffff:192.0.2.9".parse().unwrap()));
    assert!(admits(&[], &deny, "198.51.100.1".parse().unwrap()));
    let allow = nets(&["127.0.0.0/8".into()], "allow").unwrap();
    assert!(admits(&allow, &[], "127.0.0.1".parse().unwrap()));
    assert!(!admits(&allow, &[], "::1".parse().unwrap()));
}

#[test]
fn a_client_id_header_needs_the_proxies_it_is_believed_from() {
    let mut o = ListenerOptions {
        client_id_header: Some("X-Client-Id".into()),
        ..ListenerOptions::default()
    };
    let err = client_id(&o).unwrap_err().message;
    assert!(err.contains("needs client_id_from"), "{err}");
    o.client_id_from = vec!["10.0.0.0/8".into()];
    let c = client_id(&o).unwrap().unwrap();
    assert_eq!(&*c.header, "x-client-id");
    assert!(c.trusts("::ffff:10.1.2.3".parse().unwrap()));
    assert!(!c.trusts("192.0.2.1".parse().unwrap()));
    o.client_id_header = None;
    let err = client_id(&o).unwrap_err().message;
    assert!(err.contains("only applies with client_id_header"), "{err}");
}
