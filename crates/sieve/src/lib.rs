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

mod address;
mod capabilities;
mod compile;
mod context;
mod date;
mod error;
pub mod extension;
mod ir;
mod lexer;
mod limits;
mod matching;
mod message;
mod outcome;
mod parser;
mod run;
mod script;
mod strings;
pub mod vacation;

pub use capabilities::EXTENSIONS;
pub use context::Context;
pub use context::Envelope;
pub use context::Location;
pub use error::CompileError;
pub use error::RuntimeError;
pub use limits::Limits;
pub use outcome::Action;
pub use outcome::Flag;
pub use outcome::Outcome;
pub use outcome::Vacation;
pub use script::Host;
pub use script::Script;

/// Compiles `source`. `Limits::script_bytes_max` and `nesting_max` bound the work.
pub fn compile(source: &str, limits: &Limits) -> Result<Script, CompileError> {
    compile::compile_source(source, limits, &extension::Extensions::default())
}

/// Compiles `source` with extra commands and tests registered by a harness (see
/// [`extension`]).
pub fn compile_with(
    source: &str,
    limits: &Limits,
    extensions: &extension::Extensions,
) -> Result<Script, CompileError> {
    compile::compile_source(source, limits, extensions)
}

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
