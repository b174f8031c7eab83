//! Milter clients: one connection to one filter for one SMTP session (docs/spam.md 4), over
//! the sans-IO `milter` crate, the way Postfix's milter8.c drives it.
//!
//! A `MilterSession` is opened at connect: TCP or unix connect (`connect_timeout`),
//! `SMFIC_OPTNEG` (what we offer: `milter::Offer::default()`), then the connect step. Each
//! later call is one SMTP step (HELO, MAIL, RCPT, the message, the end of a transaction) and
//! returns the filter's `Decision` for it.
//!
//! # Bounds
//!
//! Every read and write waits at most `timeout`; `SMFIR_PROGRESS` restarts the wait, but one
//! step never waits more than ten times `timeout` in all. A filter's packet is at most
//! `reply_bytes_max` bytes, and the modifications of one message at most the message's size
//! plus `reply_bytes_max`. So a filter that accepts the connection and never answers costs at
//! most its timeout per step, and the first error ends the connection: every later call
//! returns an error at once, without I/O, until the session is dropped.
//!
//! # What a decision does to later steps (Postfix milter8.c)
//!
//! - `Accept` at connect or HELO: the filter wants nothing more of the connection; the
//!   socket is closed and every later step is `Continue`. Later in a transaction: nothing
//!   more of that message; its later steps are `Continue` until `abort`.
//! - `Reject` or `TempFail` at connect or HELO: the socket is closed and every later step
//!   gets the same decision.
//! - `Quarantine`: a quarantine asked at any step holds for the rest of the transaction (of
//!   the connection when asked at connect or HELO): each step's `Continue` or `Accept`
//!   comes back as `Quarantine(reason)`.
//! - `SMFIR_SKIP`: no more steps of that kind (body chunks, headers, recipients) until
//!   another kind is sent.
//! - Steps the filter declined (`SMFIP_NO*`) are not sent and return `Continue`; steps it
//!   will not answer (`SMFIP_NR_*`) are sent without waiting and return `Continue`.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use milter::{
    ClientAddress, Command, Decoder, Fold, Negotiated, Offer, Response, Stage, Step, StepError,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

pub use milter::{Decision, Modification, Reply, apply};

/// Where a filter listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MilterAddress {
    /// `host:port` (`[v6]:port` for an IPv6 literal).
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for MilterAddress {
    type Err = String;

    /// `host:port`, Postfix's `inet:host:port`, Sendmail's `inet:port@host` (and
    /// `inet6:port@host`), `unix:/path` or `local:/path`.
    fn from_str(text: &str) -> Result<MilterAddress, String> {
        if let Some(path) = text
            .strip_prefix("unix:")
            .or_else(|| text.strip_prefix("local:"))
        {
            if path.is_empty() {
                return Err(format!("{text:?}: no socket path"));
            }
            return Ok(MilterAddress::Unix(PathBuf::from(path)));
        }
        let (inet6, rest) = if let Some(rest) = text.strip_prefix("inet6:") {
            (true, rest)
        } else {
            (false, text.strip_prefix("inet:").unwrap_or(text))
        };
        let (host, port) = match rest.split_once('@') {
            Some((port, host)) => (host, port),
            None => rest
                .rsplit_once(':')
                .ok_or_else(|| format!("{text:?}: not host:port, inet:, or unix:/path"))?,
        };
        if host.is_empty() {
            return Err(format!("{text:?}: no host"));
        }
        port.parse::<u16>()
            .map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
        let bracketed = host.contains(':') && !host.starts_with('[');
        if inet6 || bracketed {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            return Ok(MilterAddress::Tcp(format!("[{host}]:{port}")));
        }
        Ok(MilterAddress::Tcp(format!("{host}:{port}")))
    }
}

impl fmt::Display for MilterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MilterAddress::Tcp(address) => write!(f, "inet:{address}"),
            MilterAddress::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// What to do when a filter cannot be reached, fails or is late (the caller applies it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultAction {
    TempFail,
    Accept,
}

/// One `[[spam.milters]]` entry.
#[derive(Clone, Debug)]
pub struct MilterConfig {
    pub name: String,
    pub address: MilterAddress,
    pub connect_timeout: Duration,
    /// The longest wait for one reply or one write.
    pub timeout: Duration,
    pub default_action: DefaultAction,
    /// The longest packet accepted from the filter (`milter_reply_bytes_max`).
    pub reply_bytes_max: usize,
    /// Called for submitted mail too.
    pub submission: bool,
}

/// The SMTP client, as the connect step reports it.
#[derive(Clone, Debug)]
pub struct ConnectInfo {
    pub client_ip: IpAddr,
    pub client_port: u16,
    /// The client's verified host name, or `[ip]` when it has none.
    pub client_name: String,
    /// Our host name: the `j` macro.
    pub our_hostname: String,
    /// The listener's name: the `{daemon_name}` macro.
    pub daemon_name: String,
}

/// Why a call failed. The caller applies the filter's default action.
#[derive(Debug)]
pub enum MilterError {
    /// The connection could not be made (refused, unreachable, connect timeout).
    Connect(io::Error),
    /// No reply, or a write not taken, within the timeout; the step named.
    Timeout(&'static str),
    /// The connection failed (reset, closed early), or failed at an earlier step.
    Io(io::Error),
    /// The filter broke the protocol.
    Protocol(String),
    /// The filter shut down (`SMFIR_SHUTDOWN`).
    Shutdown,
}

impl fmt::Display for MilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MilterError::Connect(error) => write!(f, "connect: {error}"),
            MilterError::Timeout(step) => write!(f, "timed out at {step}"),
            MilterError::Io(error) => write!(f, "{error}"),
            MilterError::Protocol(what) => write!(f, "protocol error: {what}"),
            MilterError::Shutdown => write!(f, "the filter shut down"),
        }
    }
}

impl std::error::Error for MilterError {}

/// The socket, TCP or unix.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// How many bytes are read from the socket at a time.
const READ_BYTES: usize = 16 * 1024;
/// Bytes of steps that need no reply gathered before they are written.
const WRITE_BATCH_BYTES: usize = 64 * 1024;
/// One step's waits, `SMFIR_PROGRESS` included, add up to at most this many timeouts.
const PROGRESS_TIMEOUTS_MAX: u32 = 10;

/// The connection as a whole.
#[derive(Debug)]
enum Connection {
    Open,
    /// The filter accepted the connection: nothing more is sent.
    Accepted,
    /// The filter refused the connection: every step gets this decision.
    Refused(Decision),
    /// An error ended the connection.
    Failed,
}

/// The current transaction (MAIL to the end of the message, until `abort`).
#[derive(Debug, Default)]
struct Transaction {
    open: bool,
    /// The filter accepted the message: nothing more of it is sent.
    accepted: bool,
    quarantine: Option<String>,
    /// The `i` macro (queue id) from MAIL, sent again at DATA, end of headers and end.
    queue_id: Option<String>,
    /// `SMFIR_SKIP` was answered to a step of this kind.
    skip: Option<Stage>,
}

/// One connection to one filter for one SMTP session.
pub struct MilterSession {
    config: Arc<MilterConfig>,
    stream: Option<Box<dyn Io>>,
    decoder: Decoder,
    negotiated: Negotiated,
    connection: Connection,
    /// A quarantine asked at connect or HELO: for every transaction.
    quarantine: Option<String>,
    transaction: Transaction,
    /// Commands not written yet.
    out: Vec<u8>,
    read_buffer: Box<[u8]>,
}

impl fmt::Debug for MilterSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MilterSession")
            .field("filter", &self.config.name)
            .field("negotiated", &self.negotiated)
            .field("connection", &self.connection)
            .field("transaction", &self.transaction)
            .finish_non_exhaustive()
    }
}

impl MilterSession {
    /// Connects (within `connect_timeout`), negotiates, and reports the connection.
    pub async fn open(
        config: Arc<MilterConfig>,
        info: &ConnectInfo,
    ) -> Result<(MilterSession, Decision), MilterError> {
        let stream = connect(&config).await?;
        let offer = Offer::default();
        let mut session = MilterSession {
            decoder: Decoder::new(config.reply_bytes_max),
            config,
            stream: Some(stream),
            // Replaced by the filter's answer below.
            negotiated: Negotiated::new(&offer, offer.version, 0, 0, &[])
                .map_err(|e| MilterError::Protocol(e.to_string()))?,
            connection: Connection::Open,
            quarantine: None,
            transaction: Transaction::default(),
            out: Vec::new(),
            read_buffer: vec![0; READ_BYTES].into_boxed_slice(),
        };
        session.negotiate(&offer).await?;
        let unknown = "unknown".to_string();
        let verified = if info.client_name.starts_with('[') {
            &unknown
        } else {
            &info.client_name
        };
        // Postfix's `_`: "name [address]", name "unknown" without reverse DNS.
        let underscore = format!("{verified} [{}]", info.client_ip);
        let macros = [
            ("j", info.our_hostname.as_str()),
            ("{daemon_name}", info.daemon_name.as_str()),
            ("_", underscore.as_str()),
        ];
        let command = Command::Connect {
            hostname: &info.client_name,
            address: ClientAddress::Inet {
                ip: info.client_ip,
                port: info.client_port,
            },
        };
        let decision = session.step(Stage::Connect, &macros, command).await?;
        Ok((session, decision))
    }

    /// The negotiated options: what the filter gets and answers.
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// HELO or EHLO.
    pub async fn helo(&mut self, name: &str) -> Result<Decision, MilterError> {
        self.step(Stage::Helo, &[], Command::Helo(name)).await
    }

    /// MAIL FROM. `from` without angle brackets (empty for the null sender); `macros` are
    /// `{auth_authen}`, `{mail_addr}` and `i` (the queue id, kept for the message's steps).
    /// An open transaction is aborted first.
    pub async fn mail(
        &mut self,
        from: &str,
        args: &[String],
        macros: &[(&str, &str)],
    ) -> Result<Decision, MilterError> {
        if self.transaction.open {
            self.abort().await?;
        }
        self.transaction.open = true;
        self.transaction.queue_id = macros
            .iter()
            .find(|(name, _)| *name == "i")
            .map(|(_, value)| value.to_string());
        let address = format!("<{from}>");
        let command = Command::Mail {
            address: &address,
            args,
        };
        self.step(Stage::Mail, macros, command).await
    }

    /// RCPT TO, with `{rcpt_addr}` (and `i`).
    pub async fn rcpt(
        &mut self,
        to: &str,
        args: &[String],
        macros: &[(&str, &str)],
    ) -> Result<Decision, MilterError> {
        let address = format!("<{to}>");
        let command = Command::Rcpt {
            address: &address,
            args,
        };
        self.step(Stage::Rcpt, macros, command).await
    }

    /// The message (CRLF, as it will be queued): DATA, each header field, end of headers,
    /// the body in chunks, end of message. Returns the final decision and, when it is not a
    /// refusal, the filter's modifications (`apply` puts the header and body ones into the
    /// message).
    pub async fn message(
        &mut self,
        message: &[u8],
    ) -> Result<(Decision, Vec<Modification>), MilterError> {
        let queue_id = self.transaction.queue_id.clone();
        let id_macro = queue_id.as_deref().map(|id| [("i", id)]);
        let macros: &[(&str, &str)] = id_macro.as_ref().map_or(&[], |m| m.as_slice());
        let decision = self.step(Stage::Data, macros, Command::Data).await?;
        if !goes_on(&decision) {
            return Ok((decision, Vec::new()));
        }
        let (fields, body) = milter::header_fields(message, self.negotiated.leading_space());
        for field in &fields {
            let command = Command::Header {
                name: &field.name,
                value: &field.value,
            };
            let decision = self.step(Stage::Header, macros, command).await?;
            if !goes_on(&decision) {
                return Ok((decision, Vec::new()));
            }
        }
        let decision = self
            .step(Stage::EndOfHeaders, macros, Command::EndOfHeaders)
            .await?;
        if !goes_on(&decision) {
            return Ok((decision, Vec::new()));
        }
        for chunk in body.chunks(milter::CHUNK_BYTES_MAX) {
            let decision = self.step(Stage::Body, macros, Command::Body(chunk)).await?;
            if !goes_on(&decision) {
                return Ok((decision, Vec::new()));
            }
        }
        self.end_of_message(macros, message.len()).await
    }

    /// The end of a transaction (RSET, a new MAIL, the end of a message): `SMFIC_ABORT`, no
    /// reply. Nothing is sent when no transaction is open or the filter is done with the
    /// connection.
    pub async fn abort(&mut self) -> Result<(), MilterError> {
        let was_open = self.transaction.open;
        self.transaction = Transaction::default();
        if !was_open || !matches!(self.connection, Connection::Open) {
            return Ok(());
        }
        Command::Abort.encode(&mut self.out);
        self.flush("abort").await
    }

    /// The end of the SMTP session: `SMFIC_QUIT` (within the timeout), then the connection
    /// closes.
    pub async fn quit(mut self) {
        if matches!(self.connection, Connection::Open) {
            Command::Quit.encode(&mut self.out);
            if self.flush("quit").await.is_ok()
                && let Some(stream) = self.stream.as_mut()
            {
                let _ = tokio::time::timeout(self.config.timeout, stream.shutdown()).await;
            }
        }
    }

    async fn negotiate(&mut self, offer: &Offer) -> Result<(), MilterError> {
        offer.command().encode(&mut self.out);
        self.flush("optneg").await?;
        let deadline = Instant::now() + self.config.timeout;
        let response = self.read_response(deadline, "optneg").await?;
        let Response::OptNeg {
            version,
            actions,
            protocol,
            symlists,
        } = response
        else {
            return Err(self.fail(MilterError::Protocol(format!(
                "{response:?} in answer to SMFIC_OPTNEG"
            ))));
        };
        match Negotiated::new(offer, version, actions, protocol, &symlists) {
            Ok(negotiated) => {
                tracing::debug!(
                    filter = %self.config.name,
                    version, actions, protocol, ?symlists,
                    "milter negotiated"
                );
                self.negotiated = negotiated;
                Ok(())
            }
            Err(error) => Err(self.fail(MilterError::Protocol(error.to_string()))),
        }
    }

    /// One step: its macros and command, then (unless the filter does not answer it) its
    /// replies folded into a decision.
    async fn step(
        &mut self,
        stage: Stage,
        macros: &[(&str, &str)],
        command: Command<'_>,
    ) -> Result<Decision, MilterError> {
        if let Some(decision) = self.before(stage)? {
            return Ok(decision);
        }
        self.queue(stage, macros, command);
        if !self.negotiated.replies(stage) {
            if self.out.len() >= WRITE_BATCH_BYTES {
                self.flush(stage_name(stage)).await?;
            }
            return Ok(self.with_quarantine(Decision::Continue));
        }
        let (fold, _) = self.replies(stage, self.config.reply_bytes_max).await?;
        Ok(self.after(stage, fold))
    }

    /// End of message: always sent and answered; modifications come before the final word.
    async fn end_of_message(
        &mut self,
        macros: &[(&str, &str)],
        message_bytes: usize,
    ) -> Result<(Decision, Vec<Modification>), MilterError> {
        let stage = Stage::EndOfMessage;
        if let Some(decision) = self.before(stage)? {
            return Ok((decision, Vec::new()));
        }
        self.queue(stage, macros, Command::EndOfMessage);
        let bytes_max = message_bytes.saturating_add(self.config.reply_bytes_max);
        let (fold, modifications) = self.replies(stage, bytes_max).await?;
        let decision = self.after(stage, fold);
        let modifications = match decision {
            Decision::Reject(_) | Decision::TempFail(_) => Vec::new(),
            _ => modifications,
        };
        Ok((decision, modifications))
    }

    /// What a step gets without being sent; `None` when it is to be sent.
    fn before(&mut self, stage: Stage) -> Result<Option<Decision>, MilterError> {
        match &self.connection {
            Connection::Open => {}
            Connection::Accepted => return Ok(Some(Decision::Continue)),
            Connection::Refused(decision) => return Ok(Some(decision.clone())),
            Connection::Failed => {
                return Err(MilterError::Io(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the connection to the filter failed at an earlier step",
                )));
            }
        }
        let in_message = !matches!(stage, Stage::Connect | Stage::Helo | Stage::Mail);
        let skipped = match self.transaction.skip {
            Some(skip) if skip == stage => true,
            Some(_) => {
                self.transaction.skip = None;
                false
            }
            None => false,
        };
        if (in_message && self.transaction.accepted) || skipped || !self.negotiated.sends(stage) {
            return Ok(Some(self.with_quarantine(Decision::Continue)));
        }
        Ok(None)
    }

    /// Appends the step's macros (those the filter wants) and command to what is to be sent.
    fn queue(&mut self, stage: Stage, macros: &[(&str, &str)], command: Command<'_>) {
        let wanted: Vec<(&str, &str)> = macros
            .iter()
            .copied()
            .filter(|(name, _)| self.negotiated.wants_macro(stage, name))
            .collect();
        if !wanted.is_empty() {
            Command::Macro {
                stage,
                macros: &wanted,
            }
            .encode(&mut self.out);
        }
        command.encode(&mut self.out);
    }

    /// Writes what is queued, then reads and folds the step's replies.
    async fn replies(
        &mut self,
        stage: Stage,
        modification_bytes_max: usize,
    ) -> Result<(Fold, Vec<Modification>), MilterError> {
        let name = stage_name(stage);
        self.flush(name).await?;
        let mut step = Step::new(stage, &self.negotiated, modification_bytes_max);
        let started = Instant::now();
        let last = started + self.config.timeout * PROGRESS_TIMEOUTS_MAX;
        let mut deadline = started + self.config.timeout;
        loop {
            let response = self.read_response(deadline.min(last), name).await?;
            match step.take(response) {
                Ok(Fold::More) => {}
                Ok(Fold::Progress) => deadline = Instant::now() + self.config.timeout,
                Ok(fold) => {
                    if let Some(reason) = step.quarantine() {
                        if stage.is_connection_level() {
                            self.quarantine = Some(reason.to_string());
                        } else {
                            self.transaction.quarantine = Some(reason.to_string());
                        }
                    }
                    return Ok((fold, step.into_modifications()));
                }
                Err(StepError::Shutdown) => return Err(self.fail(MilterError::Shutdown)),
                Err(error) => return Err(self.fail(MilterError::Protocol(error.to_string()))),
            }
        }
    }

    /// The step's decision, and what it does to the connection and the transaction.
    fn after(&mut self, stage: Stage, fold: Fold) -> Decision {
        let decision = match fold {
            Fold::Done(decision) => decision,
            Fold::Skip => {
                self.transaction.skip = Some(stage);
                Decision::Continue
            }
            Fold::More | Fold::Progress => Decision::Continue,
        };
        match (&decision, stage.is_connection_level()) {
            (Decision::Accept, true) => {
                self.connection = Connection::Accepted;
                self.stream = None;
            }
            (Decision::Reject(_) | Decision::TempFail(_), true) => {
                self.connection = Connection::Refused(decision.clone());
                self.stream = None;
            }
            (Decision::Accept | Decision::Discard, false) => self.transaction.accepted = true,
            _ => {}
        }
        self.with_quarantine(decision)
    }

    /// `Continue` and `Accept` become `Quarantine` once a quarantine was asked.
    fn with_quarantine(&self, decision: Decision) -> Decision {
        let reason = self
            .transaction
            .quarantine
            .as_ref()
            .or(self.quarantine.as_ref());
        match (decision, reason) {
            (Decision::Continue | Decision::Accept, Some(reason)) => {
                Decision::Quarantine(reason.clone())
            }
            (decision, _) => decision,
        }
    }

    /// Writes what is queued, within the timeout.
    async fn flush(&mut self, step: &'static str) -> Result<(), MilterError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let Some(stream) = self.stream.as_mut() else {
            self.out.clear();
            return Ok(());
        };
        let written = tokio::time::timeout(self.config.timeout, stream.write_all(&self.out)).await;
        self.out.clear();
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(self.fail(MilterError::Io(error))),
            Err(_) => Err(self.fail(MilterError::Timeout(step))),
        }
    }

    /// The next response, by `deadline`.
    async fn read_response(
        &mut self,
        deadline: Instant,
        step: &'static str,
    ) -> Result<Response, MilterError> {
        loop {
            match self.decoder.next_response() {
                Ok(Some(response)) => return Ok(response),
                Ok(None) => {}
                Err(error) => return Err(self.fail(MilterError::Protocol(error.to_string()))),
            }
            let Some(stream) = self.stream.as_mut() else {
                return Err(self.fail(MilterError::Io(io::ErrorKind::NotConnected.into())));
            };
            let read = tokio::time::timeout_at(deadline, stream.read(&mut self.read_buffer)).await;
            match read {
                Ok(Ok(0)) => {
                    let closed = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the filter closed the connection at {step}"),
                    );
                    return Err(self.fail(MilterError::Io(closed)));
                }
                Ok(Ok(count)) => self.decoder.feed(&self.read_buffer[..count]),
                Ok(Err(error)) => return Err(self.fail(MilterError::Io(error))),
                Err(_) => return Err(self.fail(MilterError::Timeout(step))),
            }
        }
    }

    /// Ends the connection after an error: the stream is out of step (Postfix milter8.c
    /// `milter8_comm_error` closes it too).
    fn fail(&mut self, error: MilterError) -> MilterError {
        tracing::debug!(filter = %self.config.name, %error, "milter connection failed");
        self.connection = Connection::Failed;
        self.stream = None;
        self.out = Vec::new();
        error
    }
}

async fn connect(config: &MilterConfig) -> Result<Box<dyn Io>, MilterError> {
    let timed_out = || {
        MilterError::Connect(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no connection to {} within {:?}",
                config.address, config.connect_timeout
            ),
        ))
    };
    match &config.address {
        MilterAddress::Tcp(address) => {
            let connecting = tokio::net::TcpStream::connect(address.as_str());
            match tokio::time::timeout(config.connect_timeout, connecting).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    Ok(Box::new(stream))
                }
                Ok(Err(error)) => Err(MilterError::Connect(error)),
                Err(_) => Err(timed_out()),
            }
        }
        MilterAddress::Unix(path) => {
            let connecting = tokio::net::UnixStream::connect(path);
            match tokio::time::timeout(config.connect_timeout, connecting).await {
                Ok(Ok(stream)) => Ok(Box::new(stream)),
                Ok(Err(error)) => Err(MilterError::Connect(error)),
                Err(_) => Err(timed_out()),
            }
        }
    }
}

/// Whether the message goes on to the filter's next step: `Continue`, or a quarantine asked
/// earlier (it holds, and the filter still sees the message, as in Postfix).
fn goes_on(decision: &Decision) -> bool {
    matches!(decision, Decision::Continue | Decision::Quarantine(_))
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Connect => "connect",
        Stage::Helo => "helo",
        Stage::Mail => "mail",
        Stage::Rcpt => "rcpt",
        Stage::Data => "data",
        Stage::Header => "header",
        Stage::EndOfHeaders => "end of headers",
        Stage::Body => "body",
        Stage::EndOfMessage => "end of message",
        Stage::Unknown => "unknown command",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let tcp = |s: &str| MilterAddress::Tcp(s.to_string());
        assert_eq!("127.0.0.1:11332".parse(), Ok(tcp("127.0.0.1:11332")));
        assert_eq!("inet:127.0.0.1:11332".parse(), Ok(tcp("127.0.0.1:11332")));
        assert_eq!("inet:localhost:8891".parse(), Ok(tcp("localhost:8891")));
        assert_eq!("inet:7357@127.0.0.1".parse(), Ok(tcp("127.0.0.1:7357")));
        assert_eq!("inet6:7357@::1".parse(), Ok(tcp("[::1]:7357")));
        assert_eq!("inet:[::1]:7357".parse(), Ok(tcp("[::1]:7357")));
        assert_eq!(
            "unix:/run/rspamd/milter.sock".parse(),
            Ok(MilterAddress::Unix("/run/rspamd/milter.sock".into()))
        );
        assert_eq!(
            "local:/run/x".parse(),
            Ok(MilterAddress::Unix("/run/x".into()))
        );
        for bad in ["", "unix:", "host", "host:port", ":25", "inet:70000@host"] {
            assert!(bad.parse::<MilterAddress>().is_err(), "{bad:?}");
        }
        assert_eq!(tcp("127.0.0.1:1").to_string(), "inet:127.0.0.1:1");
    }
}
