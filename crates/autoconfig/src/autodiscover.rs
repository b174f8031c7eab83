//! Microsoft Autodiscover, Plain Old XML form (MS-OXDSCLI 2.2.3 request, 2.2.4 response).
//!
//! A client `POST`s a small document naming the user's address and the response schema it
//! wants; the server answers with the settings for that address, or with an error. The request
//! comes from anyone on the network before any login, so its parser is bounded in size and
//! depth, expands no entities and refuses a DOCTYPE outright (no internal subset, no external
//! entities, no "billion laughs").

use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;

use crate::xml::Writer;
use crate::{Offer, Protocol, Security};

/// The largest request body parsed, in bytes. Outlook's request is about 350 bytes; the
/// largest real ones (with a `LegacyDN`) stay under 1 KiB.
pub const REQUEST_BYTES_MAX: usize = 16 * 1024;

/// The deepest element nesting a request may have. A real request nests three deep
/// (`Autodiscover/Request/EMailAddress`).
pub const DEPTH_MAX: usize = 8;

/// The longest address accepted, in bytes: a path is at most 256 octets with its angle
/// brackets (RFC 5321 4.5.3.1.3).
pub const ADDRESS_BYTES_MAX: usize = 254;

/// The longest local part, in bytes (RFC 5321 4.5.3.1.1).
const LOCAL_PART_BYTES_MAX: usize = 64;

/// The longest domain label, in bytes (RFC 1035 2.3.4).
const LABEL_BYTES_MAX: usize = 63;

/// The request namespace Outlook uses (MS-OXDSCLI 2.2.3).
const REQUEST_SCHEMA_OUTLOOK: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006";

/// The request namespace Exchange ActiveSync clients use. We parse their requests so that we
/// can tell them their response schema is not supported (601) rather than that they sent
/// nonsense (600).
const REQUEST_SCHEMA_MOBILESYNC: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/mobilesync/requestschema/2006";

/// The one response schema we answer in: Outlook's, "2006a" (MS-OXDSCLI 2.2.4.1.1.2).
const RESPONSE_SCHEMA_OUTLOOK: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a";

/// The namespace of the response's root `Autodiscover` element and of errors.
const RESPONSE_SCHEMA_ROOT: &str =
    "http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006";

/// The response schema a request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseSchema {
    /// Outlook's POX settings, `.../outlook/responseschema/2006a`: the one we answer. A request
    /// without `AcceptableResponseSchema` gets it too.
    Outlook,
    /// Anything else (ActiveSync's `.../mobilesync/responseschema/2006`, say): answer with
    /// [`AutodiscoverErrorCode::UnsupportedSchema`].
    Unsupported(String),
}

/// What an Autodiscover request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutodiscoverRequest {
    /// The address whose settings the client wants: `local@domain`, at most
    /// [`ADDRESS_BYTES_MAX`] bytes, an unquoted local part and a domain of host-name labels.
    pub email: String,
    /// The response schema the client accepts.
    pub response_schema: ResponseSchema,
}

/// Why a request was refused. Each is answered with [`AutodiscoverErrorCode::InvalidRequest`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutodiscoverError {
    #[error("request body of {bytes} bytes is over {REQUEST_BYTES_MAX}")]
    TooLarge { bytes: usize },
    #[error("request body is not UTF-8")]
    NotUtf8,
    #[error("request has a DOCTYPE")]
    Doctype,
    #[error("request refers to entity {0:?}")]
    Entity(String),
    #[error("request nests elements deeper than {DEPTH_MAX}")]
    TooDeep,
    #[error("request is not well-formed XML: {0}")]
    Malformed(String),
    #[error("root element is not an Autodiscover request")]
    NotAutodiscover,
    #[error("request names {0} more than once")]
    Repeated(&'static str),
    #[error("request names no EMailAddress")]
    MissingAddress,
    #[error("EMailAddress is not an address")]
    BadAddress,
}

impl AutodiscoverError {
    /// The error code to answer with.
    pub fn code(&self) -> AutodiscoverErrorCode {
        AutodiscoverErrorCode::InvalidRequest
    }
}

/// The POX error codes we answer with (MS-OXDSCLI 2.2.4.1.1.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutodiscoverErrorCode {
    /// 500: no such address here (for a domain or user the server does not serve).
    UnknownAddress,
    /// 600: the request could not be read.
    InvalidRequest,
    /// 601: the client wants a response schema we do not provide.
    UnsupportedSchema,
}

impl AutodiscoverErrorCode {
    /// The number in `ErrorCode`.
    pub fn number(self) -> u16 {
        match self {
            AutodiscoverErrorCode::UnknownAddress => 500,
            AutodiscoverErrorCode::InvalidRequest => 600,
            AutodiscoverErrorCode::UnsupportedSchema => 601,
        }
    }

    /// The text in `Message`, as Exchange words it.
    pub fn message(self) -> &'static str {
        match self {
            AutodiscoverErrorCode::UnknownAddress => "The e-mail address cannot be found.",
            AutodiscoverErrorCode::InvalidRequest => "Invalid Request",
            AutodiscoverErrorCode::UnsupportedSchema => "Requested schema version not supported",
        }
    }
}

/// Which of the request's fields an element is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Email,
    Schema,
}

/// Where the parser is in the request's element tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    /// `Autodiscover`, the root.
    Root,
    /// `Autodiscover/Request`.
    Request,
    /// `Autodiscover/Request/EMailAddress` or `.../AcceptableResponseSchema`.
    Field(Field),
    /// Anything else: skipped with everything inside it.
    Other,
}

/// Reads an Autodiscover POX request (MS-OXDSCLI 2.2.3):
///
/// ```xml
/// <Autodiscover xmlns="http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006">
///   <Request>
///     <EMailAddress>user@example.com</EMailAddress>
///     <AcceptableResponseSchema>http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a</AcceptableResponseSchema>
///   </Request>
/// </Autodiscover>
/// ```
///
/// The root may be in Outlook's or ActiveSync's request namespace, or in none (some clients
/// leave it out). Elements the request does not need (`LegacyDN`, say) are skipped.
pub fn autodiscover_request(body: &[u8]) -> Result<AutodiscoverRequest, AutodiscoverError> {
    if body.len() > REQUEST_BYTES_MAX {
        return Err(AutodiscoverError::TooLarge { bytes: body.len() });
    }
    let text = std::str::from_utf8(body).map_err(|_| AutodiscoverError::NotUtf8)?;
    // A byte order mark may open the body.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut reader = NsReader::from_str(text);

    let mut path: Vec<Node> = Vec::new();
    let mut root_seen = false;
    let mut root_namespace = String::new();
    let mut email: Option<String> = None;
    let mut schema: Option<String> = None;

    loop {
        let (namespace, event) = reader
            .read_resolved_event()
            .map_err(|error| AutodiscoverError::Malformed(error.to_string()))?;
        let namespace = match namespace {
            ResolveResult::Bound(namespace) => Some(namespace.into_inner()),
            ResolveResult::Unbound => Some(""),
            ResolveResult::Unknown(_) => None,
        };
        let field = match path.last() {
            Some(Node::Field(field)) => Some(*field),
            _ => None,
        };
        match event {
            Event::Start(_) | Event::Empty(_) if path.is_empty() && root_seen => {
                return Err(AutodiscoverError::Malformed("a second root element".into()));
            }
            Event::Start(_) | Event::Empty(_) if field.is_some() => {
                return Err(AutodiscoverError::Malformed(
                    "an element inside a request field".into(),
                ));
            }
            Event::Start(ref start) | Event::Empty(ref start) => {
                if path.len() >= DEPTH_MAX {
                    return Err(AutodiscoverError::TooDeep);
                }
                let local = start.local_name();
                let local = local.into_inner();
                let node = if path.is_empty() {
                    let namespace = namespace.ok_or(AutodiscoverError::NotAutodiscover)?;
                    let known = [REQUEST_SCHEMA_OUTLOOK, REQUEST_SCHEMA_MOBILESYNC, ""];
                    if local != "Autodiscover" || !known.contains(&namespace) {
                        return Err(AutodiscoverError::NotAutodiscover);
                    }
                    root_seen = true;
                    root_namespace = namespace.to_string();
                    Node::Root
                } else {
                    // Our elements share the root's namespace; others are someone else's.
                    let ours = namespace == Some(root_namespace.as_str());
                    match (path.last(), local) {
                        (Some(Node::Root), "Request") if ours => Node::Request,
                        (Some(Node::Request), "EMailAddress") if ours => Node::Field(Field::Email),
                        (Some(Node::Request), "AcceptableResponseSchema") if ours => {
                            Node::Field(Field::Schema)
                        }
                        _ => Node::Other,
                    }
                };
                if let Node::Field(field) = node {
                    let (slot, name) = match field {
                        Field::Email => (&mut email, "EMailAddress"),
                        Field::Schema => (&mut schema, "AcceptableResponseSchema"),
                    };
                    if slot.is_some() {
                        return Err(AutodiscoverError::Repeated(name));
                    }
                    *slot = Some(String::new());
                }
                if matches!(event, Event::Start(_)) {
                    path.push(node);
                }
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(content) => {
                let content = content.xml10_content();
                if let Some(field) = field {
                    field_text(&mut email, &mut schema, field).push_str(&content);
                } else if path.is_empty() && !content.trim().is_empty() {
                    return Err(AutodiscoverError::Malformed("text outside the root".into()));
                }
            }
            Event::CData(content) => {
                if let Some(field) = field {
                    field_text(&mut email, &mut schema, field).push_str(&content.xml10_content());
                }
            }
            Event::GeneralRef(reference) => {
                // Only character references and XML's five predefined entities (XML 1.0 4.6);
                // with no DOCTYPE allowed, any other name is undeclared.
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => match &*reference {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "apos" => '\'',
                        "quot" => '"',
                        name => return Err(AutodiscoverError::Entity(name.to_string())),
                    },
                    Err(error) => return Err(AutodiscoverError::Malformed(error.to_string())),
                };
                if let Some(field) = field {
                    field_text(&mut email, &mut schema, field).push(resolved);
                }
            }
            Event::DocType(_) => return Err(AutodiscoverError::Doctype),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => {
                if !root_seen || !path.is_empty() {
                    return Err(AutodiscoverError::Malformed("unexpected end".into()));
                }
                break;
            }
        }
    }

    let email = email.ok_or(AutodiscoverError::MissingAddress)?;
    let email = email.trim();
    if email.is_empty() {
        return Err(AutodiscoverError::MissingAddress);
    }
    if !looks_like_address(email) {
        return Err(AutodiscoverError::BadAddress);
    }
    let response_schema = match schema.as_deref().map(str::trim) {
        None | Some(RESPONSE_SCHEMA_OUTLOOK) => ResponseSchema::Outlook,
        Some(other) => ResponseSchema::Unsupported(other.to_string()),
    };
    Ok(AutodiscoverRequest {
        email: email.to_string(),
        response_schema,
    })
}

/// The text of the field being read.
fn field_text<'a>(
    email: &'a mut Option<String>,
    schema: &'a mut Option<String>,
    field: Field,
) -> &'a mut String {
    let slot = match field {
        Field::Email => email,
        Field::Schema => schema,
    };
    slot.get_or_insert_with(String::new)
}

/// Whether `address` is `local@domain` with an unquoted local part (RFC 5322 3.4.1 dot-atom,
/// with RFC 6531's UTF-8) and a domain of host-name labels (RFC 1123 2.1, or U-labels), within
/// the lengths of RFC 5321 4.5.3.1. Quoted local parts are refused: no account of ours has one.
fn looks_like_address(address: &str) -> bool {
    if address.len() > ADDRESS_BYTES_MAX {
        return false;
    }
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| {
        c.is_ascii_alphanumeric()
            || "!#$%&'*+-/=?^_`{|}~".contains(c)
            || (!c.is_ascii() && !c.is_control() && !c.is_whitespace())
    };
    let local_ok = !local.is_empty()
        && local.len() <= LOCAL_PART_BYTES_MAX
        && local
            .split('.')
            .all(|atom| !atom.is_empty() && atom.chars().all(atext));
    let label_char =
        |c: char| c.is_ascii_alphanumeric() || c == '-' || (!c.is_ascii() && c.is_alphanumeric());
    let domain_ok = !domain.is_empty()
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= LABEL_BYTES_MAX
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(label_char)
        });
    local_ok && domain_ok
}

/// The settings for `email` (MS-OXDSCLI 2.2.4.1.1.2): `AccountType` email, `Action` settings,
/// one `Protocol` per endpoint of `offer` in its order. The login is the full address, with no
/// Windows domain (`DomainRequired` off) and no NTLM (`SPA` off). `SSL` is on everywhere, since
/// we never offer plaintext, and `Encryption` says how TLS starts: `SSL` for TLS from the first
/// byte, `TLS` for STARTTLS, as Outlook's account settings name them. (Thunderbird ignores
/// `Encryption` and guesses STARTTLS from the well-known plain ports.)
pub fn autodiscover_response(offer: &Offer, email: &str) -> String {
    let mut writer = Writer::new("");
    writer.open("Autodiscover", &[("xmlns", RESPONSE_SCHEMA_ROOT)]);
    writer.open("Response", &[("xmlns", RESPONSE_SCHEMA_OUTLOOK)]);
    writer.open("Account", &[]);
    writer.leaf("AccountType", "email");
    writer.leaf("Action", "settings");
    for endpoint in &offer.endpoints {
        writer.open("Protocol", &[]);
        let kind = match endpoint.protocol {
            Protocol::Imap => "IMAP",
            Protocol::Pop3 => "POP3",
            Protocol::Submission => "SMTP",
        };
        writer.leaf("Type", kind);
        writer.leaf("Server", &endpoint.host);
        writer.leaf("Port", &endpoint.port.to_string());
        writer.leaf("LoginName", email);
        writer.leaf("DomainRequired", "off");
        writer.leaf("SPA", "off");
        writer.leaf("SSL", "on");
        let encryption = match endpoint.security {
            Security::Tls => "SSL",
            Security::StartTls => "TLS",
        };
        writer.leaf("Encryption", encryption);
        writer.leaf("AuthRequired", "on");
        writer.close();
    }
    writer.finish()
}

/// The POX error answer (MS-OXDSCLI 2.2.4.1.1.1):
///
/// ```xml
/// <Autodiscover xmlns="http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006">
///   <Response>
///     <Error>
///       <ErrorCode>600</ErrorCode>
///       <Message>Invalid Request</Message>
///       <DebugData/>
///     </Error>
///   </Response>
/// </Autodiscover>
/// ```
///
/// Exchange adds `Time` and `Id` attributes to `Error` for its own logs; they are left out
/// (this crate has no clock, and clients do not read them).
pub fn autodiscover_error(code: AutodiscoverErrorCode) -> String {
    let mut writer = Writer::new("");
    writer.open("Autodiscover", &[("xmlns", RESPONSE_SCHEMA_ROOT)]);
    writer.open("Response", &[]);
    writer.open("Error", &[]);
    writer.leaf("ErrorCode", &code.number().to_string());
    writer.leaf("Message", code.message());
    writer.empty("DebugData");
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for good in [
            "user@example.com",
            "first.last+tag@mail.example.org",
            "o'brien@example.com",
            "jörg@bücher.example",
            "root@localhost",
        ] {
            assert!(looks_like_address(good), "{good}");
        }
        let long_local = format!("{}@example.com", "a".repeat(65));
        let long_label = format!("a@{}.com", "b".repeat(64));
        let long_address = format!("a@{}", vec!["c".repeat(60); 5].join("."));
        for bad in [
            "",
            "user",
            "@example.com",
            "user@",
            "us er@example.com",
            "user@exa mple.com",
            "\"quoted\"@example.com",
            ".user@example.com",
            "us..er@example.com",
            "user@-example.com",
            "user@example..com",
            "user@example.com.",
            "a<b@example.com",
            "user\u{7}@example.com",
            "user@ex_ample.com",
            &long_local,
            &long_label,
            &long_address,
        ] {
            assert!(!looks_like_address(bad), "{bad:?}");
        }
    }

    #[test]
    fn error_codes_are_exchanges() {
        assert_eq!(AutodiscoverErrorCode::InvalidRequest.number(), 600);
        assert_eq!(AutodiscoverErrorCode::UnsupportedSchema.number(), 601);
        assert_eq!(AutodiscoverErrorCode::UnknownAddress.number(), 500);
        assert_eq!(
            AutodiscoverError::BadAddress.code(),
            AutodiscoverErrorCode::InvalidRequest
        );
    }
}
