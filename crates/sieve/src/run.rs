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

    fn test(
        &mut self,
        frame: &mut Frame<'_>,
        t: &Test,
        handler: &mut dyn Handler,
    ) -> Result<bool, RuntimeError> {
        self.tick()?;
        Ok(match t {
            Test::True => true,
            Test::False => false,
            Test::Not(inner) => !self.test(frame, inner, handler)?,
            Test::AllOf(list) => {
                for t in list {
                    if !self.test(frame, t, handler)? {
                        return Ok(false);
                    }
                }
                true
            }
            Test::AnyOf(list) => {
                for t in list {
                    if self.test(frame, t, handler)? {
                        return Ok(true);
                    }
                }
                false
            }
            Test::Exists(names) => names.iter().all(|n| {
                self.msg
                    .fields_named(&self.expand(frame, n))
                    .next()
                    .is_some()
            }),
            Test::Header {
                names,
                index: None,
                matcher,
            } if names.iter().all(|n| n.as_const().is_some()) => {
                // The common case, without allocating: constant names, no :index.
                let msg = &self.msg;
                let values = names
                    .iter()
                    .filter_map(Str::as_const)
                    .flat_map(move |n| msg.fields_named(n))
                    .map(Field::decoded);
                self.match_values(frame, matcher, values)?
            }
            Test::Address {
                names,
                part,
                index: None,
                matcher,
            } if names.iter().all(|n| n.as_const().is_some()) => {
                let msg = &self.msg;
                let part = *part;
                let values = names
                    .iter()
                    .filter_map(Str::as_const)
                    .flat_map(move |n| msg.fields_named(n))
                    .flat_map(|f| f.addresses().iter())
                    .filter_map(move |a| address::part(a, part));
                self.match_values(frame, matcher, values)?
            }
            Test::Header {
                names,
                index,
                matcher,
            } => {
                let names: Vec<Cow<'_, str>> =
                    names.iter().map(|n| self.expand(frame, n)).collect();
                let values: Vec<&str> = self
                    .indexed_fields(&names, *index)
                    .into_iter()
                    .map(Field::decoded)
                    .collect();
                self.match_values(frame, matcher, &values)?
            }
            Test::Address {
                names,
                part,
                index,
                matcher,
            } => {
                let names: Vec<Cow<'_, str>> =
                    names.iter().map(|n| self.expand(frame, n)).collect();
                let mut values: Vec<&str> = Vec::new();
                for f in self.indexed_fields(&names, *index) {
                    for a in f.addresses() {
                        if let Some(p) = address::part(a, *part) {
                            values.push(p);
                        }
                    }
                }
                self.match_values(frame, matcher, &values)?
            }
            Test::Envelope {
                parts,
                part,
                matcher,
            } => {
                let mut values: Vec<&str> = Vec::new();
                for p in parts {
                    let which = self.expand(frame, p);
                    let is = |name: &str| which.eq_ignore_ascii_case(name);
                    let value = if is("from") {
                        Some(self.envelope.from.as_str())
                    } else if is("to") {
                        Some(self.envelope.to.as_str())
                    } else if is("orig_to") {
                        self.envelope.orig_to.as_deref()
                    } else if is("auth") {
                        self.envelope.auth.as_deref()
                    } else {
                        None
                    };
                    // RFC 5228 5.4: the null reverse-path is matched as "" whatever the
                    // address part.
                    match value {
                        Some("") => values.push(""),
                        Some(v) => values.extend(address::part(v, *part)),
                        None => {}
                    }
                }
                self.match_values(frame, matcher, &values)?
            }
            Test::Size { over, limit } => {
                let size = self.msg.size();
                if *over { size > *limit } else { size < *limit }
            }
            Test::String { sources, matcher } => {
                let mut values = self.expand_list(frame, sources);
                if matches!(matcher.match_type, MatchType::Count(_)) {
                    // RFC 5229 5: empty strings are not counted.
                    values.retain(|v| !v.is_empty());
                }
                self.match_values(frame, matcher, &values)?
            }
            Test::HasFlag { variables, matcher } => {
                let flags = if variables.is_empty() {
                    self.flags.clone()
                } else {
                    let lists: Vec<String> = variables
                        .iter()
                        .map(|v| self.var(frame, v).to_string())
                        .collect();
                    normalize_flags(lists.iter().map(String::as_str))
                };
                // RFC 5232 4: each key is a flag list too.
                if matches!(matcher.match_type, MatchType::Count(_)) {
                    return self.match_values(frame, matcher, &flags);
                }
                let mut hit = false;
                for k in &matcher.keys {
                    let key = self.expand(frame, &k.s).into_owned();
                    for single in key.split_ascii_whitespace() {
                        let one = Matcher {
                            match_type: matcher.match_type,
                            comparator: matcher.comparator,
                            keys: vec![Key {
                                s: Str::Const(single.to_string()),
                                regex: k.regex.clone(),
                            }],
                        };
                        if self.match_values(frame, &one, &flags)? {
                            hit = true;
                            break;
                        }
                    }
                    if hit {
                        break;
                    }
                }
                hit
            }
            Test::Body { .. } if !self.msg.has_body() => false,
            Test::Body { transform, matcher } => {
                let max = self.limits.body_bytes_max;
                let values: Vec<String> = match transform {
                    BodyTransform::Raw => {
                        let body = self.msg.body();
                        vec![String::from_utf8_lossy(&body[..body.len().min(max)]).into_owned()]
                    }
                    BodyTransform::Text => self
                        .msg
                        .body_parts(max)
                        .iter()
                        .filter(|p| {
                            p.content_type.starts_with("text/")
                                || p.content_type == "application/xhtml+xml"
                        })
                        // RFC 5173 5.3: "best effort at extracting UTF-8 encoded text": an
                        // HTML or XHTML part is matched as its text, without the markup (as
                        // Pigeonhole).
                        .map(|p| {
                            if matches!(
                                p.content_type.as_str(),
                                "text/html" | "application/xhtml+xml"
                            ) {
                                mail_parser::decoders::html::html_to_text(&p.text)
                            } else {
                                p.text.clone()
                            }
                        })
                        .collect(),
                    BodyTransform::Content(types) => {
                        let types: Vec<String> = self
                            .expand_list(frame, types)
                            .into_iter()
                            .map(|t| t.to_ascii_lowercase())
                            .collect();
                        self.msg
                            .body_parts(max)
                            .iter()
                            .filter(|p| {
                                types.iter().any(|t| {
                                    // "type" or "type/subtype" (RFC 5173 5); anything else,
                                    // such as "text/plain/x", matches no part.
                                    t.is_empty()
                                        || match t.split_once('/') {
                                            Some((_, sub)) if sub.contains('/') => false,
                                            Some(_) => p.content_type == *t,
                                            None => {
                                                p.content_type.split('/').next() == Some(t.as_str())
                                            }
                                        }
                                })
                            })
                            .map(|p| p.text.clone())
                            .collect()
                    }
                };
                // RFC 5173 6: body tests MUST NOT set match variables.
                let kept = frame.matches.clone();
                let hit = self.match_values(frame, matcher, &values)?;
                frame.matches = kept;
                hit
            }
            Test::Date {
                zone,
                header,
                part,
                index,
                matcher,
            } => {
                let name = self.expand(frame, header).into_owned();
                let part = self.expand(frame, part).into_owned();
                let mut values = Vec::new();
                for f in self.indexed_fields(&[&name], *index) {
                    if let Some(m) = date::parse_field(&f.unfolded())
                        && let Some(z) = self.zone_of(frame, zone, m.zone)
                        && let Some(v) = date::date_part(
                            Moment {
                                utc: m.utc,
                                zone: z,
                            },
                            &part,
                        )
                    {
                        values.push(v);
                    }
                }
                self.match_values(frame, matcher, &values)?
            }
            Test::CurrentDate {
                zone,
                part,
                matcher,
            } => {
                let part = self.expand(frame, part).into_owned();
                let z = self.zone_of(frame, zone, self.context.zone_minutes);
                let values: Vec<String> = z
                    .and_then(|z| {
                        date::date_part(
                            Moment {
                                utc: self.context.now,
                                zone: z,
                            },
                            &part,
                        )
                    })
                    .into_iter()
                    .collect();
                self.match_values(frame, matcher, &values)?
            }
            Test::MailboxExists(names) => {
                let names = self.expand_list(frame, names);
                names.iter().all(|n| self.host.mailbox_exists(n))
            }
            Test::Duplicate(d) => self.duplicate(frame, d),
            Test::Environment { name, matcher } => {
                let name = self.expand(frame, name);
                let values: Vec<String> = self
                    .context
                    .environment
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&name))
                    .map(|(_, v)| v.clone())
                    .into_iter()
                    .collect();
                // RFC 5183 4: an unknown item fails the test, whatever the match type
                // (`:count "eq" "0"` included).
                !values.is_empty() && self.match_values(frame, matcher, &values)?
            }
            Test::Spam { percent, matcher } => {
                let score = if *percent {
                    self.context.spam_percent.map(|p| p.min(100))
                } else {
                    self.context.spam_score.map(|s| s.min(10))
                };
                self.score_test(frame, matcher, score)?
            }
            Test::Virus { matcher } => {
                let score = self.context.virus_score.map(|s| s.min(5));
                self.score_test(frame, matcher, score)?
            }
            Test::Custom(c) => {
                let args = self.custom_values(frame, &c.args);
                let mut view = RunView { state: self };
                handler.test(&c.name, &args, &mut view).map_err(err)?
            }
        })
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

    fn command(
        &mut self,
        frame: &mut Frame<'_>,
        cmd: &Cmd,
        handler: &mut dyn Handler,
    ) -> Result<Flow, RuntimeError> {
        self.tick()?;
        match cmd {
            Cmd::If(branches, otherwise) => {
                for (test, block) in branches {
                    if self.test(frame, test, handler)? {
                        return self.block(frame, block, handler);
                    }
                }
                if let Some(block) = otherwise {
                    return self.block(frame, block, handler);
                }
            }
            Cmd::Stop => return Ok(Flow::Stop),
            Cmd::Return => return Ok(Flow::Return),
            Cmd::Keep { flags } => {
                let flags = match flags {
                    Some(f) => {
                        normalize_flags(self.expand_list(frame, f).iter().map(String::as_str))
                    }
                    None => self.flags.clone(),
                };
                self.store(None, flags, false)?;
                self.implicit_keep = false;
            }
            Cmd::Discard => self.implicit_keep = false,
            Cmd::FileInto {
                mailbox,
                flags,
                copy,
                create,
            } => {
                let mailbox = self.expand(frame, mailbox).into_owned();
                if mailbox.is_empty() {
                    return Err(err("fileinto: empty mailbox name"));
                }
                // Octets that are not UTF-8 (`${hex:ff}`, RFC 5228 2.4.2.4) were decoded to
                // U+FFFD: such a name is not a mailbox name (RFC 5228 4.1, RFC 3501 5.1).
                if mailbox.contains('\u{FFFD}') {
                    return Err(err(format!(
                        "fileinto: invalid folder name \"{mailbox}\" (not UTF-8)"
                    )));
                }
                let flags = match flags {
                    Some(f) => {
                        normalize_flags(self.expand_list(frame, f).iter().map(String::as_str))
                    }
                    None => self.flags.clone(),
                };
                self.store(Some(mailbox), flags, *create)?;
                if !copy {
                    self.implicit_keep = false;
                }
            }
            Cmd::Redirect { address, copy } => {
                let given = self.expand(frame, address);
                let Some(address) = address::normalize_mailbox(&given) else {
                    return Err(err(format!(
                        "redirect: \"{}\" is not a valid address",
                        given.trim()
                    )));
                };
                self.check_reject_conflict("redirect")?;
                let dup = self
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::Redirect { address: b } if b.eq_ignore_ascii_case(&address)));
                if !dup {
                    self.redirects += 1;
                    if self.redirects > self.limits.redirects_max {
                        return Err(err(format!(
                            "number of redirect actions exceeds policy limit \
                             (sieve_redirects_max: {})",
                            self.limits.redirects_max
                        )));
                    }
                    self.push_action(Action::Redirect { address })?;
                }
                if !copy {
                    self.implicit_keep = false;
                }
            }
            Cmd::Reject { reason, extended } => {
                if self
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::Reject { .. }))
                {
                    return Err(err("only one reject or ereject per run (RFC 5429 2.4)"));
                }
                if self
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::Vacation(_)))
                {
                    return Err(err(
                        "reject cannot be combined with vacation (RFC 5429 2.4)",
                    ));
                }
                if self.actions.iter().any(|a| {
                    matches!(
                        a,
                        Action::Keep { .. } | Action::FileInto { .. } | Action::Redirect { .. }
                    )
                }) {
                    return Err(err(
                        "reject cannot be combined with keep, fileinto or redirect (RFC 5429 2.4)",
                    ));
                }
                let reason = self.expand(frame, reason).into_owned();
                self.push_action(Action::Reject {
                    reason,
                    extended: *extended,
                })?;
                self.implicit_keep = false;
            }
            Cmd::Vacation(v) => {
                if self
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::Reject { .. }))
                {
                    return Err(err(
                        "vacation cannot be combined with reject (RFC 5429 2.4)",
                    ));
                }
                self.vacations += 1;
                if self.vacations > self.limits.vacation_max {
                    return Err(err(format!(
                        "more than {} vacation actions (sieve_vacation_max)",
                        self.limits.vacation_max
                    )));
                }
                let subject = v
                    .subject
                    .as_ref()
                    .map(|s| self.expand(frame, s).into_owned());
                let from = v.from.as_ref().map(|s| self.expand(frame, s).into_owned());
                let reason = self.expand(frame, &v.reason).into_owned();
                let addresses = self.expand_list(frame, &v.addresses);
                // RFC 5230 4.2: without :handle, one derived from :subject, :from, :mime
                // and the reason.
                let handle = match &v.handle {
                    Some(h) => self.expand(frame, h).into_owned(),
                    None => format!(
                        "vacation-{:016x}",
                        fnv1a(&[
                            subject.as_deref().unwrap_or("").as_bytes(),
                            from.as_deref().unwrap_or("").as_bytes(),
                            if v.mime { b"1" } else { b"0" },
                            reason.as_bytes(),
                        ])
                    ),
                };
                self.push_action(Action::Vacation(Vacation {
                    period_seconds: v.period_seconds,
                    subject,
                    from,
                    addresses,
                    mime: v.mime,
                    handle,
                    reason,
                }))?;
            }
            Cmd::Set {
                var,
                modifiers,
                value,
            } => {
                let value = self.expand(frame, value).into_owned();
                let value = apply_modifiers(value, modifiers);
                self.set_var(frame, var, value)?;
            }
            Cmd::Flags { op, var, flags } => {
                let given = self.expand_list(frame, flags);
                let current: Vec<String> = match var {
                    None => self.flags.clone(),
                    Some(v) => normalize_flags([self.var(frame, v)]),
                };
                let given = normalize_flags(given.iter().map(String::as_str));
                let new = match op {
                    FlagOp::Set => given,
                    FlagOp::Add => {
                        normalize_flags(current.iter().chain(given.iter()).map(String::as_str))
                    }
                    FlagOp::Remove => current
                        .into_iter()
                        .filter(|f| !given.iter().any(|g| g.eq_ignore_ascii_case(f)))
                        .collect(),
                };
                match var {
                    None => self.flags = new,
                    Some(v) => self.set_var(frame, v, new.join(" "))?,
                }
            }
            Cmd::AddHeader { last, name, value } => {
                let name = self.expand(frame, name).into_owned();
                if !crate::message::valid_field_name(&name) {
                    return Err(err(format!(
                        "addheader: \"{name}\" is not a valid field name"
                    )));
                }
                let value = self.expand(frame, value);
                crate::message::check_field_value(&value, self.limits.header_value_bytes_max)
                    .map_err(|e| err(format!("addheader: {e}")))?;
                let value = encode_header_value(&value);
                self.edit(1)?;
                let field = Field::new(name, format!(" {value}").into_bytes());
                if *last {
                    self.msg.fields.push(field);
                } else {
                    self.msg.fields.insert(0, field);
                }
                self.msg.edited = true;
            }
            Cmd::DeleteHeader {
                index,
                name,
                matcher,
            } => {
                let name = self.expand(frame, name).into_owned();
                if !crate::message::valid_field_name(&name) {
                    return Err(err(format!(
                        "deleteheader: \"{name}\" is not a valid field name"
                    )));
                }
                // RFC 5293 6: Received and Auto-Submitted are never deleted (silently).
                if name.eq_ignore_ascii_case("received")
                    || name.eq_ignore_ascii_case("auto-submitted")
                {
                    return Ok(Flow::Continue);
                }
                let positions: Vec<usize> = self
                    .msg
                    .fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.name.eq_ignore_ascii_case(&name))
                    .map(|(i, _)| i)
                    .collect();
                let positions: Vec<usize> = match index {
                    None => positions,
                    Some(Index { n, last }) => {
                        let n = usize::try_from(*n).unwrap_or(usize::MAX);
                        let at = if *last {
                            positions.len().checked_sub(n)
                        } else {
                            n.checked_sub(1)
                        };
                        at.and_then(|i| positions.get(i).copied())
                            .into_iter()
                            .collect()
                    }
                };
                let mut doomed = Vec::new();
                for i in positions {
                    let keep = match matcher {
                        None => false,
                        Some(m) => {
                            let value = [self.msg.fields[i].decoded().to_string()];
                            !self.match_values(frame, m, &value)?
                        }
                    };
                    if !keep {
                        doomed.push(i);
                    }
                }
                if !doomed.is_empty() {
                    self.edit(doomed.len())?;
                    for i in doomed.into_iter().rev() {
                        self.msg.fields.remove(i);
                    }
                    self.msg.edited = true;
                }
            }
            Cmd::Include {
                location,
                once,
                optional,
                name,
            } => {
                let name = self.expand(frame, name).into_owned();
                let key = (*location, name.clone());
                if *once && self.included_once.contains(&key) {
                    return Ok(Flow::Continue);
                }
                if self.include_stack.contains(&key) {
                    return Err(err(format!(
                        "include: \"{name}\" includes itself (RFC 6609 3.2)"
                    )));
                }
                if self.include_stack.len() >= self.limits.include_depth_max {
                    return Err(err(format!(
                        "includes nested more than {} deep (sieve_include_depth_max)",
                        self.limits.include_depth_max
                    )));
                }
                let script = match self.host.include(*location, &name) {
                    Ok(s) => s,
                    Err(_) if *optional => return Ok(Flow::Continue),
                    Err(e) => return Err(err(format!("include: \"{name}\": {e}"))),
                };
                self.included_once.insert(key.clone());
                self.include_stack.push(key);
                let flow = self.run_script(&script.inner, handler);
                self.include_stack.pop();
                if flow? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
            }
            Cmd::Error(message) => {
                return Err(err(format!("error: {}", self.expand(frame, message))));
            }
            Cmd::Custom(c) => {
                let args = self.custom_values(frame, &c.args);
                let test = match c.tests.first() {
                    Some(t) => Some(self.test(frame, t, handler)?),
                    None => None,
                };
                let flow = {
                    let mut view = RunView { state: self };
                    handler
                        .command(&c.name, &args, test, &mut view)
                        .map_err(err)?
                };
                match flow {
                    HookFlow::Continue => {}
                    HookFlow::Stop => return Ok(Flow::Stop),
                    HookFlow::RunBlock => {
                        if let Some(block) = &c.block {
                            return self.block(frame, block, handler);
                        }
                    }
                }
            }
        }
        Ok(Flow::Continue)
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
