//! A hook for extra commands and tests, for test harnesses (e.g. Pigeonhole's
//! `vnd.dovecot.testsuite`, whose `.svtest` scripts use `test`, `test_set`,
//! `test_result_action` and so on): the harness registers the names under a capability
//! ([`Extensions`]), compiles with [`crate::compile_with`] and runs with
//! [`crate::run_with`], and its [`Handler`] is called back with the evaluated arguments.
//! A script compiled with [`crate::compile`] can use none of these.

use crate::context::{Context, Envelope};
use crate::outcome::Action;

/// One registered extension: a capability (usable once `require`d) and the command and
/// test names it brings.
#[derive(Debug, Clone, Default)]
pub struct Extension {
    pub capability: String,
    pub commands: Vec<String>,
    pub tests: Vec<String>,
}

/// The extensions a harness registers.
#[derive(Debug, Clone, Default)]
pub struct Extensions {
    list: Vec<Extension>,
}

impl Extensions {
    pub fn new() -> Extensions {
        Extensions::default()
    }

    /// Adds an extension; names are matched case-insensitively.
    pub fn add(&mut self, mut extension: Extension) -> &mut Extensions {
        extension.capability.make_ascii_lowercase();
        extension
            .commands
            .iter_mut()
            .for_each(|c| c.make_ascii_lowercase());
        extension
            .tests
            .iter_mut()
            .for_each(|c| c.make_ascii_lowercase());
        self.list.push(extension);
        self
    }

    pub(crate) fn has_capability(&self, name: &str) -> bool {
        self.list.iter().any(|e| e.capability == name)
    }

    pub(crate) fn command_capability(&self, name: &str) -> Option<&str> {
        self.list
            .iter()
            .find(|e| e.commands.iter().any(|c| c == name))
            .map(|e| e.capability.as_str())
    }

    pub(crate) fn test_capability(&self, name: &str) -> Option<&str> {
        self.list
            .iter()
            .find(|e| e.tests.iter().any(|c| c == name))
            .map(|e| e.capability.as_str())
    }
}

/// An argument of a registered command or test, evaluated (variables expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Tag(String),
    Number(u64),
    Strings(Vec<String>),
}

/// What the interpreter does after a registered command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Run the command's block (if it has one), then continue.
    RunBlock,
    /// End the run as `stop` does.
    Stop,
}

/// The harness's side of registered commands and tests.
pub trait Handler {
    /// A registered command; `test` is the result of its test, when it has one.
    fn command(
        &mut self,
        name: &str,
        args: &[Value],
        test: Option<bool>,
        run: &mut RunView<'_, '_>,
    ) -> Result<Flow, String>;
    /// A registered test.
    fn test(
        &mut self,
        name: &str,
        args: &[Value],
        run: &mut RunView<'_, '_>,
    ) -> Result<bool, String>;
}

/// The handler for plain runs: no command or test is registered, so it is never called.
pub(crate) struct NoHandler;

impl Handler for NoHandler {
    fn command(
        &mut self,
        name: &str,
        _: &[Value],
        _: Option<bool>,
        _: &mut RunView<'_, '_>,
    ) -> Result<Flow, String> {
        Err(format!("no handler for {name}"))
    }
    fn test(&mut self, name: &str, _: &[Value], _: &mut RunView<'_, '_>) -> Result<bool, String> {
        Err(format!("no handler for {name}"))
    }
}

/// What the interpreter lets a handler see and change (implemented by the run's state, so
/// that this module need not know the interpreter).
pub(crate) trait RunState {
    fn actions(&self) -> &[Action];
    fn implicit_keep(&self) -> bool;
    fn reset_result(&mut self);
    fn message(&self) -> Vec<u8>;
    fn set_message(&mut self, message: Vec<u8>);
    fn set_envelope(&mut self, envelope: Envelope);
    fn context(&self) -> &Context;
    fn set_context(&mut self, context: Context);
    fn set_flags(&mut self, flags: Vec<String>);
}

/// What a handler may see and change of the run in progress.
pub struct RunView<'r, 'm> {
    pub(crate) state: &'r mut (dyn RunState + 'm),
}

impl RunView<'_, '_> {
    /// The actions taken so far (the implicit keep not yet added).
    pub fn actions(&self) -> &[Action] {
        self.state.actions()
    }

    /// Whether the implicit keep is still in effect.
    pub fn implicit_keep(&self) -> bool {
        self.state.implicit_keep()
    }

    /// Forgets the actions taken so far and restores the implicit keep (a new test case).
    pub fn reset_result(&mut self) {
        self.state.reset_result();
    }

    /// The message as it stands (edits applied).
    pub fn message(&self) -> Vec<u8> {
        self.state.message()
    }

    /// Replaces the message the rest of the run looks at.
    pub fn set_message(&mut self, message: Vec<u8>) {
        self.state.set_message(message);
    }

    /// Replaces the envelope the rest of the run looks at.
    pub fn set_envelope(&mut self, envelope: Envelope) {
        self.state.set_envelope(envelope);
    }

    /// The context the run looks at (time, zone, environment, spam and virus verdicts).
    pub fn context(&self) -> &Context {
        self.state.context()
    }

    /// Replaces the context the rest of the run looks at, its envelope included (a harness
    /// changing the configuration mid-run, e.g. the spam verdict).
    pub fn set_context(&mut self, context: Context) {
        self.state.set_context(context);
    }

    /// Replaces the imap4flags internal variable (RFC 5232 3): e.g. a harness taking a
    /// stored message with its flags as the one the rest of the run looks at.
    pub fn set_flags(&mut self, flags: Vec<String>) {
        self.state.set_flags(flags);
    }
}
