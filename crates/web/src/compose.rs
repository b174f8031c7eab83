//! Writing mail: a new message, a reply, a reply to all, a forward (the original attached
//! whole, as `message/rfc822`, so its attachments go along), with files attached. The
//! message is built here (mail-builder) and submitted by the backend through the submission
//! path; a copy goes to Sent.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Multipart, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use mail_builder::MessageBuilder;
use mail_parser::{Address, MessageParser};
use rand::RngExt as _;
use serde::Deserialize;

use crate::app::{App, Denied, backend_problem, blocking, render_page};
use crate::backend::{Backend, BackendError, FolderInfo, SendError};
use crate::sessions::{Session, same_token};

/// Recipients of one message at most (the submission service's `recipients_max` applies
/// again in the backend).
const RECIPIENTS_MAX: usize = 100;
/// One text field of the form (the body is bounded by the upload limit).
const FIELD_BYTES_MAX: usize = 64 << 10;

#[derive(Template)]
#[template(path = "compose.html")]
pub(crate) struct ComposePage {
    pub(crate) user: String,
    pub(crate) csrf: String,
    pub(crate) folders: Vec<FolderInfo>,
    pub(crate) folder: String,
    pub(crate) draft: Draft,
    pub(crate) problem: Option<String>,
}

/// What the form holds (files apart).
#[derive(Debug, Clone, Default)]
pub(crate) struct Draft {
    pub(crate) to: String,
    pub(crate) cc: String,
    pub(crate) subject: String,
    pub(crate) body: String,
    pub(crate) in_reply_to: String,
    pub(crate) references: String,
    /// A forward: the original, attached whole.
    pub(crate) forward_folder: String,
    pub(crate) forward_uid: String,
}

#[derive(Deserialize)]
pub(crate) struct ComposeQuery {
    folder: Option<String>,
    uid: Option<u32>,
    /// `reply`, `all` or `forward`.
    mode: Option<String>,
}

fn list(a: Option<&Address<'_>>) -> Vec<String> {
    a.map(|a| {
        a.iter()
            .filter_map(|x| x.address().map(str::to_string))
            .collect()
    })
    .unwrap_or_default()
}

/// The form prefilled from the message being answered or forwarded.
fn draft_from(raw: &[u8], mode: &str, user: &str, folder: &str, uid: u32) -> Draft {
    let Some(m) = MessageParser::default().parse(raw) else {
        return Draft::default();
    };
    let subject = m.subject().unwrap_or("").to_string();
    let from = list(m.from());
    let reply_to = list(m.reply_to());
    let text = m.body_text(0).map(|t| t.into_owned()).unwrap_or_default();
    let id = m.message_id().unwrap_or("").to_string();
    let mut references: Vec<String> = match m.references().as_text_list() {
        Some(list) => list.iter().map(|s| s.to_string()).collect(),
        None => m
            .references()
            .as_text()
            .map(|s| vec![s.to_string()])
            .unwrap_or_default(),
    };
    if !id.is_empty() {
        references.push(id.clone());
    }
    let date = m.date().map(|d| d.to_rfc822()).unwrap_or_default();
    if mode == "forward" {
        return Draft {
            subject: if subject.to_ascii_lowercase().starts_with("fwd:") {
                subject
            } else {
                format!("Fwd: {subject}")
            },
            body: "\n\n(The forwarded message is attached.)\n".to_string(),
            forward_folder: folder.to_string(),
            forward_uid: uid.to_string(),
            ..Draft::default()
        };
    }
    // RFC 5322 3.6.4: In-Reply-To and References of a reply.
    let mut to = if reply_to.is_empty() {
        from.clone()
    } else {
        reply_to
    };
    let mut cc = Vec::new();
    if mode == "all" {
        to.extend(list(m.to()));
        cc = list(m.cc());
    }
    let mine = |a: &String| !a.eq_ignore_ascii_case(user);
    to.retain(mine);
    cc.retain(mine);
    to.dedup();
    let quoted: String = text.lines().map(|l| format!("> {l}\n")).collect();
    Draft {
        to: to.join(", "),
        cc: cc.join(", "),
        subject: if subject.to_ascii_lowercase().starts_with("re:") {
            subject
        } else {
            format!("Re: {subject}")
        },
        body: format!(
            "\n\nOn {date}, {} wrote:\n{quoted}",
            from.first().map_or("", String::as_str)
        ),
        in_reply_to: id,
        references: references.join(" "),
        ..Draft::default()
    }
}

pub(crate) async fn form<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ComposeQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let user = session.user.clone();
    let answered = match (q.folder.clone(), q.uid) {
        (Some(folder), Some(uid)) => Some((folder, uid)),
        _ => None,
    };
    let fetched = blocking(&app, move |b| {
        let original = match &answered {
            Some((folder, uid)) => Some(b.message(&user, folder, *uid)?),
            None => None,
        };
        Ok((b.folders(&user)?, original))
    })
    .await;
    let (folders, original) = match fetched {
        Ok(x) => x,
        Err(e) => return backend_problem(e),
    };
    let draft = match (original, &q.folder, q.uid) {
        (Some(stored), Some(folder), Some(uid)) => draft_from(
            &stored.content,
            q.mode.as_deref().unwrap_or("reply"),
            &session.user,
            folder,
            uid,
        ),
        _ => Draft::default(),
    };
    render_page(&ComposePage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        draft,
        problem: None,
    })
}

/// Addresses from a form field: comma- or semicolon-separated, each `local@domain` (a
/// display name in front of `<...>` is dropped).
fn addresses(field: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in field.split([',', ';']) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let address = match (part.rfind('<'), part.rfind('>')) {
            (Some(a), Some(b)) if a < b => &part[a + 1..b],
            _ => part,
        }
        .trim();
        let valid = address
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
            && !address.contains(char::is_whitespace)
            && !address.contains(['<', '>', '"', '\r', '\n']);
        if !valid {
            return Err(format!("“{part}” is not an address"));
        }
        out.push(address.to_string());
    }
    Ok(out)
}

struct Upload {
    draft: Draft,
    csrf: String,
    files: Vec<(String, String, Vec<u8>)>,
    /// The bytes held, counted against the server's in-flight budget until sent.
    _held: Option<limits::Reservation>,
}

/// Reads the form. The CSRF token must be its first field, so a forged upload is refused
/// before its files are read; every field and the whole are bounded.
async fn read_form(
    mut multipart: Multipart,
    files_max: usize,
    budget: Option<&Arc<limits::ByteBudget>>,
) -> Result<Upload, String> {
    let mut held = budget.map(|b| b.reservation());
    let mut up = Upload {
        draft: Draft::default(),
        csrf: String::new(),
        files: Vec::new(),
        _held: None,
    };
    let mut total = 0usize;
    let mut first = true;
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| format!("the form could not be read ({e})"))?
    {
        let name = field.name().unwrap_or("").to_string();
        if first && name != "csrf" {
            return Err("forged".into());
        }
        first = false;
        if name == "attachment" {
            let file = field.file_name().unwrap_or("attachment").to_string();
            let ctype = field
                .content_type()
                .unwrap_or("application/octet-stream")
                .to_string();
            let bytes = field
                .bytes()
                .await
                .map_err(|e| format!("the file could not be read ({e})"))?;
            if bytes.is_empty() && file.is_empty() {
                continue;
            }
            total += bytes.len();
            if total > files_max {
                return Err("the attachments are too large".into());
            }
            // As SMTP's DATA: the bytes held count against the server's budget.
            if let Some(r) = held.as_mut()
                && !r.grow_to(total as u64)
            {
                return Err("the server is busy; try again shortly".into());
            }
            if !bytes.is_empty() {
                up.files.push((file, ctype, bytes.to_vec()));
            }
            continue;
        }
        let text = field
            .text()
            .await
            .map_err(|e| format!("the form could not be read ({e})"))?;
        if text.len() > FIELD_BYTES_MAX && name != "body" {
            return Err(format!("the field {name} is too long"));
        }
        total += text.len();
        if total > files_max {
            return Err("the message is too large".into());
        }
        if let Some(r) = held.as_mut()
            && !r.grow_to(total as u64)
        {
            return Err("the server is busy; try again shortly".into());
        }
        match name.as_str() {
            "csrf" => up.csrf = text,
            "to" => up.draft.to = text,
            "cc" => up.draft.cc = text,
            "subject" => up.draft.subject = text,
            "body" => up.draft.body = text,
            "in_reply_to" => up.draft.in_reply_to = text,
            "references" => up.draft.references = text,
            "forward_folder" => up.draft.forward_folder = text,
            "forward_uid" => up.draft.forward_uid = text,
            _ => {}
        }
    }
    up._held = held;
    Ok(up)
}

/// A token for a header field: no line breaks, nothing outside printable ASCII but spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_string()
}

pub(crate) async fn send<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    multipart: Multipart,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let up = match read_form(
        multipart,
        app.config.message_bytes_max,
        app.config.inflight.as_ref(),
    )
    .await
    {
        Ok(up) if same_token(&up.csrf, &session.csrf) => up,
        Ok(_) => return Denied::Forged.into_response(),
        Err(why) if why == "forged" => return Denied::Forged.into_response(),
        Err(why) => return again(&app, session, Draft::default(), &why).await,
    };
    let draft = up.draft;
    let _held = up._held;
    let (to, cc) = match (addresses(&draft.to), addresses(&draft.cc)) {
        (Ok(to), Ok(cc)) => (to, cc),
        (Err(why), _) | (_, Err(why)) => return again(&app, session, draft, &why).await,
    };
    if to.is_empty() {
        return again(&app, session, draft, "Say who the message is for.").await;
    }
    let recipients: Vec<String> = to.iter().chain(&cc).cloned().collect();
    if recipients.len() > RECIPIENTS_MAX {
        return again(&app, session, draft, "Too many recipients.").await;
    }
    // The original of a forward, read under the session's user like any message.
    // The message and what it carries are held until it is queued: one of the few at once.
    let _turn = app.whole_messages.acquire().await;
    let forwarded = match draft.forward_uid.parse::<u32>() {
        Ok(uid) if !draft.forward_folder.is_empty() => {
            let (user, folder) = (session.user.clone(), draft.forward_folder.clone());
            match blocking(&app, move |b| b.message(&user, &folder, uid)).await {
                Ok(stored) => Some(stored.content),
                Err(e) => return backend_problem(e),
            }
        }
        _ => None,
    };
    let domain = session
        .user
        .rsplit_once('@')
        .map_or("localhost", |(_, d)| d);
    let id: [u8; 16] = rand::rng().random();
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut message = MessageBuilder::new()
        .from(session.user.as_str())
        .to(to.clone())
        .subject(one_line(&draft.subject))
        .date(now)
        .message_id(format!("{id}@{domain}"))
        .text_body(draft.body.replace("\r\n", "\n"));
    if !cc.is_empty() {
        message = message.cc(cc.clone());
    }
    let in_reply_to = one_line(&draft.in_reply_to);
    if !in_reply_to.is_empty() {
        message = message.in_reply_to(in_reply_to);
    }
    let references: Vec<String> = draft
        .references
        .split_whitespace()
        .map(|r| r.trim_matches(['<', '>']).to_string())
        .filter(|r| !r.is_empty())
        .collect();
    if !references.is_empty() {
        message = message.references(references);
    }
    for (name, ctype, bytes) in up.files {
        message = message.attachment(ctype, name, bytes);
    }
    if let Some(original) = forwarded {
        message = message.attachment("message/rfc822", "forwarded.eml", original);
    }
    let raw = match message.write_to_vec() {
        Ok(raw) => raw,
        Err(e) => return backend_problem(BackendError::Failed(format!("building: {e}"))),
    };
    match app
        .backend
        .send(&session.user, &recipients, raw, peer.ip())
        .await
    {
        Ok(()) => Redirect::to("/mail?folder=Sent").into_response(),
        Err(SendError::Recipient(why)) | Err(SendError::Refused(why)) => {
            again(&app, session, draft, &why).await
        }
        Err(SendError::Temporary(why)) => {
            again(
                &app,
                session,
                draft,
                &format!("Not sent: {why}. Try again shortly."),
            )
            .await
        }
    }
}

/// The form again, filled in as it was (files must be chosen again), with the problem.
async fn again<B: Backend>(
    app: &Arc<App<B>>,
    session: Session,
    draft: Draft,
    why: &str,
) -> Response {
    let user = session.user.clone();
    let folders = blocking(app, move |b| b.folders(&user))
        .await
        .unwrap_or_default();
    let mut r = render_page(&ComposePage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        draft,
        problem: Some(why.to_string()),
    });
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked() {
        assert_eq!(
            addresses("a@x.org, Bob <b@y.org>; ").unwrap(),
            vec!["a@x.org".to_string(), "b@y.org".to_string()]
        );
        assert!(addresses("nobody").is_err());
        assert!(addresses("a@x.org\r\nBcc: c@z.org").is_err());
        assert!(addresses("a b@x.org").is_err());
    }

    #[test]
    fn a_reply_to_all_quotes_and_threads() {
        let raw = b"From: Ann <ann@x.org>\r\nTo: me@y.org, cat@z.org\r\nCc: dan@w.org\r\n\
                    Subject: Plans\r\nMessage-ID: <m1@x.org>\r\nReferences: <m0@x.org>\r\n\r\nLunch?\r\n";
        let d = draft_from(raw, "all", "me@y.org", "INBOX", 3);
        assert_eq!(d.to, "ann@x.org, cat@z.org");
        assert_eq!(d.cc, "dan@w.org");
        assert_eq!(d.subject, "Re: Plans");
        assert!(d.body.contains("> Lunch?"), "{}", d.body);
        assert_eq!(d.in_reply_to, "m1@x.org");
        assert_eq!(d.references, "m0@x.org m1@x.org");
        let f = draft_from(raw, "forward", "me@y.org", "INBOX", 3);
        assert_eq!(
            (f.subject.as_str(), f.forward_uid.as_str()),
            ("Fwd: Plans", "3")
        );
        assert!(f.to.is_empty());
    }
}
