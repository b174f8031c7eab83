//! The connection and its commands.

use bytes::Bytes;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use imap_codec::GreetingCodec;
use imap_codec::decode::Decoder;
use imap_codec::imap_types::response::GreetingKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Error;
use crate::framer::Framer;
use crate::parse::{self, Kind, Resp};
use crate::seqset;

/// Longest sequence set put into one command; keeps command lines under ~8 KiB.
const SET_MAX: usize = 7 * 1024;
/// RFC 7888 3: LITERAL- allows non-synchronizing literals up to 4096 octets.
const LITERAL_MINUS_MAX: usize = 4096;

/// How to secure the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// TLS from the first byte (port 993, RFC 8314 3.2).
    Implicit,
    /// Plain connect, then STARTTLS (RFC 3501 6.2.1) before LOGIN.
    StartTls,
    /// No TLS at all (tests, loopback).
    None,
}

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub tls: Tls,
    pub user: String,
    pub password: String,
    /// Skip certificate verification (self-signed test servers only).
    pub accept_invalid_certs: bool,
    /// Limit for connecting and for every single read or write; a command that keeps
    /// receiving data (a 100k-message FETCH) may take longer in total.
    pub timeout: Duration,
    /// Largest single response accepted (a FETCH with its literals); default 64 MiB.
    pub response_bytes_max: usize,
    /// Use BINARY (RFC 3516) when the server offers it (default). Off, the client acts as
    /// if the server lacked it: for a server that stores every part in base64 anyway
    /// (Dovecot converts binary parts on APPEND), base64 on the wire spares it an encode
    /// on every APPEND and a decode on every FETCH.
    pub use_binary: bool,
}

impl Config {
    /// A config with defaults: implicit TLS, 30 s timeout, 64 MiB responses.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        Config {
            host: host.into(),
            port,
            tls: Tls::Implicit,
            user: user.into(),
            password: password.into(),
            accept_invalid_certs: false,
            timeout: Duration::from_secs(30),
            response_bytes_max: 64 * 1024 * 1024,
            use_binary: true,
        }
    }
}

/// What the server offers after login (RFC 3501 7.2.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub binary: bool,
    pub literal_plus: bool,
    pub literal_minus: bool,
    pub multiappend: bool,
    pub uidplus: bool,
    pub condstore: bool,
    pub quota: bool,
    pub idle: bool,
    pub esearch: bool,
    pub starttls: bool,
    pub login_disabled: bool,
    pub auth_plain: bool,
    pub sasl_ir: bool,
    /// `APPENDLIMIT=n` (RFC 7889 2); None when absent or without a global value.
    pub appendlimit: Option<u64>,
    /// Every capability as sent, upper-cased.
    pub all: Vec<String>,
}

impl Capabilities {
    fn from_list(all: Vec<String>) -> Self {
        let has = |name: &str| all.iter().any(|c| c == name);
        Capabilities {
            binary: has("BINARY"),
            literal_plus: has("LITERAL+"),
            literal_minus: has("LITERAL-"),
            multiappend: has("MULTIAPPEND"),
            uidplus: has("UIDPLUS"),
            condstore: has("CONDSTORE") || has("QRESYNC"),
            quota: has("QUOTA") || all.iter().any(|c| c.starts_with("QUOTA=RES-")),
            idle: has("IDLE"),
            esearch: has("ESEARCH"),
            starttls: has("STARTTLS"),
            login_disabled: has("LOGINDISABLED"),
            auth_plain: has("AUTH=PLAIN"),
            sasl_ir: has("SASL-IR"),
            appendlimit: all
                .iter()
                .find_map(|c| c.strip_prefix("APPENDLIMIT=")?.parse().ok()),
            all,
        }
    }
}

/// State of a selected mailbox (RFC 3501 6.3.1, RFC 7162 3.1.2.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mailbox {
    pub uid_validity: u32,
    pub uid_next: u32,
    pub exists: u32,
    pub highest_modseq: Option<u64>,
}

enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// Between STARTTLS and the end of the handshake, or after a failed handshake.
    Gone,
}

/// One part of a command line.
enum Part<'a> {
    Text(Cow<'a, [u8]>),
    /// A literal (RFC 3501 4.3) or, with `binary`, a literal8 (RFC 3516 4.1).
    Literal {
        data: &'a [u8],
        binary: bool,
    },
}

/// The data of the FETCH response for `uid` among a command's untagged responses (empty if
/// it had none); None if no FETCH came back for the UID.
fn fetched(done: Done, uid: u32) -> Option<Bytes> {
    done.untagged.into_iter().find_map(|r| match r {
        Resp::Fetch {
            uid: Some(u), data, ..
        } if u == uid => Some(data.unwrap_or_default()),
        _ => None,
    })
}

/// A message's state as [`Client::uid_fetch_state`] got it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    pub uid: u32,
    /// As sent: system flags (`\\Seen`) and keywords; never `\\Recent`.
    pub flags: Vec<String>,
    /// Unix seconds, when asked for.
    pub internal_date: Option<i64>,
    /// When the server has CONDSTORE.
    pub modseq: Option<u64>,
    /// The whole message (`BODY[]`), when asked for.
    pub content: Option<Bytes>,
}

/// A folder as `LIST` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Decoded from modified UTF-7.
    pub name: String,
    pub delimiter: Option<char>,
    /// Not `\\Noselect` / `\\NonExistent`.
    pub selectable: bool,
}

/// A tagged OK and the untagged responses that came with it.
struct Done {
    untagged: Vec<Resp>,
    code: Option<String>,
}

/// One IMAP connection, authenticated.
pub struct Client {
    conn: Conn,
    framer: Framer,
    caps: Capabilities,
    timeout: Duration,
    next_tag: u32,
    /// Set after an error that leaves the connection in an unknown state.
    broken: Option<String>,
    /// Text of an untagged BYE seen on this connection.
    bye: Option<String>,
    /// `Config::use_binary`.
    use_binary: bool,
}

impl Client {
    /// Connects, reads the greeting, does STARTTLS if asked, logs in (LOGIN, or
    /// AUTHENTICATE PLAIN when LOGINDISABLED) and reads CAPABILITY again.
    pub async fn connect(cfg: &Config) -> Result<Client, Error> {
        let tcp = tokio::time::timeout(
            cfg.timeout,
            TcpStream::connect((cfg.host.as_str(), cfg.port)),
        )
        .await
        .map_err(|_| Error::Timeout)??;
        let _ = tcp.set_nodelay(true);
        let conn = match cfg.tls {
            Tls::Implicit => Conn::Tls(Box::new(tls_handshake(cfg, tcp).await?)),
            Tls::StartTls | Tls::None => Conn::Plain(tcp),
        };
        let mut client = Client {
            conn,
            framer: Framer::new(cfg.response_bytes_max),
            caps: Capabilities::default(),
            timeout: cfg.timeout,
            next_tag: 1,
            broken: None,
            bye: None,
            use_binary: cfg.use_binary,
        };
        client.setup(cfg).await?;
        Ok(client)
    }

    /// Like [`Client::connect`], but logs in with `AUTHENTICATE PLAIN` and the response
    /// `plain` makes from the TLS exporter value (RFC 5705, 32 bytes, `label`, no context) of
    /// this connection (None without TLS): `(authzid, authcid, password)`. For a
    /// pre-authentication bound to the TLS session.
    pub async fn connect_plain_bound(
        cfg: &Config,
        label: &[u8],
        plain: impl FnOnce(Option<[u8; 32]>) -> (String, String, String),
    ) -> Result<Client, Error> {
        let tcp = tokio::time::timeout(
            cfg.timeout,
            TcpStream::connect((cfg.host.as_str(), cfg.port)),
        )
        .await
        .map_err(|_| Error::Timeout)??;
        let _ = tcp.set_nodelay(true);
        let conn = match cfg.tls {
            Tls::Implicit => Conn::Tls(Box::new(tls_handshake(cfg, tcp).await?)),
            Tls::StartTls | Tls::None => Conn::Plain(tcp),
        };
        let mut client = Client {
            conn,
            framer: Framer::new(cfg.response_bytes_max),
            caps: Capabilities::default(),
            timeout: cfg.timeout,
            next_tag: 1,
            broken: None,
            bye: None,
            use_binary: cfg.use_binary,
        };
        client.greet(cfg).await?;
        client.refresh_capabilities().await?;
        let binding = match &client.conn {
            Conn::Tls(tls) => tls
                .get_ref()
                .1
                .export_keying_material([0u8; 32], label, None)
                .ok(),
            _ => None,
        };
        let (authzid, authcid, password) = plain(binding);
        use base64::Engine;
        let sasl = format!("{authzid}\0{authcid}\0{password}");
        let b64 = base64::engine::general_purpose::STANDARD.encode(sasl);
        if client.caps.sasl_ir {
            client
                .command(vec![text(&format!("AUTHENTICATE PLAIN {b64}"))])
                .await?;
        } else {
            let tag = client.send(vec![text("AUTHENTICATE PLAIN")]).await?;
            client.wait_continue(&tag).await?;
            client.write(format!("{b64}\r\n").as_bytes()).await?;
            client.finish(&tag).await?;
        }
        client.refresh_capabilities().await?;
        Ok(client)
    }

    /// The greeting and STARTTLS; true if the server greeted with PREAUTH.
    async fn greet(&mut self, cfg: &Config) -> Result<bool, Error> {
        // RFC 3501 7.1: greeting is OK, PREAUTH or BYE.
        let greeting = self.read_response_bytes().await?;
        let preauth = match GreetingCodec::default().decode(&greeting) {
            Ok((_, g)) => match g.kind {
                GreetingKind::Ok => false,
                GreetingKind::PreAuth => true,
                GreetingKind::Bye => {
                    return Err(self.fail(Error::Bye(parse::snippet(&greeting))));
                }
            },
            Err(_) => {
                return Err(self.fail(Error::Protocol(format!(
                    "bad greeting {}",
                    parse::snippet(&greeting)
                ))));
            }
        };
        if cfg.tls == Tls::StartTls {
            // RFC 3501 6.2.1: STARTTLS, then nothing may be left over in plain text.
            self.command(vec![text("STARTTLS")]).await?;
            if self.framer.pending() > 0 {
                return Err(self.fail(Error::Protocol(
                    "data after STARTTLS OK before the TLS handshake".into(),
                )));
            }
            let Conn::Plain(tcp) = std::mem::replace(&mut self.conn, Conn::Gone) else {
                return Err(self.fail(Error::Protocol("STARTTLS on a TLS connection".into())));
            };
            self.conn = Conn::Tls(Box::new(tls_handshake(cfg, tcp).await?));
        }
        Ok(preauth)
    }

    async fn setup(&mut self, cfg: &Config) -> Result<(), Error> {
        let preauth = self.greet(cfg).await?;
        if !preauth {
            self.refresh_capabilities().await?;
            self.login(cfg).await?;
        }
        // Capabilities may change after login (RFC 3501 6.2.3), so ask again.
        self.refresh_capabilities().await
    }

    async fn refresh_capabilities(&mut self) -> Result<(), Error> {
        let done = self.command(vec![text("CAPABILITY")]).await?;
        for r in done.untagged {
            if let Resp::Capability(list) = r {
                self.caps = Capabilities::from_list(list);
                self.caps.binary &= self.use_binary;
            }
        }
        Ok(())
    }

    async fn login(&mut self, cfg: &Config) -> Result<(), Error> {
        if self.caps.login_disabled {
            if !self.caps.auth_plain {
                return Err(Error::Unsupported(
                    "LOGIN (LOGINDISABLED) and no AUTH=PLAIN".into(),
                ));
            }
            // RFC 4616 2: [authzid] NUL authcid NUL passwd, base64 (RFC 3501 6.2.2).
            use base64::Engine;
            let mut sasl = Vec::new();
            sasl.push(0);
            sasl.extend_from_slice(cfg.user.as_bytes());
            sasl.push(0);
            sasl.extend_from_slice(cfg.password.as_bytes());
            let b64 = base64::engine::general_purpose::STANDARD.encode(sasl);
            if self.caps.sasl_ir {
                // RFC 4959 3: initial response on the command line.
                self.command(vec![text(&format!("AUTHENTICATE PLAIN {b64}"))])
                    .await?;
            } else {
                let tag = self.send(vec![text("AUTHENTICATE PLAIN")]).await?;
                self.wait_continue(&tag).await?;
                self.write(format!("{b64}\r\n").as_bytes()).await?;
                self.finish(&tag).await?;
            }
        } else {
            self.command(vec![
                text("LOGIN "),
                astring(cfg.user.as_bytes()),
                text(" "),
                astring(cfg.password.as_bytes()),
            ])
            .await?;
        }
        Ok(())
    }

    /// What the server offered after login.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// For tests and for working around broken servers: turn off extensions the server
    /// offers (e.g. `binary = false` to use BODY[TEXT], `multiappend = false`). Turning on
    /// what the server does not offer leads to BAD responses.
    pub fn capabilities_mut(&mut self) -> &mut Capabilities {
        &mut self.caps
    }

    /// Changes the limit for each read and write from now on (`Config::timeout` at
    /// connect): a caller may allow a command it knows to be slow more than others.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// False once an error left the connection in an unknown state; drop it then.
    pub fn is_usable(&self) -> bool {
        self.broken.is_none()
    }

    /// CREATE (RFC 3501 6.3.3); an existing mailbox is fine (RFC 5530 3 ALREADYEXISTS,
    /// or Dovecot's "Mailbox already exists").
    pub async fn create(&mut self, folder: &str) -> Result<(), Error> {
        match self
            .command(vec![
                text("CREATE "),
                Part::Text(parse::mailbox(folder).into()),
            ])
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::No(t))
                if t.starts_with("[ALREADYEXISTS]")
                    || t.to_ascii_lowercase().contains("already exists") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// SELECT (RFC 3501 6.3.1), with `(CONDSTORE)` when offered (RFC 7162 3.1.8).
    pub async fn select(&mut self, folder: &str) -> Result<Mailbox, Error> {
        self.open_mailbox("SELECT ", folder).await
    }

    async fn open_mailbox(&mut self, verb: &str, folder: &str) -> Result<Mailbox, Error> {
        let mut parts = vec![text(verb), Part::Text(parse::mailbox(folder).into())];
        if self.caps.condstore {
            parts.push(text(" (CONDSTORE)"));
        }
        let done = self.command(parts).await?;
        let mut mailbox = Mailbox::default();
        for r in &done.untagged {
            match r {
                Resp::Exists(n) => mailbox.exists = *n,
                Resp::Status {
                    tag: None,
                    code: Some(code),
                    ..
                } => {
                    let (name, value) = code.split_once(' ').unwrap_or((code, ""));
                    match name.to_ascii_uppercase().as_str() {
                        "UIDVALIDITY" => mailbox.uid_validity = value.parse().unwrap_or(0),
                        "UIDNEXT" => mailbox.uid_next = value.parse().unwrap_or(0),
                        "HIGHESTMODSEQ" => mailbox.highest_modseq = value.parse().ok(),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if mailbox.uid_validity == 0 {
            return Err(Error::Protocol(format!("{verb}{folder}: no UIDVALIDITY")));
        }
        Ok(mailbox)
    }

    /// EXAMINE (RFC 3501 6.3.2): SELECT read-only, with `(CONDSTORE)` when offered.
    pub async fn examine(&mut self, folder: &str) -> Result<Mailbox, Error> {
        self.open_mailbox("EXAMINE ", folder).await
    }

    /// `LIST "" "*"` (RFC 3501 6.3.8): every folder, in the server's order.
    pub async fn list_all(&mut self) -> Result<Vec<Listed>, Error> {
        let done = self.command(vec![text("LIST \"\" \"*\"")]).await?;
        Ok(done
            .untagged
            .into_iter()
            .filter_map(|r| match r {
                Resp::List {
                    name,
                    delimiter,
                    selectable,
                } => Some(Listed {
                    name,
                    delimiter,
                    selectable,
                }),
                _ => None,
            })
            .collect())
    }

    /// `UID SEARCH ALL`: every UID of the selected folder, ascending.
    pub async fn uid_search_all(&mut self) -> Result<Vec<u32>, Error> {
        let done = self.command(vec![text("UID SEARCH ALL")]).await?;
        let mut uids: Vec<u32> = done
            .untagged
            .into_iter()
            .filter_map(|r| match r {
                Resp::Search(v) => Some(v),
                _ => None,
            })
            .flatten()
            .collect();
        uids.sort_unstable();
        uids.dedup();
        Ok(uids)
    }

    /// `UID FETCH uids (UID FLAGS MODSEQ)`, with `INTERNALDATE BODY.PEEK[]` when `content`
    /// (MODSEQ only with CONDSTORE). UIDs that do not exist are missing from the result,
    /// which is sorted by UID. With `content`, the caller keeps `uids` to what fits
    /// `response_bytes_max` per command (every message of one command is held at once).
    pub async fn uid_fetch_state(
        &mut self,
        uids: &[u32],
        content: bool,
    ) -> Result<Vec<Fetched>, Error> {
        let modseq = if self.caps.condstore { " MODSEQ" } else { "" };
        let items = if content {
            format!("(UID FLAGS INTERNALDATE{modseq} BODY.PEEK[])")
        } else {
            format!("(UID FLAGS{modseq})")
        };
        let mut out = Vec::new();
        for s in seqset::split(uids, SET_MAX) {
            let done = self
                .command(vec![text(&format!("UID FETCH {s} {items}"))])
                .await?;
            for r in done.untagged {
                if let Resp::Fetch {
                    uid: Some(uid),
                    data,
                    meta,
                    ..
                } = r
                {
                    let meta = meta.map(|m| *m).unwrap_or_default();
                    let Some(flags) = meta.flags else {
                        // An unsolicited FETCH (another session's flag change): no state.
                        continue;
                    };
                    if content && data.is_none() {
                        continue;
                    }
                    out.push(Fetched {
                        uid,
                        flags: flags
                            .into_iter()
                            .filter(|f| !f.eq_ignore_ascii_case("\\Recent"))
                            .collect(),
                        internal_date: meta.internal_date,
                        modseq: meta.modseq,
                        content: if content { data } else { None },
                    });
                }
            }
        }
        out.sort_by_key(|f| f.uid);
        out.dedup_by_key(|f| f.uid);
        Ok(out)
    }

    /// APPENDs `messages` to `folder`: one MULTIAPPEND command when offered (RFC 3502 6.3.11),
    /// else one APPEND each (pipelined when all literals are non-synchronizing).
    /// `binary` sends literal8 (RFC 3516 4.4), allowed only with BINARY. Returns each
    /// message's UID from APPENDUID (RFC 4315 3) when UIDPLUS is offered, else None.
    pub async fn append(
        &mut self,
        folder: &str,
        messages: &[&[u8]],
        binary: bool,
    ) -> Result<Vec<Option<u32>>, Error> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        if binary && !self.caps.binary {
            return Err(Error::Unsupported(
                "BINARY (RFC 3516) for literal8 APPEND".into(),
            ));
        }
        for m in messages {
            if let Some(limit) = self.caps.appendlimit
                && m.len() as u64 > limit
            {
                return Err(Error::TooLarge(format!(
                    "a {}-byte message exceeds APPENDLIMIT={limit}",
                    m.len()
                )));
            }
            // RFC 3501 4.3: a literal is CHAR8, no NUL; only literal8 may carry NUL.
            if !binary && memchr::memchr(0, m).is_some() {
                return Err(Error::InvalidArgument(
                    "NUL byte in a non-binary APPEND".into(),
                ));
            }
        }
        let mbox = parse::mailbox(folder);
        let appenduid = |code: &Option<String>, n: usize| -> Result<Vec<Option<u32>>, Error> {
            let Some(rest) = code.as_deref().and_then(|c| {
                let (name, rest) = c.split_once(' ')?;
                name.eq_ignore_ascii_case("APPENDUID").then_some(rest)
            }) else {
                return Ok(vec![None; n]);
            };
            // resp-code-apnd = "APPENDUID" SP nz-number SP append-uid (RFC 4315 3)
            let set = rest.split_once(' ').map(|(_, s)| s).unwrap_or("");
            let uids = seqset::expand(set, n)
                .filter(|u| u.len() == n)
                .ok_or_else(|| {
                    Error::Protocol(format!("APPENDUID {rest:?} does not match {n} messages"))
                })?;
            Ok(uids.into_iter().map(Some).collect())
        };
        if self.caps.multiappend || messages.len() == 1 {
            let mut parts = vec![text("APPEND "), Part::Text(mbox.into())];
            for m in messages {
                parts.push(text(" "));
                parts.push(Part::Literal { data: m, binary });
            }
            let done = self.command(parts).await?;
            return appenduid(&done.code, messages.len());
        }
        let pipelined = self.caps.literal_plus
            || (self.caps.literal_minus && messages.iter().all(|m| m.len() <= LITERAL_MINUS_MAX));
        let mut out = Vec::with_capacity(messages.len());
        if pipelined {
            let mut tags = Vec::new();
            for m in messages {
                let parts = vec![
                    text("APPEND "),
                    Part::Text(mbox.clone().into()),
                    text(" "),
                    Part::Literal { data: m, binary },
                ];
                tags.push(self.send(parts).await?);
            }
            let mut first_err = None;
            for tag in &tags {
                match self.finish(tag).await {
                    Ok(done) => out.extend(appenduid(&done.code, 1)?),
                    Err(e) if e.is_fatal() => return Err(e),
                    Err(e) => {
                        out.push(None);
                        first_err.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_err {
                return Err(e);
            }
        } else {
            for m in messages {
                let parts = vec![
                    text("APPEND "),
                    Part::Text(mbox.clone().into()),
                    text(" "),
                    Part::Literal { data: m, binary },
                ];
                let done = self.command(parts).await?;
                out.extend(appenduid(&done.code, 1)?);
            }
        }
        Ok(out)
    }

    /// `UID SEARCH HEADER field value` (RFC 3501 6.4.4): UIDs whose header `field`
    /// contains `value` (a substring match, so callers check the exact value).
    pub async fn uid_search_header(&mut self, field: &str, value: &str) -> Result<Vec<u32>, Error> {
        check_field(field)?;
        let mut parts = vec![text("UID SEARCH ")];
        if !value.is_ascii() {
            parts.push(text("CHARSET UTF-8 "));
        }
        parts.push(text(&format!("HEADER {field} ")));
        parts.push(astring(value.as_bytes()));
        let done = self.command(parts).await?;
        let mut uids: Vec<u32> = done
            .untagged
            .into_iter()
            .filter_map(|r| match r {
                Resp::Search(v) => Some(v),
                _ => None,
            })
            .flatten()
            .collect();
        uids.sort_unstable();
        uids.dedup();
        Ok(uids)
    }

    /// `UID FETCH set (UID BODY.PEEK[HEADER.FIELDS (field)])` (RFC 3501 6.4.5): the
    /// unfolded, trimmed value of `field` for every message in `set` (e.g. `1:*`), empty
    /// when a message lacks the field; sorted by UID.
    pub async fn uid_fetch_header_field(
        &mut self,
        set: &str,
        field: &str,
    ) -> Result<Vec<(u32, String)>, Error> {
        check_field(field)?;
        if !seqset::is_valid(set) {
            return Err(Error::InvalidArgument(format!("sequence set {set:?}")));
        }
        let sets = if set.len() > SET_MAX {
            let uids = seqset::expand(set, 10_000_000)
                .ok_or_else(|| Error::InvalidArgument(format!("long sequence set {set:.40}…")))?;
            seqset::split(&uids, SET_MAX)
        } else {
            vec![set.to_string()]
        };
        let mut out = Vec::new();
        for s in sets {
            let done = self
                .command(vec![text(&format!(
                    "UID FETCH {s} (UID BODY.PEEK[HEADER.FIELDS ({field})])"
                ))])
                .await?;
            for r in done.untagged {
                if let Resp::Fetch {
                    uid: Some(uid),
                    data,
                    ..
                } = r
                {
                    let value = data
                        .map(|d| parse::header_value(&d, field))
                        .unwrap_or_default();
                    out.push((uid, value));
                }
            }
        }
        out.sort_by_key(|(uid, _)| *uid);
        out.dedup_by_key(|(uid, _)| *uid);
        Ok(out)
    }

    /// The body of a single-part message: `UID FETCH uid (BINARY.PEEK[1])` decoded by the
    /// server when BINARY is offered (RFC 3516 4.2), else `BODY.PEEK[TEXT]` raw (the caller
    /// decodes its transfer encoding). `partial` = (offset, length) adds `<offset.length>`.
    /// None if no FETCH came back for the UID (it does not exist).
    pub async fn uid_fetch_body(
        &mut self,
        uid: u32,
        partial: Option<(u64, u32)>,
    ) -> Result<Option<Vec<u8>>, Error> {
        let section = self.body_section();
        let partial = match partial {
            None => String::new(),
            Some((offset, len)) => {
                // RFC 3501 9: partial offsets are 32-bit numbers.
                let offset = u32::try_from(offset).map_err(|_| {
                    Error::InvalidArgument(format!("partial offset {offset} over 2^32"))
                })?;
                format!("<{offset}.{len}>")
            }
        };
        let done = self
            .command(vec![text(&format!(
                "UID FETCH {uid} (UID {section}{partial})"
            ))])
            .await?;
        Ok(fetched(done, uid).map(Vec::from))
    }

    /// A whole message, header and body: `UID FETCH uid BODY.PEEK[]` (RFC 3501 6.4.5).
    /// Cheaper for a server than `BODY.PEEK[TEXT]` when it knows each message's size but
    /// must scan a message to find where its body starts and how long it is (Dovecot's
    /// maildir: a 1 MiB body cost it as much CPU as sending it). None if no FETCH came
    /// back for the UID.
    /// The message is a view of the buffer it was received in (no copy).
    pub async fn uid_fetch_message(&mut self, uid: u32) -> Result<Option<Bytes>, Error> {
        let done = self
            .command(vec![text(&format!("UID FETCH {uid} (UID BODY.PEEK[])"))])
            .await?;
        Ok(fetched(done, uid))
    }

    /// Like [`Client::uid_fetch_body`] for many UIDs in as few commands as possible;
    /// UIDs that do not exist are missing from the result, which is sorted by UID.
    pub async fn uid_fetch_bodies(&mut self, uids: &[u32]) -> Result<Vec<(u32, Vec<u8>)>, Error> {
        let section = self.body_section();
        let mut out = Vec::new();
        for s in seqset::split(uids, SET_MAX) {
            let done = self
                .command(vec![text(&format!("UID FETCH {s} (UID {section})"))])
                .await?;
            for r in done.untagged {
                if let Resp::Fetch {
                    uid: Some(u), data, ..
                } = r
                    && uids.contains(&u)
                {
                    out.push((u, data.map(Vec::from).unwrap_or_default()));
                }
            }
        }
        out.sort_by_key(|(u, _)| *u);
        out.dedup_by_key(|(u, _)| *u);
        Ok(out)
    }

    fn body_section(&self) -> &'static str {
        if self.caps.binary {
            "BINARY.PEEK[1]"
        } else {
            "BODY.PEEK[TEXT]"
        }
    }

    /// `UID STORE set +FLAGS.SILENT (\Deleted)` (RFC 3501 6.4.6).
    pub async fn uid_store_deleted(&mut self, uids: &[u32]) -> Result<(), Error> {
        for s in seqset::split(uids, SET_MAX) {
            self.command(vec![text(&format!(
                "UID STORE {s} +FLAGS.SILENT (\\Deleted)"
            ))])
            .await?;
        }
        Ok(())
    }

    /// Removes exactly these UIDs: `\Deleted` then `UID EXPUNGE` (RFC 4315 2.1). Refuses
    /// without UIDPLUS: a bare EXPUNGE would also remove other clients' `\Deleted` messages.
    pub async fn uid_expunge(&mut self, uids: &[u32]) -> Result<(), Error> {
        if !self.caps.uidplus {
            return Err(Error::Unsupported(
                "UIDPLUS (RFC 4315) for UID EXPUNGE".into(),
            ));
        }
        if uids.is_empty() {
            return Ok(());
        }
        self.uid_store_deleted(uids).await?;
        for s in seqset::split(uids, SET_MAX) {
            self.command(vec![text(&format!("UID EXPUNGE {s}"))])
                .await?;
        }
        Ok(())
    }

    /// `GETQUOTAROOT folder` (RFC 2087 4.3 / RFC 9208 4.3): (used, limit) in bytes of the
    /// STORAGE resource (reported in units of 1024 octets). None without QUOTA or STORAGE.
    pub async fn quota(&mut self, folder: &str) -> Result<Option<(u64, u64)>, Error> {
        if !self.caps.quota {
            return Ok(None);
        }
        let done = self
            .command(vec![
                text("GETQUOTAROOT "),
                Part::Text(parse::mailbox(folder).into()),
            ])
            .await?;
        for r in done.untagged {
            if let Resp::Quota(resources) = r {
                for (name, usage, limit) in resources {
                    if name == "STORAGE" {
                        return Ok(Some((
                            usage.saturating_mul(1024),
                            limit.saturating_mul(1024),
                        )));
                    }
                }
            }
        }
        Ok(None)
    }

    /// NOOP (RFC 3501 6.1.2): a cheap liveness check.
    pub async fn noop(&mut self) -> Result<(), Error> {
        self.command(vec![text("NOOP")]).await.map(drop)
    }

    /// LOGOUT (RFC 3501 6.1.3): expects BYE, then the tagged OK.
    pub async fn logout(mut self) -> Result<(), Error> {
        match self.command(vec![text("LOGOUT")]).await {
            Ok(_) => {}
            // The server may close right after BYE.
            Err(Error::Bye(_)) | Err(Error::Closed) if self.bye.is_some() => {}
            Err(e) => return Err(e),
        }
        let _ = tokio::time::timeout(self.timeout, async {
            match &mut self.conn {
                Conn::Plain(s) => s.shutdown().await,
                Conn::Tls(s) => s.shutdown().await,
                Conn::Gone => Ok(()),
            }
        })
        .await;
        Ok(())
    }

    // ---- plumbing -------------------------------------------------------------------

    /// Sends a command and reads until its tagged response.
    async fn command(&mut self, parts: Vec<Part<'_>>) -> Result<Done, Error> {
        let tag = self.send(parts).await?;
        self.finish(&tag).await
    }

    /// Sends one command (waiting for `+` before each synchronizing literal) and
    /// returns its tag.
    async fn send(&mut self, parts: Vec<Part<'_>>) -> Result<String, Error> {
        if let Some(why) = &self.broken {
            return Err(Error::Unusable(why.clone()));
        }
        let tag = format!("m{}", self.next_tag);
        self.next_tag += 1;
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(tag.as_bytes());
        line.push(b' ');
        for part in parts {
            match part {
                Part::Text(t) => line.extend_from_slice(&t),
                Part::Literal { data, binary } => {
                    // RFC 7888 3 (LITERAL+ / LITERAL-), RFC 3516 4.1 (literal8 `~{n}`).
                    let nonsync = self.caps.literal_plus
                        || (self.caps.literal_minus && data.len() <= LITERAL_MINUS_MAX);
                    let prefix = if binary { "~" } else { "" };
                    let plus = if nonsync { "+" } else { "" };
                    line.extend_from_slice(
                        format!("{prefix}{{{}{plus}}}\r\n", data.len()).as_bytes(),
                    );
                    self.write(&line).await?;
                    line.clear();
                    if !nonsync {
                        self.wait_continue(&tag).await?;
                    }
                    self.write(data).await?;
                }
            }
        }
        line.extend_from_slice(b"\r\n");
        self.write(&line).await?;
        self.flush().await?;
        Ok(tag)
    }

    /// Waits for a `+` continuation (RFC 3501 7.5); a tagged reply instead ends the command.
    async fn wait_continue(&mut self, tag: &str) -> Result<(), Error> {
        self.flush().await?;
        loop {
            match self.read_response().await? {
                Resp::Continue => return Ok(()),
                Resp::Status {
                    tag: Some(t),
                    kind,
                    text,
                    ..
                } if t == tag => {
                    return Err(match kind {
                        Kind::No => Error::No(text),
                        Kind::Bad => Error::Bad(text),
                        Kind::Ok => self.fail(Error::Protocol(format!(
                            "OK instead of continuation: {text}"
                        ))),
                    });
                }
                other => self.note_untagged(other, &mut Vec::new())?,
            }
        }
    }

    /// Reads until the tagged response for `tag`.
    async fn finish(&mut self, tag: &str) -> Result<Done, Error> {
        let mut untagged = Vec::new();
        loop {
            match self.read_response().await? {
                Resp::Status {
                    tag: Some(t),
                    kind,
                    code,
                    text,
                } => {
                    if t != tag {
                        // A pipelined command's completion is read by its own finish().
                        if t.starts_with('m') {
                            return Err(self.fail(Error::Protocol(format!(
                                "completion for {t} while waiting for {tag}"
                            ))));
                        }
                        continue;
                    }
                    return match kind {
                        Kind::Ok => Ok(Done { untagged, code }),
                        Kind::No => Err(Error::No(text)),
                        Kind::Bad => Err(Error::Bad(text)),
                    };
                }
                Resp::Continue => {
                    return Err(
                        self.fail(Error::Protocol("unexpected continuation request".into()))
                    );
                }
                other => self.note_untagged(other, &mut untagged)?,
            }
        }
    }

    fn note_untagged(&mut self, resp: Resp, into: &mut Vec<Resp>) -> Result<(), Error> {
        match resp {
            // RFC 3501 7.1.5: BYE, the server is about to close; the next read fails.
            Resp::Bye(text) => self.bye = Some(text),
            Resp::Other => {}
            r => into.push(r),
        }
        Ok(())
    }

    async fn read_response(&mut self) -> Result<Resp, Error> {
        let bytes = self.read_response_bytes().await?;
        match parse::parse_owned(bytes) {
            Ok(r) => Ok(r),
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn read_response_bytes(&mut self) -> Result<Vec<u8>, Error> {
        if let Some(why) = &self.broken {
            return Err(Error::Unusable(why.clone()));
        }
        loop {
            match self.framer.next_response() {
                Ok(Some(r)) => return Ok(r),
                Ok(None) => {}
                Err(e) => return Err(self.fail(e)),
            }
            let buf = self.framer.buffer();
            let read = match &mut self.conn {
                Conn::Plain(s) => tokio::time::timeout(self.timeout, s.read_buf(buf)).await,
                Conn::Tls(s) => tokio::time::timeout(self.timeout, s.read_buf(buf)).await,
                Conn::Gone => return Err(Error::Closed),
            };
            match read {
                Err(_) => return Err(self.fail(Error::Timeout)),
                Ok(Err(e)) => return Err(self.fail(closed_or_io(e, &self.bye))),
                Ok(Ok(0)) => {
                    let e = match self.bye.clone() {
                        Some(text) => Error::Bye(text),
                        None => Error::Closed,
                    };
                    return Err(self.fail(e));
                }
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Writes all of `data`; the timeout bounds each step that makes no progress, not the
    /// whole write: a many-MiB literal to a slow but live server may take longer in total,
    /// a server that stops reading fails after one timeout.
    async fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        let mut rest = data;
        while !rest.is_empty() {
            let result = match &mut self.conn {
                Conn::Plain(s) => tokio::time::timeout(self.timeout, s.write(rest)).await,
                Conn::Tls(s) => tokio::time::timeout(self.timeout, s.write(rest)).await,
                Conn::Gone => return Err(Error::Closed),
            };
            match result {
                Err(_) => return Err(self.fail(Error::Timeout)),
                Ok(Err(e)) => return Err(self.fail(closed_or_io(e, &self.bye))),
                Ok(Ok(0)) => return Err(self.fail(Error::Closed)),
                Ok(Ok(n)) => rest = &rest[n..],
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Error> {
        let result = match &mut self.conn {
            Conn::Plain(s) => tokio::time::timeout(self.timeout, s.flush()).await,
            Conn::Tls(s) => tokio::time::timeout(self.timeout, s.flush()).await,
            Conn::Gone => return Err(Error::Closed),
        };
        match result {
            Err(_) => Err(self.fail(Error::Timeout)),
            Ok(Err(e)) => Err(self.fail(closed_or_io(e, &self.bye))),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Marks the connection unusable and passes the error on.
    fn fail(&mut self, e: Error) -> Error {
        if e.is_fatal() && self.broken.is_none() {
            self.broken = Some(e.to_string());
        }
        e
    }
}

fn closed_or_io(e: std::io::Error, bye: &Option<String>) -> Error {
    use std::io::ErrorKind::*;
    match (e.kind(), bye) {
        (ConnectionReset | BrokenPipe | UnexpectedEof | ConnectionAborted, Some(text)) => {
            Error::Bye(text.clone())
        }
        (ConnectionReset | BrokenPipe | UnexpectedEof | ConnectionAborted, None) => Error::Closed,
        _ => Error::Io(e),
    }
}

fn text(s: &str) -> Part<'static> {
    Part::Text(Cow::Owned(s.as_bytes().to_vec()))
}

/// An astring argument (RFC 3501 9): quoted when possible, else a literal.
fn astring(s: &[u8]) -> Part<'_> {
    if parse::can_quote(s) {
        Part::Text(Cow::Owned(parse::quoted(s)))
    } else {
        Part::Literal {
            data: s,
            binary: false,
        }
    }
}

/// Header names go on the command line as atoms (RFC 3501 9, `header-fld-name`).
fn check_field(field: &str) -> Result<(), Error> {
    let ok = !field.is_empty()
        && field.bytes().all(|b| {
            b.is_ascii_graphic()
                && !matches!(
                    b,
                    b':' | b'(' | b')' | b'{' | b'"' | b'\\' | b'[' | b']' | b'%' | b'*'
                )
        });
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "header field name {field:?}"
        )))
    }
}

async fn tls_handshake(
    cfg: &Config,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Error> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let builder = rustls::ClientConfig::builder();
    let config = if cfg.accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(opportunistic_tls::AnyCertificate::new()))
            .with_no_client_auth()
    } else {
        let roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    let name = rustls_pki_types::ServerName::try_from(cfg.host.clone())
        .map_err(|e| Error::Tls(format!("server name {:?}: {e}", cfg.host)))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    match tokio::time::timeout(cfg.timeout, connector.connect(name, tcp)).await {
        Err(_) => Err(Error::Timeout),
        Ok(Err(e)) => Err(Error::Tls(e.to_string())),
        Ok(Ok(s)) => Ok(s),
    }
}
