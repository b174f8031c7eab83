//! The three documents: each is well-formed XML (read back by quick-xml and by Python's expat,
//! the Apple profile by Python's plistlib) and names exactly the offer's hosts, ports and TLS
//! modes; hostile names cannot break them.

mod common;

use autoconfig::{
    AutodiscoverErrorCode, Endpoint, Offer, ProfileError, Protocol, Security, apple_profile,
    autodiscover_error, autodiscover_response, thunderbird,
};
use common::{Element, expat_accepts, parse, python};

fn endpoint(protocol: Protocol, host: &str, port: u16, security: Security) -> Endpoint {
    Endpoint {
        protocol,
        host: host.to_string(),
        port,
        security,
    }
}

/// Every kind of endpoint, with a STARTTLS one listed before an implicit-TLS one of the same
/// protocol, and distinct hosts so that a document naming the wrong one is caught.
fn full_offer() -> Offer {
    Offer {
        domain: "example.org".to_string(),
        display_name: "Example Mail".to_string(),
        endpoints: vec![
            endpoint(Protocol::Imap, "imap.example.org", 993, Security::Tls),
            endpoint(
                Protocol::Submission,
                "smtp1.example.org",
                587,
                Security::StartTls,
            ),
            endpoint(Protocol::Imap, "imap2.example.org", 143, Security::StartTls),
            endpoint(Protocol::Pop3, "pop.example.org", 995, Security::Tls),
            endpoint(
                Protocol::Submission,
                "smtp2.example.org",
                465,
                Security::Tls,
            ),
            endpoint(Protocol::Pop3, "pop2.example.org", 110, Security::StartTls),
        ],
    }
}

const HOSTILE: &str = "<&\"'>]]><!-- x";

#[test]
fn thunderbird_names_every_endpoint_in_order() {
    let offer = full_offer();
    let document = thunderbird(&offer);
    expat_accepts(&document);
    let root = parse(&document);
    assert_eq!(root.name, "clientConfig");
    assert_eq!(root.attribute("version"), Some("1.1"));
    let provider = root.one("emailProvider");
    assert_eq!(provider.attribute("id"), Some("example.org"));
    assert_eq!(provider.text_of("domain"), "example.org");
    assert_eq!(provider.text_of("displayName"), "Example Mail");
    assert_eq!(provider.text_of("displayShortName"), "example.org");

    let servers = |name: &str| -> Vec<(String, String, String, String)> {
        provider
            .all(name)
            .map(|server| {
                assert_eq!(server.text_of("username"), "%EMAILADDRESS%");
                assert_eq!(server.text_of("authentication"), "password-cleartext");
                (
                    server.attribute("type").unwrap_or("").to_string(),
                    server.text_of("hostname").to_string(),
                    server.text_of("port").to_string(),
                    server.text_of("socketType").to_string(),
                )
            })
            .collect()
    };
    let row = |t: &str, h: &str, p: &str, s: &str| (t.into(), h.into(), p.into(), s.into());
    assert_eq!(
        servers("incomingServer"),
        vec![
            row("imap", "imap.example.org", "993", "SSL"),
            row("imap", "imap2.example.org", "143", "STARTTLS"),
            row("pop3", "pop.example.org", "995", "SSL"),
            row("pop3", "pop2.example.org", "110", "STARTTLS"),
        ]
    );
    assert_eq!(
        servers("outgoingServer"),
        vec![
            row("smtp", "smtp1.example.org", "587", "STARTTLS"),
            row("smtp", "smtp2.example.org", "465", "SSL"),
        ]
    );
    // The format wants every incoming server before the first outgoing one.
    let kinds: Vec<&str> = provider
        .children
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| n.ends_with("Server"))
        .collect();
    let first_outgoing = kinds.iter().position(|k| *k == "outgoingServer").unwrap();
    assert!(
        kinds[first_outgoing..]
            .iter()
            .all(|k| *k == "outgoingServer"),
        "{kinds:?}"
    );
}

fn protocols(response: &Element) -> Vec<[String; 7]> {
    let account = response.one("Account");
    assert_eq!(account.text_of("AccountType"), "email");
    assert_eq!(account.text_of("Action"), "settings");
    account
        .all("Protocol")
        .map(|p| {
            assert_eq!(p.text_of("DomainRequired"), "off");
            assert_eq!(p.text_of("SPA"), "off");
            assert_eq!(p.text_of("AuthRequired"), "on");
            [
                p.text_of("Type").to_string(),
                p.text_of("Server").to_string(),
                p.text_of("Port").to_string(),
                p.text_of("SSL").to_string(),
                p.text_of("Encryption").to_string(),
                p.text_of("LoginName").to_string(),
                String::new(),
            ]
        })
        .collect()
}

#[test]
fn autodiscover_response_names_every_endpoint_in_order() {
    let offer = full_offer();
    let email = "alice@example.org";
    let document = autodiscover_response(&offer, email);
    expat_accepts(&document);
    let root = parse(&document);
    assert_eq!(root.name, "Autodiscover");
    assert_eq!(
        root.namespace,
        "http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006"
    );
    let response = root.one("Response");
    assert_eq!(
        response.namespace,
        "http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a"
    );
    let row =
        |t: &str, h: &str, p: &str, e: &str| [t, h, p, "on", e, email, ""].map(str::to_string);
    assert_eq!(
        protocols(response),
        vec![
            row("IMAP", "imap.example.org", "993", "SSL"),
            row("SMTP", "smtp1.example.org", "587", "TLS"),
            row("IMAP", "imap2.example.org", "143", "TLS"),
            row("POP3", "pop.example.org", "995", "SSL"),
            row("SMTP", "smtp2.example.org", "465", "SSL"),
            row("POP3", "pop2.example.org", "110", "TLS"),
        ]
    );
}

#[test]
fn autodiscover_errors_are_the_pox_error_form() {
    for (code, number, message) in [
        (
            AutodiscoverErrorCode::InvalidRequest,
            "600",
            "Invalid Request",
        ),
        (
            AutodiscoverErrorCode::UnsupportedSchema,
            "601",
            "Requested schema version not supported",
        ),
        (
            AutodiscoverErrorCode::UnknownAddress,
            "500",
            "The e-mail address cannot be found.",
        ),
    ] {
        let document = autodiscover_error(code);
        expat_accepts(&document);
        let root = parse(&document);
        assert_eq!(root.name, "Autodiscover");
        assert_eq!(
            root.namespace,
            "http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006"
        );
        let error = root.one("Response").one("Error");
        assert_eq!(error.text_of("ErrorCode"), number);
        assert_eq!(error.text_of("Message"), message);
        assert!(error.one("DebugData").children.is_empty());
    }
}

/// The profile as Python's plistlib reads it, as JSON; `None` if there is no python3.
fn plistlib(document: &str) -> Option<serde_json::Value> {
    let json = python(
        "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))",
        document.as_bytes(),
    )?;
    Some(serde_json::from_str(&json).expect("JSON from python"))
}

#[test]
fn apple_profile_prefers_implicit_tls_and_reads_back_with_plistlib() {
    let offer = full_offer();
    let document = apple_profile(&offer, "alice@example.org", "Alice Liddell").unwrap();
    let root = parse(&document);
    assert_eq!(root.name, "plist");
    assert_eq!(root.one("dict").all("key").count(), 8);

    let Some(plist) = plistlib(&document) else {
        return;
    };
    assert_eq!(plist["PayloadType"], "Configuration");
    assert_eq!(plist["PayloadVersion"], 1);
    let identifier = plist["PayloadIdentifier"].as_str().unwrap();
    assert!(identifier.starts_with("org.example."), "{identifier}");
    let content = plist["PayloadContent"].as_array().unwrap();
    assert_eq!(content.len(), 1);
    let mail = &content[0];
    let expected = serde_json::json!({
        "EmailAccountType": "EmailTypeIMAP",
        "EmailAddress": "alice@example.org",
        "EmailAccountName": "Alice Liddell",
        "IncomingMailServerHostName": "imap.example.org",
        "IncomingMailServerPortNumber": 993,
        "IncomingMailServerUseSSL": true,
        "IncomingMailServerUsername": "alice@example.org",
        "IncomingMailServerAuthentication": "EmailAuthPassword",
        // The implicit-TLS submission endpoint, though listed after the STARTTLS one.
        "OutgoingMailServerHostName": "smtp2.example.org",
        "OutgoingMailServerPortNumber": 465,
        "OutgoingMailServerUseSSL": true,
        "OutgoingMailServerUsername": "alice@example.org",
        "OutgoingMailServerAuthentication": "EmailAuthPassword",
        "OutgoingPasswordSameAsIncomingPassword": true,
        "PayloadType": "com.apple.mail.managed",
        "PayloadVersion": 1,
    });
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(&mail[key], value, "{key}");
    }
    assert_eq!(
        mail["PayloadIdentifier"].as_str().unwrap(),
        format!("{identifier}.account")
    );
    let uuids = [&plist["PayloadUUID"], &mail["PayloadUUID"]];
    assert_ne!(uuids[0], uuids[1]);
    for uuid in uuids {
        let uuid = uuid.as_str().unwrap();
        assert_eq!(uuid.len(), 36, "{uuid}");
    }

    // The same user gets the same profile; another user a different identity.
    assert_eq!(
        apple_profile(&offer, "alice@example.org", "Alice Liddell").unwrap(),
        document
    );
    let bob = plistlib(&apple_profile(&offer, "bob@example.org", "Bob").unwrap()).unwrap();
    assert_ne!(bob["PayloadUUID"], plist["PayloadUUID"]);
    assert_ne!(bob["PayloadIdentifier"], plist["PayloadIdentifier"]);
}

#[test]
fn apple_profile_falls_back_to_pop3_and_starttls() {
    let offer = Offer {
        domain: "example.net".to_string(),
        display_name: "Net".to_string(),
        endpoints: vec![
            endpoint(Protocol::Pop3, "pop.example.net", 110, Security::StartTls),
            endpoint(
                Protocol::Submission,
                "smtp.example.net",
                587,
                Security::StartTls,
            ),
        ],
    };
    let document = apple_profile(&offer, "carol@example.net", "Carol").unwrap();
    parse(&document);
    let Some(plist) = plistlib(&document) else {
        return;
    };
    let mail = &plist["PayloadContent"][0];
    assert_eq!(mail["EmailAccountType"], "EmailTypePOP");
    assert_eq!(mail["IncomingMailServerHostName"], "pop.example.net");
    assert_eq!(mail["IncomingMailServerPortNumber"], 110);
    assert_eq!(mail["IncomingMailServerUseSSL"], false);
    assert_eq!(mail["OutgoingMailServerPortNumber"], 587);
    assert_eq!(mail["OutgoingMailServerUseSSL"], false);
}

#[test]
fn apple_profile_needs_both_directions() {
    let mut offer = full_offer();
    offer
        .endpoints
        .retain(|e| e.protocol != Protocol::Submission);
    assert_eq!(
        apple_profile(&offer, "a@example.org", "A"),
        Err(ProfileError::NoSubmission)
    );
    let mut offer = full_offer();
    offer
        .endpoints
        .retain(|e| e.protocol == Protocol::Submission);
    assert_eq!(
        apple_profile(&offer, "a@example.org", "A"),
        Err(ProfileError::NoIncoming)
    );
}

/// Markup characters in every value a caller passes come back as the same text, and
/// characters XML cannot carry come back as U+FFFD; no document gains or loses an element.
#[test]
fn hostile_values_are_escaped() {
    let hostile_name = format!("{HOSTILE} \u{1}bell");
    let carried = format!("{HOSTILE} \u{FFFD}bell");
    let offer = Offer {
        domain: format!("{HOSTILE}.example"),
        display_name: hostile_name.clone(),
        endpoints: vec![
            endpoint(
                Protocol::Imap,
                &format!("{HOSTILE}.imap"),
                993,
                Security::Tls,
            ),
            endpoint(Protocol::Submission, "smtp.example", 465, Security::Tls),
        ],
    };
    let email = format!("{HOSTILE}@example");

    let document = thunderbird(&offer);
    expat_accepts(&document);
    let provider = parse(&document).one("emailProvider").clone();
    assert_eq!(provider.attribute("id"), Some(offer.domain.as_str()));
    assert_eq!(provider.text_of("displayName"), carried);
    assert_eq!(
        provider.one("incomingServer").text_of("hostname"),
        offer.endpoints[0].host
    );
    assert_eq!(provider.children.len(), 5);

    let document = autodiscover_response(&offer, &email);
    expat_accepts(&document);
    let root = parse(&document);
    let rows = protocols(root.one("Response"));
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][1], offer.endpoints[0].host);
    assert_eq!(rows[0][5], email);

    let document = apple_profile(&offer, &email, &hostile_name).unwrap();
    parse(&document);
    if let Some(plist) = plistlib(&document) {
        let mail = &plist["PayloadContent"][0];
        assert_eq!(mail["EmailAccountName"], carried.as_str());
        assert_eq!(mail["EmailAddress"], email.as_str());
        assert_eq!(
            mail["IncomingMailServerHostName"],
            offer.endpoints[0].host.as_str()
        );
    }
}
