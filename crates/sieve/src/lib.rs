//! Sieve (RFC 5228) with the extensions mail clients generate: a script is compiled once
//! ([`compile`]) and run ([`run`]) on a message and its envelope; the result is a list of
//! [`Action`]s the caller carries out. Sans-IO: what a run needs to know from outside
//! (whether a mailbox exists, whether a message was seen before, another script to include)
//! it asks its [`Host`]; it never reads a clock, a file or a socket.
//!
//! Inside: [`lexer`] and [`parser`] turn the source into a generic tree, [`compile`]
//! resolves it into a compact typed tree ([`ir`]) with `require` enforced, and [`run`]
//! walks that tree over the message ([`message`]: header fields split once per run),
//! with [`matching`], [`address`], [`date`] and [`strings`] doing the comparisons and the
//! variable work. The [`extension`] module lets a test harness add commands and tests.

use std::sync::Arc;

mod address;
mod compile;
mod date;
pub mod extension;
mod ir;
mod lexer;
mod matching;
mod message;
mod parser;
mod run;
mod strings;
pub mod vacation;

/// The extensions this interpreter implements, in the order the `SIEVE` capability of
/// ManageSieve (RFC 5804 1.7) lists them.
pub const EXTENSIONS: &[&str] = &[
    "fileinto",
    "reject",
    "ereject",
    "envelope",
    "encoded-character",
    "variables",
    "vacation",
    "vacation-seconds",
    "relational",
    "comparator-i;ascii-numeric",
    "imap4flags",
    "subaddress",
    "body",
    "date",
    "index",
    "copy",
    "mailbox",
    "include",
    "editheader",
    "duplicate",
    "environment",
    "ihave",
    "spamtest",
    "spamtestplus",
    "virustest",
    "regex",
];

/// What bounds a script and one run of it (docs/limits.md "Sieve").
#[derive(Debug, Clone)]
pub struct Limits {
    /// A script's source, in bytes (`sieve_script_bytes_max`).
    pub script_bytes_max: usize,
    /// Commands and tests evaluated in one run, included scripts counted
    /// (`sieve_instructions_max`); past it the run fails (and the message is kept).
    pub instructions_max: u64,
    /// Header fields added or deleted by one run (`sieve_header_edits_max`).
    pub header_edits_max: usize,
    /// Redirects one run may make (`sieve_redirects_max`).
    pub redirects_max: usize,
    /// Vacation replies one run may make (`sieve_vacation_max`; RFC 5230 allows one).
    pub vacation_max: usize,
    /// Nested includes (`sieve_include_depth_max`).
    pub include_depth_max: usize,
    /// Variables one run may hold, and the bytes of one variable's value
    /// (`sieve_variables_max`, `sieve_variable_bytes_max`).
    pub variables_max: usize,
    pub variable_bytes_max: usize,
    /// Nesting of blocks and tests in the source (`sieve_nesting_max`).
    pub nesting_max: usize,
    /// Bytes of a message body a `body` test looks at (`sieve_body_bytes_max`).
    pub body_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            script_bytes_max: 64 * 1024,
            instructions_max: 10_000,
            header_edits_max: 32,
            redirects_max: 4,
            vacation_max: 1,
            include_depth_max: 5,
            variables_max: 128,
            variable_bytes_max: 4096,
            nesting_max: 32,
            body_bytes_max: 1024 * 1024,
        }
    }
}

/// A compile error: where in the source, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// 1-based line and column of the offending token.
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for CompileError {}

/// A compiled script: cheap to clone and share between threads.
#[derive(Debug, Clone)]
pub struct Script {
    inner: Arc<ScriptInner>,
}

/// What compiling keeps: the typed tree and what is known of it beforehand.
#[derive(Debug)]
struct ScriptInner {
    commands: Vec<ir::Cmd>,
    required: Vec<String>,
    /// Slots for the script's own variables.
    locals: usize,
    /// Whether the script requires "variables" (then `:matches` and `:regex` set the
    /// match variables, RFC 5229 3.2).
    variables: bool,
    may_reject: bool,
    may_reply: bool,
}

impl Script {
    /// Whether a run of this script can end in `reject` or `ereject` (so a server may run it
    /// before its `250` to refuse instead of bouncing). Computed from the script's own
    /// commands: a script it includes is not known at compile time.
    pub fn may_reject(&self) -> bool {
        self.inner.may_reject
    }

    /// Whether a run can ask for `vacation` (in this script's own commands).
    pub fn may_reply(&self) -> bool {
        self.inner.may_reply
    }

    /// The extensions the script `require`s (lower-cased, in order, with those a
    /// capability implies: "spamtestplus" brings "spamtest").
    pub fn required(&self) -> &[String] {
        &self.inner.required
    }
}

/// Compiles `source`. `Limits::script_bytes_max` and `nesting_max` bound the work.
pub fn compile(source: &str, limits: &Limits) -> Result<Script, CompileError> {
    compile_with(source, limits, &extension::Extensions::default())
}

/// Compiles `source` with extra commands and tests registered by a harness (see
/// [`extension`]).
pub fn compile_with(
    source: &str,
    limits: &Limits,
    extensions: &extension::Extensions,
) -> Result<Script, CompileError> {
    if source.len() > limits.script_bytes_max {
        return Err(CompileError {
            line: 1,
            column: 1,
            message: format!(
                "the script is {} bytes, more than sieve_script_bytes_max ({})",
                source.len(),
                limits.script_bytes_max
            ),
        });
    }
    let tokens = lexer::tokenize(source)?;
    // The tree is walked recursively (compile and run): a hard cap keeps the stack safe
    // whatever the configuration says.
    let nesting = limits.nesting_max.min(NESTING_HARD_MAX);
    let nodes = parser::parse(&tokens, nesting)?;
    let compiled = compile::compile(&nodes, extensions)?;
    let variables = compiled.required.iter().any(|r| r == "variables");
    Ok(Script {
        inner: Arc::new(ScriptInner {
            commands: compiled.commands,
            required: compiled.required,
            locals: compiled.locals,
            variables,
            may_reject: compiled.may_reject,
            may_reply: compiled.may_reply,
        }),
    })
}

/// The deepest nesting accepted whatever `Limits::nesting_max` says.
const NESTING_HARD_MAX: usize = 256;

/// The SMTP envelope of the message being delivered (RFC 5228 5.4).
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// MAIL FROM's reverse path, without angle brackets; empty for the null sender.
    pub from: String,
    /// The recipient this delivery is for (RCPT TO), without angle brackets.
    pub to: String,
    /// The original recipient (RFC 3461 ORCPT), when known.
    pub orig_to: Option<String>,
    /// The authenticated submitter (`envelope "auth"`), when known.
    pub auth: Option<String>,
}

/// What a run knows of its surroundings.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub envelope: Envelope,
    /// Seconds since the Unix epoch, and the local offset from UTC in minutes (the `date`
    /// extension's "now" and zone).
    pub now: i64,
    pub zone_minutes: i32,
    /// `environment` items (RFC 5183 4.1): "domain", "host", "name", "version",
    /// "location" ("MDA"), "phase" ("during"), "remote-host", "remote-ip" and our own.
    pub environment: Vec<(String, String)>,
    /// The spam and virus verdicts (RFC 5235), as the header fields the spam filter adds
    /// carry them: `spamtest` 0..=10 (0 = not tested), `spamtestplus` percent, `virustest`
    /// 0..=5. `None` = not tested.
    pub spam_score: Option<u8>,
    pub spam_percent: Option<u8>,
    pub virus_score: Option<u8>,
}

/// Where a script is kept, for `include` (RFC 6609 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    Personal,
    Global,
}

/// What a run asks its caller.
pub trait Host {
    /// Whether the user has a mailbox of this name (RFC 5490 3.1 `mailboxexists`).
    fn mailbox_exists(&self, name: &str) -> bool;
    /// Whether a message with this tracking id was seen by this user within `period`
    /// seconds (RFC 7352 3). Recording the id is the caller's, after a successful
    /// delivery: see [`Outcome::duplicate_marks`].
    fn duplicate(&self, handle: &str, id: &str, period_seconds: u64) -> bool;
    /// Another script, for `include`; `Err` says why there is none (a missing script is a
    /// run-time error unless `:optional`).
    fn include(&self, location: Location, name: &str) -> Result<Script, String>;
}

/// A mailbox flag (imap4flags, RFC 5232): the IMAP flag as written, `\Seen` or a keyword.
pub type Flag = String;

/// One action the caller carries out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Store in INBOX (explicit `keep`, or the implicit keep) with these flags.
    Keep { flags: Vec<Flag> },
    /// Store in `mailbox` (RFC 5228 4.1) with these flags; `create` (RFC 5490 3.2) makes it
    /// if missing.
    FileInto {
        mailbox: String,
        flags: Vec<Flag>,
        create: bool,
    },
    /// Send the message on to `address` (RFC 5228 4.2).
    Redirect { address: String },
    /// Refuse the message (RFC 5429): `extended` for `ereject` (refuse in the protocol
    /// if at all possible).
    Reject { reason: String, extended: bool },
    /// Send a vacation reply (RFC 5230); whether one is actually sent (RFC 3834 rules, the
    /// once-per-period record) is the caller's: see the [`vacation`] helpers.
    Vacation(Vacation),
}

/// A `vacation` action's arguments, evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vacation {
    /// At most one reply per sender within this many seconds (`:days` * 86400 or
    /// `:seconds`, RFC 6131).
    pub period_seconds: u64,
    pub subject: Option<String>,
    pub from: Option<String>,
    /// The user's other addresses (`:addresses`).
    pub addresses: Vec<String>,
    /// `:mime`: `reason` is a MIME entity, headers included.
    pub mime: bool,
    /// The handle identifying this reply for the once-per-period record (`:handle`, or one
    /// derived from the arguments per RFC 5230 4.2).
    pub handle: String,
    pub reason: String,
}

/// What a run decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The actions, in the order the script took them, the implicit keep included as a
    /// `Keep` when it applies. Never empty unless the script discarded the message.
    pub actions: Vec<Action>,
    /// The header edits (editheader, RFC 5293) applied to the message: when `Some`, the
    /// message to store and redirect is this one instead of the original.
    pub edited_message: Option<Vec<u8>>,
    /// Tracking ids to record once the message is delivered (RFC 7352 3):
    /// (handle, id, period in seconds).
    pub duplicate_marks: Vec<(String, String, u64)>,
    /// Commands and tests evaluated.
    pub instructions: u64,
}

/// A run-time error. The caller keeps the message in INBOX (RFC 5228 2.10.6) and logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeError {
    pub message: String,
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {}

/// Runs `script` on `message` (the raw RFC 5322 bytes).
pub fn run(
    script: &Script,
    message: &[u8],
    context: &Context,
    host: &dyn Host,
    limits: &Limits,
) -> Result<Outcome, RuntimeError> {
    run::run(
        script,
        message,
        context,
        host,
        limits,
        &mut extension::NoHandler,
    )
}

/// Runs a script compiled with [`compile_with`], calling `handler` for the registered
/// commands and tests.
pub fn run_with(
    script: &Script,
    message: &[u8],
    context: &Context,
    host: &dyn Host,
    limits: &Limits,
    handler: &mut dyn extension::Handler,
) -> Result<Outcome, RuntimeError> {
    run::run(script, message, context, host, limits, handler)
}
