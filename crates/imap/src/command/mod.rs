//! One file per command. `run` checks the state a command needs (RFC 9051 3) and runs it if
//! it reads and changes no mail; one that does waits for the shell's storage step, where
//! `run_with_store` hands it to its file. `no` is the one place store errors become
//! responses.

pub(crate) mod append;
pub(crate) mod authenticate;
pub(crate) mod capability;
pub(crate) mod catenate;
pub(crate) mod close;
pub(crate) mod compress;
pub(crate) mod context;
pub(crate) mod copy;
pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod enable;
pub(crate) mod expunge;
pub(crate) mod fetch;
pub(crate) mod id;
pub(crate) mod idle;
pub(crate) mod list;
pub(crate) mod logout;
pub(crate) mod namespace;
pub(crate) mod noop;
pub(crate) mod quota;
pub(crate) mod rename;
pub(crate) mod search;
pub(crate) mod searchres;
pub(crate) mod select;
pub(crate) mod sequence;
pub(crate) mod sort;
pub(crate) mod special_use;
pub(crate) mod starttls;
pub(crate) mod status;
pub(crate) mod store;
pub(crate) mod subscribe;

use ::mail_model::StoreError;
use imap_codec::imap_types::command::CommandBody;
use imap_codec::imap_types::extensions::thread::ThreadingAlgorithm;
use imap_codec::imap_types::mailbox::Mailbox;

use crate::backend::Backend;
use crate::parse::Request;
use crate::session::{Session, State};

/// Which states a command is valid in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Any,
    NotAuthenticated,
    Authenticated,
    Selected,
}

/// Checks the state `request` needs (RFC 9051 3) and runs it if it reads and changes no
/// mail; one that does is handed back, for the next storage step ([`run_with_store`]).
pub(crate) fn run(s: &mut Session, tag: &str, request: Request) -> Option<Request> {
    let needs = match &request {
        Request::Append { .. } | Request::List(_) | Request::CreateSpecialUse { .. } => {
            Needs::Authenticated
        }
        Request::Search { .. } | Request::SortReturn { .. } | Request::CancelUpdate(_) => {
            Needs::Selected
        }
        Request::Codec(body) => match body {
            CommandBody::Capability
            | CommandBody::Noop
            | CommandBody::Logout
            | CommandBody::Id { .. } => Needs::Any,
            CommandBody::StartTLS
            | CommandBody::Authenticate { .. }
            | CommandBody::Login { .. } => Needs::NotAuthenticated,
            CommandBody::Check
            | CommandBody::Close
            | CommandBody::Unselect
            | CommandBody::Expunge
            | CommandBody::ExpungeUid { .. }
            | CommandBody::Search { .. }
            | CommandBody::Sort { .. }
            | CommandBody::Thread { .. }
            | CommandBody::Fetch { .. }
            | CommandBody::Store { .. }
            | CommandBody::Copy { .. }
            | CommandBody::Move { .. } => Needs::Selected,
            _ => Needs::Authenticated,
        },
    };
    let ok = match needs {
        Needs::Any => true,
        Needs::NotAuthenticated => s.state == State::NotAuthenticated,
        Needs::Authenticated => matches!(s.state, State::Authenticated | State::Selected),
        Needs::Selected => s.state == State::Selected,
    };
    if !ok {
        let text = match needs {
            Needs::NotAuthenticated => "BAD Already authenticated",
            Needs::Selected if s.state != State::NotAuthenticated => "BAD No mailbox selected",
            _ => "BAD Log in first",
        };
        s.tagged(tag, text);
        s.error();
        return None;
    }
    let selected = s.state == State::Selected;
    match request {
        Request::CancelUpdate(tags) => context::cancel(s, tag, &tags),
        Request::SortReturn { body, .. } if !matches!(body, CommandBody::Sort { .. }) => {
            s.tagged(tag, "BAD Bad SORT")
        }
        Request::Codec(body) if !needs_store(&body, selected) => codec_local(s, tag, body),
        other => return Some(other),
    }
    None
}

/// Whether running the command reads or changes mail. CAPABILITY, NOOP, ID and NAMESPACE
/// do only in a selected folder, for the updates their answer carries (RFC 9051 7); the
/// forms imap-codec lacks (APPEND, LIST, SEARCH RETURN, SORT RETURN, CREATE USE) always do.
fn needs_store(body: &CommandBody<'_>, selected: bool) -> bool {
    match body {
        CommandBody::Capability
        | CommandBody::Noop
        | CommandBody::Check
        | CommandBody::Id { .. }
        | CommandBody::Namespace => selected,
        CommandBody::Select { .. }
        | CommandBody::Examine { .. }
        | CommandBody::Create { .. }
        | CommandBody::Delete { .. }
        | CommandBody::Rename { .. }
        | CommandBody::Subscribe { .. }
        | CommandBody::Unsubscribe { .. }
        | CommandBody::Status { .. }
        | CommandBody::Idle
        | CommandBody::Close
        | CommandBody::Expunge
        | CommandBody::ExpungeUid { .. }
        | CommandBody::Search { .. }
        | CommandBody::Sort { .. }
        | CommandBody::Thread { .. }
        | CommandBody::Fetch { .. }
        | CommandBody::Store { .. }
        | CommandBody::Copy { .. }
        | CommandBody::Move { .. }
        | CommandBody::GetQuota { .. }
        | CommandBody::GetQuotaRoot { .. } => true,
        _ => false,
    }
}

/// A command that reads and changes no mail.
fn codec_local(s: &mut Session, tag: &str, body: CommandBody<'static>) {
    match body {
        CommandBody::Capability => capability::run(s, tag, None),
        CommandBody::Noop | CommandBody::Check => noop::run(s, tag, None),
        CommandBody::Id { parameters } => id::run(s, tag, &parameters, None),
        CommandBody::Namespace => namespace::run(s, tag, None),
        CommandBody::Logout => logout::run(s, tag),
        CommandBody::StartTLS => starttls::run(s, tag),
        CommandBody::Compress { algorithm } => compress::run(s, tag, algorithm),
        CommandBody::Authenticate {
            mechanism,
            initial_response,
        } => authenticate::authenticate(
            s,
            tag,
            &mechanism,
            initial_response.map(|r| r.declassify().to_vec()),
        ),
        CommandBody::Login { username, password } => {
            authenticate::login(s, tag, username.as_ref(), password.declassify().as_ref())
        }
        CommandBody::Enable { capabilities } => enable::run(s, tag, &capabilities.into_inner()),
        CommandBody::Unselect => close::unselect(s, tag),
        CommandBody::SetQuota { .. } => quota::set_quota(s, tag),
        _ => {
            s.tagged(tag, "BAD Command not supported");
            s.error();
        }
    }
}

/// Runs a command [`run`] handed back, against the store; `now` (Unix seconds) is the
/// INTERNALDATE of an APPEND that gives none.
pub(crate) fn run_with_store(
    s: &mut Session,
    tag: &str,
    request: Request,
    b: &Backend<'_>,
    now: i64,
) {
    match request {
        Request::Append { mailbox, messages } => match s.name_from_client(&mailbox) {
            Ok(mailbox) => append::run(s, tag, &mailbox, messages, b, now),
            Err(answer) => s.tagged(tag, answer),
        },
        Request::List(req) => list::run(s, tag, decode_list_patterns(s, req), b),
        Request::Search { uid, ret, criteria } => search::run(s, tag, uid, ret, criteria, b),
        Request::SortReturn {
            ret,
            body:
                CommandBody::Sort {
                    sort_criteria,
                    charset,
                    search_criteria,
                    uid,
                },
        } => sort::sort(
            s,
            tag,
            sort_criteria,
            charset,
            search_criteria,
            uid,
            Some(ret),
            b,
        ),
        Request::SortReturn { .. } => s.tagged(tag, "BAD Bad SORT"),
        Request::CancelUpdate(tags) => context::cancel(s, tag, &tags),
        Request::CreateSpecialUse { mailbox, uses } => match s.name_from_client(&mailbox) {
            Ok(mailbox) => create::run(s, tag, &mailbox, &uses, b),
            Err(answer) => s.tagged(tag, answer),
        },
        Request::Codec(body) => codec_with_store(s, tag, body, b),
    }
}

fn codec_with_store(s: &mut Session, tag: &str, body: CommandBody<'static>, b: &Backend<'_>) {
    // The store's name for a mailbox argument, or the tagged NO for a badly encoded one.
    macro_rules! name {
        ($mailbox:expr) => {
            match s.name_from_client(&mailbox_name(&$mailbox)) {
                Ok(name) => name,
                Err(answer) => return s.tagged(tag, answer),
            }
        };
    }
    match body {
        CommandBody::Capability => capability::run(s, tag, Some(b)),
        CommandBody::Noop | CommandBody::Check => noop::run(s, tag, Some(b)),
        CommandBody::Select {
            mailbox,
            parameters,
        } => select::run(s, tag, &name!(mailbox), false, &parameters, b),
        CommandBody::Examine {
            mailbox,
            parameters,
        } => select::run(s, tag, &name!(mailbox), true, &parameters, b),
        CommandBody::Create { mailbox } => create::run(s, tag, &name!(mailbox), &[], b),
        CommandBody::Delete { mailbox } => delete::run(s, tag, &name!(mailbox), b),
        CommandBody::Rename { from, to } => rename::run(s, tag, &name!(from), &name!(to), b),
        CommandBody::Subscribe { mailbox } => subscribe::run(s, tag, &name!(mailbox), true, b),
        CommandBody::Unsubscribe { mailbox } => subscribe::run(s, tag, &name!(mailbox), false, b),
        CommandBody::Namespace => namespace::run(s, tag, Some(b)),
        CommandBody::Status {
            mailbox,
            item_names,
        } => status::run(s, tag, &name!(mailbox), &item_names, b),
        CommandBody::Idle => idle::run(s, tag, b),
        CommandBody::Close => close::close(s, tag, b),
        CommandBody::Expunge => expunge::run(s, tag, None, b),
        CommandBody::ExpungeUid { sequence_set } => expunge::run(s, tag, Some(sequence_set), b),
        CommandBody::Search { criteria, uid, .. } => search::run(s, tag, uid, None, criteria, b),
        CommandBody::Sort {
            sort_criteria,
            charset,
            search_criteria,
            uid,
        } => sort::sort(
            s,
            tag,
            sort_criteria,
            charset,
            search_criteria,
            uid,
            None,
            b,
        ),
        CommandBody::Thread {
            algorithm,
            charset,
            search_criteria,
            uid,
        } => match algorithm {
            ThreadingAlgorithm::OrderedSubject => {
                sort::thread_ordered_subject(s, tag, charset, search_criteria, uid, b)
            }
            ThreadingAlgorithm::References => {
                sort::thread_references(s, tag, charset, search_criteria, uid, b)
            }
            _ => s.tagged(tag, "BAD Unsupported threading algorithm"),
        },
        CommandBody::Fetch {
            sequence_set,
            macro_or_item_names,
            uid,
            modifiers,
        } => fetch::run(s, tag, sequence_set, macro_or_item_names, uid, modifiers, b),
        CommandBody::Store {
            sequence_set,
            kind,
            response,
            flags,
            uid,
            modifiers,
        } => store::run(
            s,
            tag,
            sequence_set,
            kind,
            response,
            flags,
            uid,
            modifiers,
            b,
        ),
        CommandBody::Copy {
            sequence_set,
            mailbox,
            uid,
        } => copy::run(s, tag, sequence_set, &name!(mailbox), uid, false, b),
        CommandBody::Move {
            sequence_set,
            mailbox,
            uid,
        } => copy::run(s, tag, sequence_set, &name!(mailbox), uid, true, b),
        CommandBody::Id { parameters } => id::run(s, tag, &parameters, Some(b)),
        CommandBody::GetQuota { root } => quota::get_quota(s, tag, root.as_ref(), b),
        CommandBody::GetQuotaRoot { mailbox } => quota::get_quota_root(s, tag, &name!(mailbox), b),
        // What needs no store runs as it would without one.
        other => codec_local(s, tag, other),
    }
}

/// The reference and patterns of a LIST as store names. Patterns are names with wildcards,
/// which modified UTF-7 leaves alone. One that does not decode is not an error (RFC 3501
/// 6.3.8, RFC 9051 6.3.9: a pattern is not a mailbox name, and LIST answers OK whatever it
/// matches, as Dovecot does): no name's encoding fails to decode, so it matches nothing and
/// is dropped; a reference that does not decode drops every pattern.
fn decode_list_patterns(
    s: &Session,
    mut req: crate::parse::ListRequest,
) -> crate::parse::ListRequest {
    match s.name_from_client(&req.reference) {
        Ok(reference) => {
            req.reference = reference;
            req.patterns = req
                .patterns
                .iter()
                .filter_map(|p| s.name_from_client(p).ok())
                .collect();
        }
        Err(_) => req.patterns.clear(),
    }
    req
}

/// A mailbox argument as sent (see `Session::name_from_client` for its decoding).
pub(crate) fn mailbox_name(mailbox: &Mailbox<'_>) -> String {
    match mailbox {
        Mailbox::Inbox => "INBOX".to_string(),
        Mailbox::Other(other) => String::from_utf8_lossy(other.as_ref()).into_owned(),
    }
}

/// The answer to an addition (APPEND, COPY, MOVE) while the server's disk is full or below
/// its free-space reserve (RFC 5530 3: a temporary failure of a subsystem).
pub(crate) const STORAGE_FULL: &str =
    "NO [UNAVAILABLE] Insufficient system storage, try again later";

/// The tagged NO (or BAD) for a store error: the one place they meet the wire.
pub(crate) fn no(s: &mut Session, tag: &str, e: &StoreError) {
    let text = match e {
        // RFC 5530 response codes.
        StoreError::NoSuchFolder { .. } | StoreError::NoSuchUser(_) => {
            "NO [NONEXISTENT] No such mailbox".to_string()
        }
        StoreError::NoSuchMessage { .. } => "NO [EXPUNGEISSUED] Message was expunged".to_string(),
        StoreError::FolderExists { .. } => "NO [ALREADYEXISTS] Mailbox already exists".to_string(),
        StoreError::InvalidName { reason, .. } => {
            format!(
                "NO [CANNOT] Invalid mailbox name: {}",
                crate::session::one_line(reason)
            )
        }
        StoreError::TooLarge { what } => {
            format!("NO [TOOBIG] Too large: {}", crate::session::one_line(what))
        }
        StoreError::Limit { what } => {
            format!(
                "NO [LIMIT] Limit reached: {}",
                crate::session::one_line(what)
            )
        }
        StoreError::Invalid(what) => format!("NO [CANNOT] {}", crate::session::one_line(what)),
        // RFC 5530 3: UNAVAILABLE, a temporary failure: the disk is full, for now.
        StoreError::Io { .. } if e.is_out_of_space() => STORAGE_FULL.to_string(),
        StoreError::Corrupt { .. }
        | StoreError::Io { .. }
        | StoreError::Failed(_)
        | StoreError::Config(_)
        | StoreError::NewerFormat { .. } => "NO [SERVERBUG] Internal storage error".to_string(),
    };
    s.tagged(tag, &text);
}

impl Session {
    /// A tagged OK, after the updates the command may carry (RFC 9051 7.5.1: no EXPUNGE
    /// during FETCH, STORE or SEARCH, whose sequence numbers the client is reading).
    pub(crate) fn done(&mut self, tag: &str, text: &str, backend: &Backend<'_>, expunge: bool) {
        self.sync(backend, expunge);
        self.tagged(tag, text);
    }

    /// Brings the selected folder's view up to date and writes the untagged responses
    /// for what changed (RFC 9051 7.3.1 EXISTS, 7.5.1 EXPUNGE, 7.5.2 FETCH FLAGS).
    pub(crate) fn sync(&mut self, backend: &Backend<'_>, expunge: bool) {
        let (Some(user), Some(selected)) = (self.user.as_deref(), self.selected.as_mut()) else {
            return;
        };
        match selected.sync(
            backend.store,
            user,
            expunge,
            (self.enabled.condstore, self.enabled.qresync),
            &mut self.out,
        ) {
            Ok(()) => context::after_sync(self, backend),
            Err(e) if e.is_not_found() => {
                // RFC 9051 7.1: the folder was deleted under us.
                self.selected = None;
                self.state = State::Authenticated;
                self.untagged("BYE Selected mailbox was deleted");
                self.close();
            }
            // The next command that touches the store reports the failure.
            Err(_) => {}
        }
    }
}
