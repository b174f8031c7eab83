//! RFC 4469 CATENATE: an APPEND whose message is built from TEXT literals and the messages
//! or sections that IMAP URLs (RFC 5092) name, read from the user's own folders in the same
//! storage step as the APPEND (the session asks the shell for no other decision).
//!
//! Bounds: at most `catenate_parts_max` parts per message; a built message at most
//! `literal_bytes_max` (the APPENDLIMIT: `NO [TOOBIG]`, RFC 4469 6); all messages of one
//! command at most `command_bytes_max`; the bytes URLs add count against the shared literal
//! budget (`inflight`) until the APPEND is done, like the literals the framer holds.

use limits::Reservation;
use mime_structure::Structure;

use crate::backend::Backend;
use crate::fetch_plan::Spec;
use crate::parse::CatenatePart;
use crate::session::Session;

/// Section paths deeper than this name no part (mime-structure bounds nesting lower).
const SECTION_DEPTH_MAX: usize = 64;

/// Why a CATENATE is refused: the tagged NO's text.
pub(crate) enum Refusal {
    /// RFC 4469 6: `NO [BADURL url]`: the URL is invalid, unsupported or names nothing.
    BadUrl(String),
    /// RFC 4469 6: the message would be larger than the server accepts.
    TooBig,
    /// A limit of the command, or the shared budget: `NO [LIMIT]`.
    Limit(String),
}

impl Refusal {
    pub(crate) fn text(&self) -> String {
        match self {
            // url-resp-text (RFC 4469 6): no CR, LF or `]`, so the code stays one token.
            Refusal::BadUrl(url) => {
                let url: String = url
                    .chars()
                    .filter(|c| *c != ']' && !c.is_control())
                    .take(200)
                    .collect();
                format!("NO [BADURL {url}] Invalid or unknown URL")
            }
            Refusal::TooBig => "NO [TOOBIG] Message larger than the APPENDLIMIT".into(),
            Refusal::Limit(what) => format!("NO [LIMIT] {what}"),
        }
    }
}

/// What one URL names: a message of a folder, a section of it, a range of that.
#[derive(Clone)]
pub(crate) struct Reference {
    /// `None`: the selected folder (a URL relative to it, `;UID=n...`).
    folder: Option<String>,
    uidvalidity: Option<u32>,
    uid: u32,
    section: Spec,
    /// RFC 5092 `;PARTIAL=offset[.length]`.
    partial: Option<(u64, Option<u64>)>,
}

/// The state of one command's catenation: bytes built so far, the budget's share.
pub(crate) struct Builder {
    total_bytes: u64,
    reservation: Option<Reservation>,
}

impl Builder {
    pub(crate) fn new(s: &Session) -> Builder {
        Builder {
            total_bytes: 0,
            reservation: s.config.inflight.as_ref().map(|b| b.reservation()),
        }
    }

    /// The message `parts` make (RFC 4469 5: in order, each URL's bytes as FETCH would give
    /// `BODY.PEEK[section]<partial>`).
    pub(crate) fn build(
        &mut self,
        s: &Session,
        parts: Vec<CatenatePart>,
        b: &Backend<'_>,
    ) -> Result<Vec<u8>, Refusal> {
        let parts_max = s.config.catenate_parts_max;
        if parts.len() > parts_max {
            return Err(Refusal::Limit(format!(
                "At most {parts_max} parts per CATENATE"
            )));
        }
        let mut message = Vec::new();
        for part in parts {
            let bytes = match part {
                CatenatePart::Text(text) => text,
                CatenatePart::Url(url) => {
                    let bytes = resolve(s, &url, b).ok_or(Refusal::BadUrl(url))?;
                    self.hold(bytes.len() as u64)?;
                    bytes
                }
            };
            if (message.len() + bytes.len()) as u64 > s.config.literal_bytes_max {
                return Err(Refusal::TooBig);
            }
            self.total_bytes += bytes.len() as u64;
            if self.total_bytes > s.config.command_bytes_max {
                return Err(Refusal::Limit("CATENATE command too large".into()));
            }
            message.extend_from_slice(&bytes);
        }
        Ok(message)
    }

    /// Counts `bytes` a URL brought into memory against the shared budget.
    fn hold(&mut self, bytes: u64) -> Result<(), Refusal> {
        let Some(reservation) = self.reservation.as_mut() else {
            return Ok(());
        };
        let wanted = reservation.bytes().saturating_add(bytes);
        if reservation.grow_to(limits::rounded_up(wanted)) {
            Ok(())
        } else {
            Err(Refusal::Limit(
                "server busy, no room for this message now; try again later".into(),
            ))
        }
    }
}

/// The bytes `url` names in the user's folders, or `None` when it names nothing this
/// session may read.
fn resolve(s: &Session, url: &str, b: &Backend<'_>) -> Option<Vec<u8>> {
    let user = s.user.as_deref()?;
    let reference = parse_url(url, user)?;
    let (folder, uidvalidity) = match &reference.folder {
        Some(wire) => {
            let folder = folder_name(s, wire)?;
            let uidvalidity = b.store.status(user, &folder).ok()?.uidvalidity;
            (folder, uidvalidity)
        }
        None => {
            let selected = s.selected.as_ref()?;
            (selected.name.clone(), selected.uidvalidity)
        }
    };
    // RFC 5092 6: a UIDVALIDITY that is not the folder's names another folder's messages.
    if reference.uidvalidity.is_some_and(|v| v != uidvalidity) {
        return None;
    }
    let (summary, content) = b
        .store
        .read_with_summary(user, &folder, reference.uid)
        .ok()?;
    let structure =
        Structure::from_bytes(&summary.structure).unwrap_or_else(|_| Structure::parse(&content));
    if let Some(path) = spec_path(&reference.section)
        && !path.is_empty()
        && structure.part(path).is_none()
    {
        return None;
    }
    let data = super::fetch::section(&content, Some(&structure), &reference.section, false).ok()?;
    Some(match reference.partial {
        // RFC 5092 6: like FETCH's partial; past the end is empty.
        Some((offset, length)) => {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let length = length.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
            data[start..start.saturating_add(length).min(data.len())].to_vec()
        }
        None => data,
    })
}

/// The store's name of a folder in a URL: percent-decoded (RFC 5092 enc-mailbox), then
/// read like a name the client sends (modified UTF-7 unless UTF-8 is on); a name that is not
/// modified UTF-7 is taken as the UTF-8 RFC 5092 3.1 asks for.
fn folder_name(s: &Session, wire: &str) -> Option<String> {
    let decoded = String::from_utf8(percent_decode(wire)?).ok()?;
    Some(s.name_from_client(&decoded).unwrap_or(decoded))
}

fn spec_path(spec: &Spec) -> Option<&[u32]> {
    match spec {
        Spec::Full => None,
        Spec::Header(p) | Spec::Text(p) | Spec::Mime(p) | Spec::Part(p) => Some(p),
        Spec::HeaderFields(p, _, _) => Some(p),
    }
}

/// RFC 5092 and RFC 4469 5: `/folder[;UIDVALIDITY=n]/;UID=n[/;SECTION=s][/;PARTIAL=o[.l]]`
/// (the path of `imap://user@host/...`, whose user must be this session's), or the same from
/// `;UID=` on, relative to the selected folder. URLAUTH and other parameters are not
/// supported: `None`.
pub(crate) fn parse_url(url: &str, user: &str) -> Option<Reference> {
    let path = match strip_prefix_ignore_case(url, "imap://") {
        Some(rest) => {
            let (authority, path) = rest.split_at(rest.find('/')?);
            if let Some((userinfo, _host)) = authority.rsplit_once('@') {
                let name = percent_decode(userinfo)?;
                if name != user.as_bytes() {
                    return None;
                }
            }
            path
        }
        None => url,
    };
    let (folder, uidvalidity, rest) = match path.strip_prefix('/') {
        Some(path) => {
            // `;` cannot appear in an enc-mailbox (RFC 5092 9): the first one ends it.
            let end = path.find(';')?;
            let (folder, rest) = path.split_at(end);
            let (uidvalidity, rest) = match strip_prefix_ignore_case(rest, ";UIDVALIDITY=") {
                Some(tail) => {
                    let (number, tail) = tail.split_at(tail.find('/')?);
                    (Some(number.parse::<u32>().ok()?), tail.strip_prefix('/')?)
                }
                None => (None, rest),
            };
            let folder = folder.strip_suffix('/').unwrap_or(folder);
            (Some(folder.to_string()), uidvalidity, rest)
        }
        None => (None, None, path),
    };
    parse_message_part(rest, folder, uidvalidity)
}

/// `;UID=n[/;SECTION=s][/;PARTIAL=o[.l]]`.
fn parse_message_part(
    text: &str,
    folder: Option<String>,
    uidvalidity: Option<u32>,
) -> Option<Reference> {
    let mut fields = text.split("/;");
    let uid = strip_prefix_ignore_case(fields.next()?, ";UID=")?;
    let mut reference = Reference {
        folder,
        uidvalidity,
        uid: uid.parse().ok().filter(|&uid| uid > 0)?,
        section: Spec::Full,
        partial: None,
    };
    let mut next = fields.next();
    if let Some(section) = next.and_then(|f| strip_prefix_ignore_case(f, "SECTION=")) {
        let section = String::from_utf8(percent_decode(section)?).ok()?;
        reference.section = parse_section(&section)?;
        next = fields.next();
    }
    if let Some(partial) = next.and_then(|f| strip_prefix_ignore_case(f, "PARTIAL=")) {
        let (offset, length) = match partial.split_once('.') {
            Some((o, l)) => (o, Some(l.parse().ok().filter(|&l: &u64| l > 0)?)),
            None => (partial, None),
        };
        reference.partial = Some((offset.parse().ok()?, length));
        next = fields.next();
    }
    // Anything else (URLAUTH, EXPIRE, a second SECTION): not supported.
    next.is_none().then_some(reference)
}

/// A FETCH section spec without its brackets (RFC 9051 6.4.5): `HEADER`, `TEXT`, a part
/// number `1.2`, a part's `1.2.HEADER`, `1.2.TEXT` or `1.2.MIME`. HEADER.FIELDS is not
/// supported in URLs: `None`.
fn parse_section(text: &str) -> Option<Spec> {
    let upper = text.to_ascii_uppercase();
    let mut rest = upper.as_str();
    let mut path = Vec::new();
    while rest.starts_with(|c: char| c.is_ascii_digit()) {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        path.push(rest[..digits].parse::<u32>().ok().filter(|&n| n > 0)?);
        if path.len() > SECTION_DEPTH_MAX {
            return None;
        }
        rest = &rest[digits..];
        if rest.is_empty() {
            return Some(Spec::Part(path));
        }
        rest = rest.strip_prefix('.')?;
    }
    match rest {
        "HEADER" => Some(Spec::Header(path)),
        "TEXT" => Some(Spec::Text(path)),
        "MIME" if !path.is_empty() => Some(Spec::Mime(path)),
        _ => None,
    }
}

fn strip_prefix_ignore_case<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// RFC 3986 2.1 percent-encoding undone; `None` for a bad escape.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Option<String> {
        parse_url(url, "bob").map(|r| {
            let section = match &r.section {
                Spec::Full => "full".to_string(),
                Spec::Header(p) => format!("header {p:?}"),
                Spec::Text(p) => format!("text {p:?}"),
                Spec::Mime(p) => format!("mime {p:?}"),
                Spec::Part(p) => format!("part {p:?}"),
                Spec::HeaderFields(p, _, _) => format!("fields {p:?}"),
            };
            format!(
                "{:?} {:?} {} {section} {:?}",
                r.folder, r.uidvalidity, r.uid, r.partial
            )
        })
    }

    /// RFC 5092 6's forms, as RFC 4469 5 uses them.
    #[test]
    fn urls_name_a_message_section_and_range() {
        for (url, want) in [
            ("/INBOX/;UID=3", "Some(\"INBOX\") None 3 full None"),
            (
                "/Drafts;UIDVALIDITY=385759045/;UID=20/;section=1.MIME",
                "Some(\"Drafts\") Some(385759045) 20 mime [1] None",
            ),
            (
                "/a/b%20c/;uid=2/;SECTION=header/;PARTIAL=10.5",
                "Some(\"a/b%20c\") None 2 header [] Some((10, Some(5)))",
            ),
            (
                "/x/;UID=1/;SECTION=2.3",
                "Some(\"x\") None 1 part [2, 3] None",
            ),
            (
                "/x/;UID=1/;SECTION=2.TEXT",
                "Some(\"x\") None 1 text [2] None",
            ),
            (
                "/x/;UID=1/;PARTIAL=7",
                "Some(\"x\") None 1 full Some((7, None))",
            ),
            (";UID=9/;SECTION=TEXT", "None None 9 text [] None"),
            (
                "imap://bob@mail.example/INBOX/;UID=4",
                "Some(\"INBOX\") None 4 full None",
            ),
            (
                "imap://mail.example/INBOX/;UID=4",
                "Some(\"INBOX\") None 4 full None",
            ),
        ] {
            assert_eq!(parsed(url).as_deref(), Some(want), "{url}");
        }
        for bad in [
            "",
            "/INBOX",
            "/INBOX/;UID=0",
            "/INBOX/;UID=x",
            "/INBOX;UIDVALIDITY=x/;UID=1",
            "/INBOX/;UID=1/;SECTION=MIME",
            "/INBOX/;UID=1/;SECTION=1.BOGUS",
            "/INBOX/;UID=1/;SECTION=HEADER.FIELDS%20(To)",
            "/INBOX/;UID=1/;PARTIAL=1.0",
            "/INBOX/;UID=1/;URLAUTH=anonymous",
            "/INBOX/;UID=1/;SECTION=1/;SECTION=2",
            "imap://alice@mail.example/INBOX/;UID=4",
            "imap://mail.example",
        ] {
            assert!(parsed(bad).is_none(), "{bad}");
        }
        assert_eq!(percent_decode("a%20b%2f").as_deref(), Some(&b"a b/"[..]));
        assert_eq!(percent_decode("%ZZ"), None);
        assert_eq!(percent_decode("%2"), None);
    }
}
