//! The Autodiscover request parser: the forms real clients send, and hostile bodies refused
//! without a panic.

use autoconfig::{
    ADDRESS_BYTES_MAX, AutodiscoverError, AutodiscoverRequest, DEPTH_MAX, REQUEST_BYTES_MAX,
    ResponseSchema, autodiscover_request,
};
use proptest::prelude::*;

const OUTLOOK_REQUEST_NS: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006";
const OUTLOOK_RESPONSE_NS: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a";
const MOBILESYNC_REQUEST_NS: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/mobilesync/requestschema/2006";
const MOBILESYNC_RESPONSE_NS: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/mobilesync/responseschema/2006";

/// What Outlook sends, byte for byte in form: declaration, no whitespace between elements.
fn outlook_request(address: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><Request><EMailAddress>{address}</EMailAddress><AcceptableResponseSchema>{OUTLOOK_RESPONSE_NS}</AcceptableResponseSchema></Request></Autodiscover>"
    )
}

/// A request with `inner` inside `Request`, beside the address.
fn request_with(inner: &str) -> String {
    format!(
        "<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><Request><EMailAddress>user@example.com</EMailAddress>{inner}</Request></Autodiscover>"
    )
}

fn parse(body: &str) -> Result<AutodiscoverRequest, AutodiscoverError> {
    autodiscover_request(body.as_bytes())
}

fn outlook(email: &str) -> AutodiscoverRequest {
    AutodiscoverRequest {
        email: email.to_string(),
        response_schema: ResponseSchema::Outlook,
    }
}

#[test]
fn outlooks_request() {
    assert_eq!(
        parse(&outlook_request("user@example.com")),
        Ok(outlook("user@example.com"))
    );
}

#[test]
fn indented_request_with_crlf_bom_and_legacy_dn() {
    let body = format!(
        "\u{FEFF}<?xml version=\"1.0\" encoding=\"utf-8\"?>\r\n<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\">\r\n  <Request>\r\n    <EMailAddress>\r\n      first.last+tag@mail.example.com\r\n    </EMailAddress>\r\n    <LegacyDN>/o=First Organization/ou=Exchange/cn=Recipients/cn=user</LegacyDN>\r\n    <AcceptableResponseSchema>{OUTLOOK_RESPONSE_NS}</AcceptableResponseSchema>\r\n  </Request>\r\n</Autodiscover>\r\n"
    );
    assert_eq!(parse(&body), Ok(outlook("first.last+tag@mail.example.com")));
}

#[test]
fn prefixed_namespace_comments_cdata_and_references() {
    let body = format!(
        "<a:Autodiscover xmlns:a=\"{OUTLOOK_REQUEST_NS}\"><!-- hi --><a:Request><a:EMailAddress>us<![CDATA[er]]>&#64;ex&#x61;mple.com</a:EMailAddress></a:Request></a:Autodiscover>"
    );
    assert_eq!(parse(&body), Ok(outlook("user@example.com")));
}

#[test]
fn no_namespace_and_no_schema_mean_outlook() {
    let body = "<Autodiscover><Request><EMailAddress>user@example.com</EMailAddress></Request></Autodiscover>";
    assert_eq!(parse(body), Ok(outlook("user@example.com")));
}

#[test]
fn activesync_request_is_read_so_it_can_be_told_601() {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Autodiscover xmlns=\"{MOBILESYNC_REQUEST_NS}\"><Request><EMailAddress>user@example.com</EMailAddress><AcceptableResponseSchema>{MOBILESYNC_RESPONSE_NS}</AcceptableResponseSchema></Request></Autodiscover>"
    );
    assert_eq!(
        parse(&body),
        Ok(AutodiscoverRequest {
            email: "user@example.com".to_string(),
            response_schema: ResponseSchema::Unsupported(MOBILESYNC_RESPONSE_NS.to_string()),
        })
    );
}

#[test]
fn doctype_and_entities_are_refused() {
    let billion_laughs = format!(
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">]>{}",
        outlook_request("&lol2;@example.com")
            .split_once("?>")
            .unwrap()
            .1
    );
    assert_eq!(parse(&billion_laughs), Err(AutodiscoverError::Doctype));
    let external = format!(
        "<!DOCTYPE Autodiscover SYSTEM \"file:///etc/passwd\">{}",
        outlook_request("user@example.com")
            .split_once("?>")
            .unwrap()
            .1
    );
    assert_eq!(parse(&external), Err(AutodiscoverError::Doctype));
    assert_eq!(
        parse(&outlook_request("&xxe;@example.com")),
        Err(AutodiscoverError::Entity("xxe".to_string()))
    );
}

#[test]
fn size_is_bounded() {
    let request = outlook_request("user@example.com");
    // Padding with a comment to exactly the limit is read; one byte more is not.
    let pad = REQUEST_BYTES_MAX - request.len() - "<!---->".len();
    let at_limit = format!("{request}<!--{}-->", "x".repeat(pad));
    assert_eq!(at_limit.len(), REQUEST_BYTES_MAX);
    assert_eq!(parse(&at_limit), Ok(outlook("user@example.com")));
    let over = format!("{at_limit} ");
    assert_eq!(
        parse(&over),
        Err(AutodiscoverError::TooLarge {
            bytes: REQUEST_BYTES_MAX + 1
        })
    );
}

#[test]
fn depth_is_bounded() {
    // The root and Request are two levels; `extra` more make the deepest element's depth.
    let nested =
        |extra: usize| request_with(&format!("{}{}", "<x>".repeat(extra), "</x>".repeat(extra)));
    assert_eq!(
        parse(&nested(DEPTH_MAX - 2)),
        Ok(outlook("user@example.com"))
    );
    assert_eq!(
        parse(&nested(DEPTH_MAX - 1)),
        Err(AutodiscoverError::TooDeep)
    );
    // Unclosed nesting far past the limit stops at the limit, too.
    assert_eq!(
        parse(&format!("<Autodiscover>{}", "<x>".repeat(3_000))),
        Err(AutodiscoverError::TooDeep)
    );
}

#[test]
fn address_must_be_there_once_and_look_like_one() {
    let missing =
        format!("<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><Request></Request></Autodiscover>");
    assert_eq!(parse(&missing), Err(AutodiscoverError::MissingAddress));
    let empty = format!(
        "<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><Request><EMailAddress/></Request></Autodiscover>"
    );
    assert_eq!(parse(&empty), Err(AutodiscoverError::MissingAddress));
    assert_eq!(
        parse(&outlook_request("   ")),
        Err(AutodiscoverError::MissingAddress)
    );
    assert_eq!(
        parse(&request_with(
            "<EMailAddress>other@example.com</EMailAddress>"
        )),
        Err(AutodiscoverError::Repeated("EMailAddress"))
    );
    // An element of another namespace is not ours, whatever its name.
    let foreign = format!(
        "<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><Request><EMailAddress xmlns=\"urn:other\">user@example.com</EMailAddress></Request></Autodiscover>"
    );
    assert_eq!(parse(&foreign), Err(AutodiscoverError::MissingAddress));
    // Nor is an address outside Request.
    let outside = format!(
        "<Autodiscover xmlns=\"{OUTLOOK_REQUEST_NS}\"><EMailAddress>user@example.com</EMailAddress></Autodiscover>"
    );
    assert_eq!(parse(&outside), Err(AutodiscoverError::MissingAddress));

    for bad in [
        "user",
        "user@",
        "@example.com",
        "us er@example.com",
        "&lt;script&gt;@example.com",
        "user@example.com&#10;Bcc: x@y",
        "user&#0;@example.com",
    ] {
        let result = parse(&outlook_request(bad));
        assert!(
            matches!(
                result,
                Err(AutodiscoverError::BadAddress) | Err(AutodiscoverError::Malformed(_))
            ),
            "{bad}: {result:?}"
        );
    }
    let longest_domain = format!(
        "{}.{}.{}",
        "d".repeat(63),
        "e".repeat(63),
        "f".repeat(ADDRESS_BYTES_MAX - 64 - 1 - 128)
    );
    let longest = format!("{}@{longest_domain}", "l".repeat(64));
    assert_eq!(longest.len(), ADDRESS_BYTES_MAX);
    assert_eq!(parse(&outlook_request(&longest)), Ok(outlook(&longest)));
    let too_long = format!("{}@e{longest_domain}", "l".repeat(64));
    assert_eq!(
        parse(&outlook_request(&too_long)),
        Err(AutodiscoverError::BadAddress)
    );
}

#[test]
fn not_an_autodiscover_request() {
    assert_eq!(
        parse("<Other><Request><EMailAddress>user@example.com</EMailAddress></Request></Other>"),
        Err(AutodiscoverError::NotAutodiscover)
    );
    assert_eq!(
        parse(
            "<Autodiscover xmlns=\"urn:something-else\"><Request><EMailAddress>user@example.com</EMailAddress></Request></Autodiscover>"
        ),
        Err(AutodiscoverError::NotAutodiscover)
    );
    assert_eq!(
        parse("<p:Autodiscover><Request/></p:Autodiscover>"),
        Err(AutodiscoverError::NotAutodiscover)
    );
    assert_eq!(
        autodiscover_request(b"<Autodiscover>\xff</Autodiscover>"),
        Err(AutodiscoverError::NotUtf8)
    );
    for malformed in [
        "",
        "user@example.com",
        "<Autodiscover><Request><EMailAddress>user@example.com</EMailAddress></Request>",
        "<Autodiscover><Request><EMailAddress>user@example.com</Request></EMailAddress></Autodiscover>",
        "<Autodiscover/><Autodiscover/>",
        "<Autodiscover><Request><EMailAddress><b>user@example.com</b></EMailAddress></Request></Autodiscover>",
    ] {
        let result = parse(malformed);
        assert!(
            matches!(result, Err(AutodiscoverError::Malformed(_))),
            "{malformed}: {result:?}"
        );
    }
}

/// What any accepted request must satisfy, whatever the body was.
fn check_accepted(result: &Result<AutodiscoverRequest, AutodiscoverError>) {
    if let Ok(request) = result {
        assert!(request.email.len() <= ADDRESS_BYTES_MAX);
        assert!(request.email.contains('@'));
        assert!(
            !request
                .email
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || "<>&\"".contains(c)),
            "{:?}",
            request.email
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
        check_accepted(&autodiscover_request(&body));
    }

    #[test]
    fn mutated_requests_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut body = outlook_request("user@example.com").into_bytes();
        for (at, kind, byte) in edits {
            let i = at.index(body.len() + 1);
            match kind {
                0 if i < body.len() => body[i] = byte,
                1 => body.insert(i, byte),
                2 if i < body.len() => { body.remove(i); }
                _ => {
                    // Splice in a piece of markup a hostile client might try.
                    let pieces: [&[u8]; 6] = [b"<!DOCTYPE x>", b"&x;", b"<Request>", b"</Request>", b"&#0;", b"<![CDATA["];
                    let piece = pieces[usize::from(byte) % pieces.len()];
                    body.splice(i..i, piece.iter().copied());
                }
            }
        }
        if truncate {
            body.truncate(cut.index(body.len() + 1));
        }
        check_accepted(&autodiscover_request(&body));
    }

    #[test]
    fn any_valid_address_round_trips(
        local in "[a-z0-9!#$%&'*+/=?^_`{|}~-]{1,20}(\\.[a-z0-9_-]{1,10}){0,2}",
        domain in "[a-z0-9]{1,20}(\\.[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?){0,3}",
    ) {
        let address = format!("{local}@{domain}");
        let escaped = address.replace('&', "&amp;").replace('\'', "&apos;");
        prop_assert_eq!(parse(&outlook_request(&escaped)), Ok(outlook(&address)));
    }
}
