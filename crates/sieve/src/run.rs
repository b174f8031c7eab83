//! The interpreter: walks a compiled script over one message (RFC 5228 2.10 for what the
//! actions add up to), counting every command and test against `instructions_max`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::address;
use crate::context::{Context, Envelope, Location};
use crate::date::{self, Moment};
use crate::error::RuntimeError;
use crate::extension::{Flow as HookFlow, Handler, RunState, RunView, Value};
use crate::ir::*;
use crate::limits::Limits;
use crate::matching::{self, build_regex, relation};
use crate::message::{Field, Message};
use crate::outcome::{Action, Outcome, Vacation};
use crate::script::{Host, Script, ScriptInner};
use crate::strings::{apply_modifiers, truncate};

mod commands;
mod conditions;

/// The most bytes one string expansion produces (RFC 5229 allows truncating): without
/// it, a script of many `${big}` references could build huge strings.
const EXPANSION_BYTES_MAX: usize = 1 << 20;

/// Default period of `duplicate` without `:seconds` (RFC 7352 3.3 leaves it to us).
const DUPLICATE_DEFAULT_SECONDS: u64 = 7 * 86_400;

fn err(message: impl Into<String>) -> RuntimeError {
    RuntimeError {
        message: message.into(),
    }
}

/// How a block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    /// `stop`: the whole run ends (RFC 5228 3.3; RFC 6609 3.4 for included scripts).
    Stop,
    /// `return`: the current script ends (RFC 6609 3.3).
    Return,
}

/// Warnings one run keeps (`Outcome::warnings`); more are dropped.
const WARNINGS_MAX: usize = 16;

/// One script's variables while it runs.
struct Frame<'s> {
    script: &'s ScriptInner,
    locals: Vec<Option<String>>,
    /// Match variables (RFC 5229 3.2): `${0}` first.
    matches: Vec<String>,
}

/// The state of one run.
struct State<'m> {
    msg: Message<'m>,
    envelope: Envelope,
    /// The caller's context; a harness may replace it mid-run (`RunView::set_context`).
    context: Cow<'m, Context>,
    host: &'m dyn Host,
    limits: &'m Limits,
    actions: Vec<Action>,
    implicit_keep: bool,
    /// The imap4flags internal variable (RFC 5232 3).
    flags: Vec<String>,
    globals: HashMap<String, String>,
    variables: usize,
    instructions: u64,
    redirects: usize,
    vacations: usize,
    edits: usize,
    duplicate_marks: Vec<(String, String, u64)>,
    included_once: HashSet<(Location, String)>,
    include_stack: Vec<(Location, String)>,
    /// Problems that did not stop the run (see `Outcome::warnings`).
    /// (A cell: matching borrows the state shared.)
    warnings: std::cell::RefCell<Vec<String>>,
}

pub(crate) fn run(
    script: &Script,
    message: &[u8],
    context: &Context,
    host: &dyn Host,
    limits: &Limits,
    handler: &mut dyn Handler,
) -> Result<Outcome, RuntimeError> {
    let mut state = State {
        msg: Message::new(Cow::Borrowed(message)),
        envelope: context.envelope.clone(),
        context: Cow::Borrowed(context),
        host,
        limits,
        actions: Vec::new(),
        implicit_keep: true,
        flags: Vec::new(),
        globals: HashMap::new(),
        variables: 0,
        instructions: 0,
        redirects: 0,
        vacations: 0,
        edits: 0,
        duplicate_marks: Vec::new(),
        included_once: HashSet::new(),
        include_stack: Vec::new(),
        warnings: std::cell::RefCell::default(),
    };
    state.run_script(&script.inner, handler)?;
    // RFC 5228 2.10.2: the implicit keep, unless cancelled.
    let implicit_keep = state.implicit_keep;
    if implicit_keep {
        state.actions.push(Action::Keep {
            flags: state.flags.clone(),
        });
    }
    Ok(Outcome {
        actions: state.actions,
        edited_message: if state.msg.edited {
            Some(state.msg.serialize())
        } else {
            None
        },
        duplicate_marks: state.duplicate_marks,
        instructions: state.instructions,
        implicit_keep,
        warnings: state.warnings.into_inner(),
    })
}

/// Splits flag lists on blanks, drops duplicates (system flags compared
/// case-insensitively, keywords too: IMAP keywords are case-insensitive), RFC 5232 3.
fn normalize_flags<'a>(lists: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for list in lists {
        for flag in list.split_ascii_whitespace() {
            if !out.iter().any(|f| f.eq_ignore_ascii_case(flag)) {
                out.push(flag.to_string());
            }
        }
    }
    out
}

/// A stable 64-bit FNV-1a hash (for default vacation handles: stable across builds).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Encodes a header value for addheader: RFC 2047 B encoded-words when not ASCII.
pub(crate) fn encode_header_value(value: &str) -> String {
    // A line break (with the blanks around it) is folding white space: one blank once
    // unfolded (RFC 5322 3.2.2).
    let mut clean = String::with_capacity(value.len());
    for (i, line) in value
        .split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        if i > 0 {
            clean.truncate(clean.trim_end_matches([' ', '\t']).len());
            clean.push(' ');
            clean.push_str(line.trim_start_matches([' ', '\t']));
        } else {
            clean.push_str(line);
        }
    }
    if clean.is_ascii() {
        return clean;
    }
    crate::vacation::encoded_words(&clean)
}

impl RunState for State<'_> {
    fn actions(&self) -> &[Action] {
        &self.actions
    }

    fn implicit_keep(&self) -> bool {
        self.implicit_keep
    }

    fn reset_result(&mut self) {
        self.actions.clear();
        self.implicit_keep = true;
        self.flags.clear();
        self.redirects = 0;
        self.vacations = 0;
    }

    fn message(&self) -> Vec<u8> {
        self.msg.serialize()
    }

    fn set_message(&mut self, message: Vec<u8>) {
        self.msg = Message::new(Cow::Owned(message));
    }

    fn set_envelope(&mut self, envelope: Envelope) {
        self.envelope = envelope;
    }

    fn context(&self) -> &Context {
        &self.context
    }

    fn set_flags(&mut self, flags: Vec<String>) {
        self.flags = normalize_flags(flags.iter().map(String::as_str));
    }

    fn set_context(&mut self, context: Context) {
        self.envelope = context.envelope.clone();
        self.context = Cow::Owned(context);
    }
}

impl<'m> State<'m> {
    fn tick(&mut self) -> Result<(), RuntimeError> {
        self.instructions += 1;
        if self.instructions > self.limits.instructions_max {
            return Err(err(format!(
                "more than {} commands and tests evaluated (sieve_instructions_max)",
                self.limits.instructions_max
            )));
        }
        Ok(())
    }

    fn run_script(
        &mut self,
        script: &ScriptInner,
        handler: &mut dyn Handler,
    ) -> Result<Flow, RuntimeError> {
        let mut frame = Frame {
            script,
            locals: vec![None; script.locals],
            matches: Vec::new(),
        };
        self.block(&mut frame, &script.commands, handler)
    }

    fn block(
        &mut self,
        frame: &mut Frame<'_>,
        cmds: &[Cmd],
        handler: &mut dyn Handler,
    ) -> Result<Flow, RuntimeError> {
        for cmd in cmds {
            let flow = self.command(frame, cmd, handler)?;
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }

    // ---- strings and variables ----

    fn expand<'s>(&self, frame: &Frame<'_>, s: &'s Str) -> Cow<'s, str> {
        match s {
            Str::Const(c) => Cow::Borrowed(c.as_str()),
            Str::Template(parts) => {
                let mut out = String::new();
                for p in parts {
                    let piece = match p {
                        Part::Lit(l) => l.as_str(),
                        Part::Var(v) => self.var(frame, v),
                        Part::Match(n) => frame.matches.get(*n).map_or("", String::as_str),
                    };
                    if out.len() + piece.len() > EXPANSION_BYTES_MAX {
                        out.push_str(piece);
                        truncate(&mut out, EXPANSION_BYTES_MAX);
                        break;
                    }
                    out.push_str(piece);
                }
                Cow::Owned(out)
            }
        }
    }

    fn expand_list(&self, frame: &Frame<'_>, list: &[Str]) -> Vec<String> {
        list.iter()
            .map(|s| self.expand(frame, s).into_owned())
            .collect()
    }

    fn var<'a>(&'a self, frame: &'a Frame<'_>, v: &VarRef) -> &'a str {
        match v {
            VarRef::Local(i) => frame
                .locals
                .get(*i)
                .and_then(|o| o.as_deref())
                .unwrap_or(""),
            VarRef::Global(name) => self.globals.get(name).map_or("", String::as_str),
        }
    }

    fn set_var(
        &mut self,
        frame: &mut Frame<'_>,
        v: &VarRef,
        mut value: String,
    ) -> Result<(), RuntimeError> {
        truncate(&mut value, self.limits.variable_bytes_max);
        let new = match v {
            VarRef::Local(i) => frame.locals.get(*i).is_some_and(Option::is_none),
            VarRef::Global(name) => !self.globals.contains_key(name),
        };
        if new {
            self.variables += 1;
            if self.variables > self.limits.variables_max {
                return Err(err(format!(
                    "more than {} variables (sieve_variables_max)",
                    self.limits.variables_max
                )));
            }
        }
        match v {
            VarRef::Local(i) => {
                if let Some(slot) = frame.locals.get_mut(*i) {
                    *slot = Some(value);
                }
            }
            VarRef::Global(name) => {
                self.globals.insert(name.clone(), value);
            }
        }
        Ok(())
    }

    // ---- matching ----

    /// Whether any of `values` matches any key; sets the match variables on success
    /// (when the script uses variables and the match type sets them).
    fn match_values<I>(
        &self,
        frame: &mut Frame<'_>,
        m: &Matcher,
        values: I,
    ) -> Result<bool, RuntimeError>
    where
        I: IntoIterator + Clone,
        I::Item: AsRef<str>,
    {
        if let MatchType::Count(rel) = m.match_type {
            // RFC 5231 4.2: the number of values, compared as a string.
            let count = values.into_iter().count().to_string();
            for k in &m.keys {
                let key = self.expand(frame, &k.s);
                if relation(rel, matching::compare(m.comparator, &count, &key)) {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let want_caps =
            frame.script.variables && matches!(m.match_type, MatchType::Matches | MatchType::Regex);
        let mut caps = Vec::new();
        for k in &m.keys {
            let key = self.expand(frame, &k.s);
            let built;
            let regex = match (&k.regex, m.match_type) {
                (Some(re), _) => Some(re),
                (None, MatchType::Regex) => match build_regex(&key, m.comparator) {
                    Ok(re) => {
                        built = re;
                        Some(&built)
                    }
                    // A key that is no regex once variables are expanded matches nothing
                    // and the run goes on (as Pigeonhole: one error reported, the test
                    // false rather than the whole run failed).
                    Err(e) => {
                        let mut warnings = self.warnings.borrow_mut();
                        if warnings.len() < WARNINGS_MAX {
                            warnings.push(e);
                        }
                        continue;
                    }
                },
                _ => None,
            };
            for v in values.clone() {
                let hit = matching::matches(
                    m.match_type,
                    m.comparator,
                    v.as_ref(),
                    &key,
                    regex,
                    if want_caps { Some(&mut caps) } else { None },
                );
                if hit {
                    if want_caps {
                        frame.matches = std::mem::take(&mut caps);
                    }
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The fields with these names, the names taken in order, `:index` applied across
    /// them all (RFC 5260 6).
    fn indexed_fields<S: AsRef<str>>(&self, names: &[S], index: Option<Index>) -> Vec<&Field> {
        let mut all: Vec<&Field> = Vec::new();
        for n in names {
            all.extend(self.msg.fields_named(n.as_ref()));
        }
        match index {
            None => all,
            Some(Index { n, last }) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                let at = if last {
                    all.len().checked_sub(n)
                } else {
                    n.checked_sub(1)
                };
                at.and_then(|i| all.get(i).copied()).into_iter().collect()
            }
        }
    }

    fn zone_of(&self, frame: &Frame<'_>, zone: &Zone, original: i32) -> Option<i32> {
        match zone {
            Zone::Local => Some(self.context.zone_minutes),
            Zone::Original => Some(original),
            Zone::Given(s) => date::parse_zone(&self.expand(frame, s)),
        }
    }

    /// spamtest and virustest (RFC 5235 3): "0" when not tested; `:count` is 0 then, 1
    /// otherwise.
    fn score_test(
        &self,
        frame: &mut Frame<'_>,
        matcher: &Matcher,
        score: Option<u8>,
    ) -> Result<bool, RuntimeError> {
        let values: Vec<String> = match (matcher.match_type, score) {
            (MatchType::Count(_), None) => Vec::new(),
            (_, s) => vec![s.unwrap_or(0).to_string()],
        };
        self.match_values(frame, matcher, &values)
    }

    /// `duplicate` (RFC 7352 3): asks the host; the id to record goes to the outcome.
    fn duplicate(&mut self, frame: &Frame<'_>, d: &Duplicate) -> bool {
        let id = if let Some(u) = &d.unique_id {
            Some(self.expand(frame, u).into_owned())
        } else {
            let name = d
                .header
                .as_ref()
                .map_or(Cow::Borrowed("message-id"), |h| self.expand(frame, h));
            self.msg.fields_named(&name).next().map(Field::unfolded)
        };
        let Some(id) = id.filter(|i| !i.is_empty()) else {
            return false;
        };
        let handle = d
            .handle
            .as_ref()
            .map(|h| self.expand(frame, h).into_owned())
            .unwrap_or_default();
        let period = d.seconds.unwrap_or(DUPLICATE_DEFAULT_SECONDS);
        let seen = self.host.duplicate(&handle, &id, period);
        if !seen || d.last {
            self.duplicate_marks.push((handle, id, period));
        }
        seen
    }

    fn custom_values(&self, frame: &Frame<'_>, args: &[CustomArg]) -> Vec<Value> {
        args.iter()
            .map(|a| match a {
                CustomArg::Tag(t) => Value::Tag(t.clone()),
                CustomArg::Number(n) => Value::Number(*n),
                CustomArg::Strings(s) => Value::Strings(self.expand_list(frame, s)),
            })
            .collect()
    }

    // ---- actions ----

    fn check_reject_conflict(&self, what: &str) -> Result<(), RuntimeError> {
        // RFC 5429 2.4: reject is incompatible with vacation, and we refuse to combine it
        // with actions that deliver (NOT RECOMMENDED there).
        if self
            .actions
            .iter()
            .any(|a| matches!(a, Action::Reject { .. }))
        {
            return Err(err(format!(
                "{what} cannot be combined with reject (RFC 5429 2.4)"
            )));
        }
        Ok(())
    }

    fn store(
        &mut self,
        mailbox: Option<String>,
        flags: Vec<String>,
        create: bool,
    ) -> Result<(), RuntimeError> {
        self.check_reject_conflict(if mailbox.is_some() {
            "fileinto"
        } else {
            "keep"
        })?;
        // RFC 5228 2.10.3: the same mailbox twice is one action; `keep` is a `fileinto
        // "INBOX"` (4.3), so those two are one action too (the first kept). The last flag
        // list wins (RFC 5232 3: "the last flag list value MUST win").
        let inbox = |m: &str| m.eq_ignore_ascii_case("INBOX");
        for a in &mut self.actions {
            match (a, &mailbox) {
                (Action::Keep { flags: f }, None) => {
                    *f = flags;
                    return Ok(());
                }
                (Action::Keep { flags: f }, Some(name)) if inbox(name) => {
                    *f = flags;
                    return Ok(());
                }
                (
                    Action::FileInto {
                        mailbox: m,
                        flags: f,
                        ..
                    },
                    None,
                ) if inbox(m) => {
                    *f = flags;
                    return Ok(());
                }
                (
                    Action::FileInto {
                        mailbox: m,
                        flags: f,
                        create: c,
                    },
                    Some(name),
                ) if m == name => {
                    *f = flags;
                    *c |= create;
                    return Ok(());
                }
                _ => {}
            }
        }
        self.push_action(match mailbox {
            None => Action::Keep { flags },
            Some(mailbox) => Action::FileInto {
                mailbox,
                flags,
                create,
            },
        })
    }

    /// Adds a new (not a duplicate) action, within `Limits::actions_max` (RFC 5228 2.10.4).
    fn push_action(&mut self, action: Action) -> Result<(), RuntimeError> {
        if self.actions.len() >= self.limits.actions_max {
            return Err(err(format!(
                "total number of actions exceeds policy limit (sieve_actions_max: {})",
                self.limits.actions_max
            )));
        }
        self.actions.push(action);
        Ok(())
    }

    fn edit(&mut self, n: usize) -> Result<(), RuntimeError> {
        self.edits += n;
        if self.edits > self.limits.header_edits_max {
            return Err(err(format!(
                "more than {} header edits (sieve_header_edits_max)",
                self.limits.header_edits_max
            )));
        }
        Ok(())
    }
}
