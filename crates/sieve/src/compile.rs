//! From the generic tree ([`crate::parser`]) to the typed one ([`crate::ir`]): names of
//! commands, tests and tags resolved; `require` enforced (RFC 5228 3.2: an extension used
//! but not required is an error); arguments checked; constant regexes compiled.

use crate::extension::Extensions;
use crate::ir::*;
use crate::lexer::Pos;
use crate::matching::build_regex;
use crate::parser::{Arg, CommandNode, TestNode};
use crate::strings::{VarScope, compile_string, is_identifier, is_variable_name};
use std::sync::Arc;

use crate::address::valid_address;
use crate::capabilities::EXTENSIONS;
use crate::context::Location;
use crate::error::CompileError;
use crate::lexer;
use crate::limits::Limits;
use crate::message::valid_field_name;
use crate::parser;
use crate::script::{Script, ScriptInner};

/// The deepest nesting accepted whatever `Limits::nesting_max` says.
const NESTING_HARD_MAX: usize = 256;

/// Source to script: tokens, the generic tree, the typed tree.
pub(crate) fn compile_source(
    source: &str,
    limits: &Limits,
    extensions: &Extensions,
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
    let compiled = compile(&nodes, extensions, limits)?;
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

/// What compiling produced besides the tree.
pub(crate) struct Compiled {
    pub(crate) commands: Vec<Cmd>,
    pub(crate) required: Vec<String>,
    pub(crate) locals: usize,
    pub(crate) may_reject: bool,
    pub(crate) may_reply: bool,
}

pub(crate) fn compile(
    nodes: &[CommandNode],
    extensions: &Extensions,
    limits: &Limits,
) -> Result<Compiled, CompileError> {
    let mut c = Compiler {
        required: Vec::new(),
        vars: VarScope::default(),
        extensions,
        may_reject: false,
        may_reply: false,
        header_value_bytes_max: limits.header_value_bytes_max,
    };
    let commands = c.block(nodes, true)?;
    Ok(Compiled {
        commands,
        required: c.required,
        locals: c.vars.locals.len(),
        may_reject: c.may_reject,
        may_reply: c.may_reply,
    })
}

/// Whether `ihave` finds `name`: a capability we have, but never "variables" or
/// "encoded-character", which change how the script's strings are read (RFC 5463 4: "The
/// test MUST fail and the extension MUST NOT be enabled"), even when already required, as
/// Pigeonhole.
fn ihave_allows(name: &str, extensions: &Extensions) -> bool {
    !name.eq_ignore_ascii_case("variables")
        && !name.eq_ignore_ascii_case("encoded-character")
        && supported(name, extensions)
}

/// Whether `name` is a capability this interpreter (or a registered extension) has.
pub(crate) fn supported(name: &str, extensions: &Extensions) -> bool {
    let name = name.to_ascii_lowercase();
    EXTENSIONS.contains(&name.as_str())
        || name == "comparator-i;octet"
        || name == "comparator-i;ascii-casemap"
        || extensions.has_capability(&name)
}

struct Compiler<'e> {
    required: Vec<String>,
    vars: VarScope,
    extensions: &'e Extensions,
    may_reject: bool,
    may_reply: bool,
    /// `Limits::header_value_bytes_max`, for constant addheader values.
    header_value_bytes_max: usize,
}

/// The tagged arguments of a command or test, then its positional ones.
struct Args<'a> {
    items: &'a [Arg],
    at: usize,
    owner: &'a str,
    pos: Pos,
}

impl<'a> Args<'a> {
    fn new(items: &'a [Arg], owner: &'a str, pos: Pos) -> Args<'a> {
        Args {
            items,
            at: 0,
            owner,
            pos,
        }
    }

    /// The next tag, if the next argument is one.
    fn tag(&mut self) -> Option<(&'a str, Pos)> {
        match self.items.get(self.at) {
            Some(Arg::Tag(t, p)) => {
                self.at += 1;
                Some((t.as_str(), *p))
            }
            _ => None,
        }
    }

    fn number(&mut self, what: &str) -> Result<u64, CompileError> {
        match self.items.get(self.at) {
            Some(Arg::Number(n, _)) => {
                self.at += 1;
                Ok(*n)
            }
            Some(a) => Err(a
                .pos()
                .error(format!("{}: {what} must be a number", self.owner))),
            None => Err(self
                .end_pos()
                .error(format!("{}: missing {what} (a number)", self.owner))),
        }
    }

    fn strings(&mut self, what: &str) -> Result<&'a [(String, Pos)], CompileError> {
        match self.items.get(self.at) {
            Some(Arg::Strings { values, .. }) => {
                self.at += 1;
                Ok(values)
            }
            Some(a) => Err(a
                .pos()
                .error(format!("{}: {what} must be a string list", self.owner))),
            None => Err(self
                .end_pos()
                .error(format!("{}: missing {what}", self.owner))),
        }
    }

    fn string(&mut self, what: &str) -> Result<(&'a str, Pos), CompileError> {
        match self.items.get(self.at) {
            Some(Arg::Strings { values, list, pos }) if values.len() == 1 && !*list => {
                self.at += 1;
                Ok((values[0].0.as_str(), *pos))
            }
            Some(Arg::Strings { values, pos, .. }) if values.len() == 1 => {
                self.at += 1;
                Ok((values[0].0.as_str(), *pos))
            }
            Some(a) => Err(a
                .pos()
                .error(format!("{}: {what} must be a single string", self.owner))),
            None => Err(self
                .end_pos()
                .error(format!("{}: missing {what} (a string)", self.owner))),
        }
    }

    fn remaining(&self) -> usize {
        self.items.len() - self.at
    }

    fn end_pos(&self) -> Pos {
        self.items.last().map_or(self.pos, Arg::pos)
    }

    /// No argument may be left.
    fn done(&self) -> Result<(), CompileError> {
        match self.items.get(self.at) {
            None => Ok(()),
            Some(Arg::Tag(t, p)) => Err(p.error(format!("{}: unexpected tag :{t}", self.owner))),
            Some(a) => Err(a.pos().error(format!("{}: too many arguments", self.owner))),
        }
    }
}

/// The comparator and match type tags while they are being read.
#[derive(Default)]
struct MatchSpec {
    match_type: Option<MatchType>,
    comparator: Option<Comparator>,
}

impl Compiler<'_> {
    fn has(&self, ext: &str) -> bool {
        self.required.iter().any(|r| r == ext)
    }

    fn need(&self, ext: &str, pos: Pos, what: &str) -> Result<(), CompileError> {
        if self.has(ext) {
            Ok(())
        } else {
            Err(pos.error(format!("{what} requires \"{ext}\" in require")))
        }
    }

    fn string(&mut self, s: &str, pos: Pos) -> Result<Str, CompileError> {
        let encoded = self.has("encoded-character");
        let vars = if self.has("variables") {
            self.vars.include = self.has("include");
            Some(&mut self.vars)
        } else {
            None
        };
        compile_string(s, encoded, vars, pos)
    }

    fn string_list(&mut self, values: &[(String, Pos)]) -> Result<Vec<Str>, CompileError> {
        values.iter().map(|(s, p)| self.string(s, *p)).collect()
    }

    fn block(&mut self, nodes: &[CommandNode], top: bool) -> Result<Vec<Cmd>, CompileError> {
        let mut out = Vec::with_capacity(nodes.len());
        let mut requires_allowed = top;
        let mut i = 0;
        while i < nodes.len() {
            let node = &nodes[i];
            if node.name == "require" {
                if !requires_allowed {
                    return Err(node
                        .pos
                        .error("require must come before any other command (RFC 5228 3.2)"));
                }
                self.require(node)?;
                i += 1;
                continue;
            }
            requires_allowed = false;
            if node.name == "if" {
                let mut branches = Vec::new();
                let mut otherwise = None;
                branches.push(self.branch(node)?);
                i += 1;
                while i < nodes.len() {
                    match nodes[i].name.as_str() {
                        "elsif" => {
                            branches.push(self.branch(&nodes[i])?);
                            i += 1;
                        }
                        "else" => {
                            let n = &nodes[i];
                            Args::new(&n.args, "else", n.pos).done()?;
                            if !n.tests.is_empty() {
                                return Err(n.pos.error("else takes no test"));
                            }
                            let Some(block) = &n.block else {
                                return Err(n.pos.error("else needs a block"));
                            };
                            otherwise = Some(self.block(block, false)?);
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                }
                out.push(Cmd::If(branches, otherwise));
                continue;
            }
            if node.name == "elsif" || node.name == "else" {
                return Err(node
                    .pos
                    .error(format!("{} without a preceding if", node.name)));
            }
            if let Some(cmd) = self.command(node)? {
                out.push(cmd);
            }
            i += 1;
        }
        Ok(out)
    }

    fn require(&mut self, node: &CommandNode) -> Result<(), CompileError> {
        let mut args = Args::new(&node.args, "require", node.pos);
        let names = args.strings("the capability list")?;
        args.done()?;
        if !node.tests.is_empty() || node.block.is_some() {
            return Err(node
                .pos
                .error("require takes a string list and ends with ';'"));
        }
        for (name, pos) in names {
            let lower = name.to_ascii_lowercase();
            if !supported(&lower, self.extensions) {
                return Err(pos.error(format!("unsupported extension \"{name}\"")));
            }
            self.add_required(&lower);
        }
        Ok(())
    }

    fn add_required(&mut self, lower: &str) {
        if !self.has(lower) {
            self.required.push(lower.to_string());
        }
        // spamtestplus includes spamtest (RFC 5235 3.2); vacation-seconds vacation
        // (RFC 6131 2: requiring it implies vacation).
        for implied in match lower {
            "spamtestplus" => &["spamtest"][..],
            "vacation-seconds" => &["vacation"][..],
            _ => &[][..],
        } {
            if !self.has(implied) {
                self.required.push((*implied).to_string());
            }
        }
    }

    /// An if or elsif: its test and block. A block guarded directly by `ihave` sees the
    /// extensions it names as required, and is not compiled at all when one is missing
    /// (RFC 5463 4).
    fn branch(&mut self, node: &CommandNode) -> Result<(Test, Vec<Cmd>), CompileError> {
        Args::new(&node.args, &node.name, node.pos).done()?;
        if node.tests.len() != 1 {
            return Err(node
                .pos
                .error(format!("{} needs exactly one test", node.name)));
        }
        let Some(block) = &node.block else {
            return Err(node.pos.error(format!("{} needs a block", node.name)));
        };
        let t = &node.tests[0];
        if t.name == "ihave" {
            self.need("ihave", t.pos, "ihave")?;
            let mut args = Args::new(&t.args, "ihave", t.pos);
            let names = args.strings("the capability list")?;
            args.done()?;
            if !names.iter().all(|(n, _)| ihave_allows(n, self.extensions)) {
                return Ok((Test::False, Vec::new()));
            }
            let saved = self.required.clone();
            for (n, _) in names {
                self.add_required(&n.to_ascii_lowercase());
            }
            let compiled = self.block(block, false);
            self.required = saved;
            return Ok((Test::True, compiled?));
        }
        let test = self.test(t)?;
        Ok((test, self.block(block, false)?))
    }

    fn no_block(&self, node: &CommandNode) -> Result<(), CompileError> {
        if !node.tests.is_empty() {
            return Err(node.tests[0]
                .pos
                .error(format!("{} takes no test", node.name)));
        }
        if node.block.is_some() {
            return Err(node.pos.error(format!("{} takes no block", node.name)));
        }
        Ok(())
    }

    fn command(&mut self, node: &CommandNode) -> Result<Option<Cmd>, CompileError> {
        let name = node.name.as_str();
        if let Some(ext) = self.extensions.command_capability(name) {
            return self.custom_command(node, ext).map(Some);
        }
        let mut args = Args::new(&node.args, name, node.pos);
        self.no_block(node)?;
        let cmd = match name {
            "stop" => Cmd::Stop,
            "keep" => {
                let mut flags = None;
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "flags" => {
                            self.need("imap4flags", pos, ":flags")?;
                            let v = args.strings("the flag list")?;
                            flags = Some(self.string_list(v)?);
                        }
                        _ => return Err(pos.error(format!("keep: unknown tag :{tag}"))),
                    }
                }
                Cmd::Keep { flags }
            }
            "discard" => Cmd::Discard,
            "fileinto" => {
                self.need("fileinto", node.pos, "fileinto")?;
                let (mut flags, mut copy, mut create) = (None, false, false);
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "flags" => {
                            self.need("imap4flags", pos, ":flags")?;
                            let v = args.strings("the flag list")?;
                            flags = Some(self.string_list(v)?);
                        }
                        "copy" => {
                            self.need("copy", pos, ":copy")?;
                            copy = true;
                        }
                        "create" => {
                            self.need("mailbox", pos, ":create")?;
                            create = true;
                        }
                        _ => return Err(pos.error(format!("fileinto: unknown tag :{tag}"))),
                    }
                }
                let (s, pos) = args.string("the mailbox")?;
                let mailbox = self.string(s, pos)?;
                Cmd::FileInto {
                    mailbox,
                    flags,
                    copy,
                    create,
                }
            }
            "redirect" => {
                let mut copy = false;
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "copy" => {
                            self.need("copy", pos, ":copy")?;
                            copy = true;
                        }
                        _ => return Err(pos.error(format!("redirect: unknown tag :{tag}"))),
                    }
                }
                let (s, pos) = args.string("the address")?;
                let templated = self.has("variables") && s.contains("${");
                if !templated && !valid_address(s) {
                    return Err(pos.error(format!("redirect: \"{s}\" is not a valid address")));
                }
                let address = self.string(s, pos)?;
                Cmd::Redirect { address, copy }
            }
            "reject" | "ereject" => {
                self.need(name, node.pos, name)?;
                let (s, pos) = args.string("the reason")?;
                let reason = self.string(s, pos)?;
                self.may_reject = true;
                Cmd::Reject {
                    reason,
                    extended: name == "ereject",
                }
            }
            "vacation" => {
                self.need("vacation", node.pos, "vacation")?;
                self.may_reply = true;
                Cmd::Vacation(Box::new(self.vacation(&mut args)?))
            }
            "set" => {
                self.need("variables", node.pos, "set")?;
                let mut modifiers: Vec<Modifier> = Vec::new();
                while let Some((tag, pos)) = args.tag() {
                    let m = match tag {
                        "lower" => Modifier::Lower,
                        "upper" => Modifier::Upper,
                        "lowerfirst" => Modifier::LowerFirst,
                        "upperfirst" => Modifier::UpperFirst,
                        "quotewildcard" => Modifier::QuoteWildcard,
                        "length" => Modifier::Length,
                        "encodeurl" => Modifier::EncodeUrl,
                        "quoteregex" => {
                            self.need("regex", pos, ":quoteregex")?;
                            Modifier::QuoteRegex
                        }
                        _ => return Err(pos.error(format!("set: unknown modifier :{tag}"))),
                    };
                    if modifiers.iter().any(|o| o.precedence() == m.precedence()) {
                        return Err(pos.error(format!(
                            "set: :{tag} cannot be combined with a modifier of the same precedence (RFC 5229 4.1)"
                        )));
                    }
                    modifiers.push(m);
                }
                modifiers.sort_by_key(|m| std::cmp::Reverse(m.precedence()));
                let (n, npos) = args.string("the variable name")?;
                let var = self.variable_name(n, npos)?;
                let (v, vpos) = args.string("the value")?;
                let value = self.string(v, vpos)?;
                Cmd::Set {
                    var,
                    modifiers,
                    value,
                }
            }
            "setflag" | "addflag" | "removeflag" => {
                self.need("imap4flags", node.pos, name)?;
                let op = match name {
                    "setflag" => FlagOp::Set,
                    "addflag" => FlagOp::Add,
                    _ => FlagOp::Remove,
                };
                let var = if args.remaining() == 2 {
                    let (n, npos) = args.string("the variable name")?;
                    Some(self.variable_name(n, npos)?)
                } else {
                    None
                };
                let v = args.strings("the flag list")?;
                let flags = self.string_list(v)?;
                Cmd::Flags { op, var, flags }
            }
            "addheader" => {
                self.need("editheader", node.pos, "addheader")?;
                let mut last = false;
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "last" => last = true,
                        _ => return Err(pos.error(format!("addheader: unknown tag :{tag}"))),
                    }
                }
                let (n, npos) = args.string("the field name")?;
                let name_str = self.string(n, npos)?;
                if let Some(c) = name_str.as_const()
                    && !valid_field_name(c)
                {
                    return Err(npos.error(format!("addheader: \"{c}\" is not a valid field name")));
                }
                let (v, vpos) = args.string("the value")?;
                let value = self.string(v, vpos)?;
                if let Some(c) = value.as_const()
                    && let Err(e) =
                        crate::message::check_field_value(c, self.header_value_bytes_max)
                {
                    return Err(vpos.error(format!("addheader: {e}")));
                }
                Cmd::AddHeader {
                    last,
                    name: name_str,
                    value,
                }
            }
            "deleteheader" => {
                self.need("editheader", node.pos, "deleteheader")?;
                let mut spec = MatchSpec::default();
                let mut index: Option<u64> = None;
                let mut last = false;
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        // RFC 5293 5: :index is editheader's own here.
                        "index" => {
                            let n = args.number("the index")?;
                            if n == 0 {
                                return Err(pos.error(":index must be 1 or more"));
                            }
                            index = Some(n);
                        }
                        "last" => last = true,
                        _ => {
                            if !self.match_tag(&mut spec, tag, pos, &mut args)? {
                                return Err(pos.error(format!("deleteheader: unknown tag :{tag}")));
                            }
                        }
                    }
                }
                if last && index.is_none() {
                    return Err(node
                        .pos
                        .error("deleteheader: :last requires :index (RFC 5293 5)"));
                }
                let (n, npos) = args.string("the field name")?;
                let name_str = self.string(n, npos)?;
                if let Some(c) = name_str.as_const()
                    && !valid_field_name(c)
                {
                    return Err(
                        npos.error(format!("deleteheader: \"{c}\" is not a valid field name"))
                    );
                }
                let matcher = if args.remaining() > 0 {
                    let v = args.strings("the value patterns")?;
                    Some(self.matcher(spec, v, Comparator::AsciiCasemap)?)
                } else {
                    if spec.match_type.is_some() || spec.comparator.is_some() {
                        return Err(node.pos.error(
                            "deleteheader: a match type or comparator needs value patterns",
                        ));
                    }
                    None
                };
                Cmd::DeleteHeader {
                    index: index.map(|n| Index { n, last }),
                    name: name_str,
                    matcher,
                }
            }
            "include" => {
                self.need("include", node.pos, "include")?;
                let (mut location, mut once, mut optional) = (None, false, false);
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "personal" | "global" => {
                            if location.is_some() {
                                return Err(pos.error("include: only one of :personal and :global"));
                            }
                            location = Some(if tag == "global" {
                                Location::Global
                            } else {
                                Location::Personal
                            });
                        }
                        "once" => once = true,
                        "optional" => optional = true,
                        _ => return Err(pos.error(format!("include: unknown tag :{tag}"))),
                    }
                }
                let (s, pos) = args.string("the script name")?;
                if s.is_empty() || s.contains('/') || s.chars().any(char::is_control) {
                    return Err(pos.error(format!("include: \"{s}\" is not a valid script name")));
                }
                Cmd::Include {
                    location: location.unwrap_or(Location::Personal),
                    once,
                    optional,
                    name: Str::Const(s.to_string()),
                }
            }
            "return" => {
                self.need("include", node.pos, "return")?;
                Cmd::Return
            }
            "global" => {
                self.need("include", node.pos, "global")?;
                self.need("variables", node.pos, "global")?;
                let names = args.strings("the variable names")?;
                for (n, pos) in names {
                    if !is_identifier(n) {
                        return Err(
                            pos.error(format!("global: \"{n}\" is not a valid variable name"))
                        );
                    }
                    let lower = n.to_ascii_lowercase();
                    if !self.vars.globals.contains(&lower) {
                        self.vars.globals.push(lower);
                    }
                }
                args.done()?;
                return Ok(None);
            }
            "error" => {
                self.need("ihave", node.pos, "error")?;
                let (s, pos) = args.string("the message")?;
                Cmd::Error(self.string(s, pos)?)
            }
            _ => {
                return Err(node.pos.error(format!("unknown command \"{name}\"")));
            }
        };
        args.done()?;
        Ok(Some(cmd))
    }

    fn variable_name(&mut self, n: &str, pos: Pos) -> Result<VarRef, CompileError> {
        if !is_variable_name(n) {
            return Err(pos.error(format!("\"{n}\" is not a valid variable name")));
        }
        self.vars.include = self.has("include");
        self.vars.resolve(n, pos)
    }

    fn index_number(&self, args: &mut Args<'_>, pos: Pos) -> Result<u64, CompileError> {
        self.need("index", pos, ":index")?;
        let n = args.number("the index")?;
        if n == 0 {
            return Err(pos.error(":index must be 1 or more (RFC 5260 6)"));
        }
        Ok(n)
    }

    fn vacation(&mut self, args: &mut Args<'_>) -> Result<VacationCmd, CompileError> {
        const DAY: u64 = 86_400;
        let mut period: Option<u64> = None;
        let mut v = VacationCmd {
            period_seconds: 7 * DAY,
            subject: None,
            from: None,
            addresses: Vec::new(),
            mime: false,
            handle: None,
            reason: Str::Const(String::new()),
        };
        while let Some((tag, pos)) = args.tag() {
            match tag {
                // RFC 5230 4.1: at least a day; we cap at 90.
                "days" => {
                    if period.is_some() {
                        return Err(pos.error("vacation: only one of :days and :seconds"));
                    }
                    period = Some(args.number("the days")?.clamp(1, 90) * DAY);
                }
                // RFC 6131 2: 0 is allowed (reply every time); same cap.
                "seconds" => {
                    self.need("vacation-seconds", pos, ":seconds")?;
                    if period.is_some() {
                        return Err(pos.error("vacation: only one of :days and :seconds"));
                    }
                    period = Some(args.number("the seconds")?.min(90 * DAY));
                }
                "subject" => {
                    let (s, p) = args.string("the subject")?;
                    v.subject = Some(self.string(s, p)?);
                }
                "from" => {
                    let (s, p) = args.string("the from address")?;
                    v.from = Some(self.string(s, p)?);
                }
                "addresses" => {
                    let list = args.strings("the addresses")?;
                    v.addresses = self.string_list(list)?;
                }
                "mime" => v.mime = true,
                "handle" => {
                    let (s, p) = args.string("the handle")?;
                    v.handle = Some(self.string(s, p)?);
                }
                _ => return Err(pos.error(format!("vacation: unknown tag :{tag}"))),
            }
        }
        if let Some(p) = period {
            v.period_seconds = p;
        }
        let (s, p) = args.string("the reason")?;
        v.reason = self.string(s, p)?;
        Ok(v)
    }

    /// Reads a comparator or match-type tag into `spec`; false if `tag` is neither.
    fn match_tag(
        &self,
        spec: &mut MatchSpec,
        tag: &str,
        pos: Pos,
        args: &mut Args<'_>,
    ) -> Result<bool, CompileError> {
        let mt = match tag {
            "comparator" => {
                if spec.comparator.is_some() {
                    return Err(pos.error("only one :comparator"));
                }
                let (name, npos) = args.string("the comparator name")?;
                spec.comparator = Some(match name.to_ascii_lowercase().as_str() {
                    "i;octet" => Comparator::Octet,
                    "i;ascii-casemap" => Comparator::AsciiCasemap,
                    "i;ascii-numeric" => {
                        self.need(
                            "comparator-i;ascii-numeric",
                            npos,
                            "the comparator i;ascii-numeric",
                        )?;
                        Comparator::AsciiNumeric
                    }
                    _ => return Err(npos.error(format!("unknown comparator \"{name}\""))),
                });
                return Ok(true);
            }
            "is" => MatchType::Is,
            "contains" => MatchType::Contains,
            "matches" => MatchType::Matches,
            "regex" => {
                self.need("regex", pos, ":regex")?;
                MatchType::Regex
            }
            "value" | "count" => {
                self.need("relational", pos, &format!(":{tag}"))?;
                let (rel, rpos) = args.string("the relational operator")?;
                let r = match rel.to_ascii_lowercase().as_str() {
                    "gt" => Relation::Gt,
                    "ge" => Relation::Ge,
                    "lt" => Relation::Lt,
                    "le" => Relation::Le,
                    "eq" => Relation::Eq,
                    "ne" => Relation::Ne,
                    _ => return Err(rpos.error(format!("unknown relational operator \"{rel}\""))),
                };
                if tag == "value" {
                    MatchType::Value(r)
                } else {
                    MatchType::Count(r)
                }
            }
            _ => return Ok(false),
        };
        if spec.match_type.is_some() {
            return Err(pos.error("only one match type"));
        }
        spec.match_type = Some(mt);
        Ok(true)
    }

    fn matcher(
        &mut self,
        spec: MatchSpec,
        keys: &[(String, Pos)],
        default_comparator: Comparator,
    ) -> Result<Matcher, CompileError> {
        let match_type = spec.match_type.unwrap_or(MatchType::Is);
        let comparator = spec.comparator.unwrap_or(default_comparator);
        if comparator == Comparator::AsciiNumeric
            && matches!(
                match_type,
                MatchType::Contains | MatchType::Matches | MatchType::Regex
            )
        {
            let pos = keys.first().map(|(_, p)| *p).unwrap_or_default();
            return Err(pos.error("the comparator i;ascii-numeric cannot do substring or pattern matches (RFC 4790 9.1)"));
        }
        let mut out = Vec::with_capacity(keys.len());
        for (k, pos) in keys {
            let s = self.string(k, *pos)?;
            let regex = match (match_type, s.as_const()) {
                (MatchType::Regex, Some(c)) => {
                    Some(build_regex(c, comparator).map_err(|e| pos.error(e))?)
                }
                _ => None,
            };
            out.push(Key { s, regex });
        }
        Ok(Matcher {
            match_type,
            comparator,
            keys: out,
        })
    }

    fn test(&mut self, node: &TestNode) -> Result<Test, CompileError> {
        let name = node.name.as_str();
        if let Some(ext) = self.extensions.test_capability(name) {
            return self.custom_test(node, ext);
        }
        let mut args = Args::new(&node.args, name, node.pos);
        match name {
            "allof" | "anyof" => {
                args.done()?;
                if !node.test_list || node.tests.is_empty() {
                    return Err(node
                        .pos
                        .error(format!("{name} needs a test list in parentheses")));
                }
                let tests = node
                    .tests
                    .iter()
                    .map(|t| self.test(t))
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(if name == "allof" {
                    Test::AllOf(tests)
                } else {
                    Test::AnyOf(tests)
                });
            }
            "not" => {
                args.done()?;
                if node.tests.len() != 1 || node.test_list {
                    return Err(node.pos.error("not needs exactly one test"));
                }
                return Ok(Test::Not(Box::new(self.test(&node.tests[0])?)));
            }
            _ => {}
        }
        if !node.tests.is_empty() {
            return Err(node.tests[0]
                .pos
                .error(format!("{name} takes no nested test")));
        }
        let test = match name {
            "true" => Test::True,
            "false" => Test::False,
            "exists" => {
                let v = args.strings("the header names")?;
                Test::Exists(self.string_list(v)?)
            }
            "size" => {
                let (tag, pos) = args
                    .tag()
                    .ok_or_else(|| node.pos.error("size needs :over or :under"))?;
                let over = match tag {
                    "over" => true,
                    "under" => false,
                    _ => return Err(pos.error(format!("size: unknown tag :{tag}"))),
                };
                let limit = args.number("the size")?;
                Test::Size { over, limit }
            }
            "header" | "address" | "envelope" | "string" | "hasflag" | "body" | "date"
            | "currentdate" | "environment" | "spamtest" | "virustest" => {
                self.match_test(node, &mut args)?
            }
            "mailboxexists" => {
                self.need("mailbox", node.pos, "mailboxexists")?;
                let v = args.strings("the mailbox names")?;
                Test::MailboxExists(self.string_list(v)?)
            }
            "duplicate" => {
                self.need("duplicate", node.pos, "duplicate")?;
                let mut d = Duplicate {
                    handle: None,
                    header: None,
                    unique_id: None,
                    seconds: None,
                    last: false,
                };
                while let Some((tag, pos)) = args.tag() {
                    match tag {
                        "handle" => {
                            let (s, p) = args.string("the handle")?;
                            d.handle = Some(self.string(s, p)?);
                        }
                        "header" | "uniqueid" => {
                            if d.header.is_some() || d.unique_id.is_some() {
                                return Err(pos.error(
                                    "duplicate: only one of :header and :uniqueid (RFC 7352 3.1)",
                                ));
                            }
                            let (s, p) = args.string("the value")?;
                            let v = self.string(s, p)?;
                            if tag == "header" {
                                d.header = Some(v);
                            } else {
                                d.unique_id = Some(v);
                            }
                        }
                        "seconds" => d.seconds = Some(args.number("the seconds")?),
                        "last" => d.last = true,
                        _ => return Err(pos.error(format!("duplicate: unknown tag :{tag}"))),
                    }
                }
                Test::Duplicate(Box::new(d))
            }
            "ihave" => {
                self.need("ihave", node.pos, "ihave")?;
                let names = args.strings("the capability list")?;
                if names.iter().all(|(n, _)| ihave_allows(n, self.extensions)) {
                    Test::True
                } else {
                    Test::False
                }
            }
            "valid_ext_list" => {
                return Err(node.pos.error("unknown test \"valid_ext_list\""));
            }
            _ => return Err(node.pos.error(format!("unknown test \"{name}\""))),
        };
        args.done()?;
        Ok(test)
    }

    /// The tests that take a comparator and a match type.
    fn match_test(&mut self, node: &TestNode, args: &mut Args<'_>) -> Result<Test, CompileError> {
        let name = node.name.as_str();
        match name {
            "envelope" => self.need("envelope", node.pos, "envelope")?,
            "string" => self.need("variables", node.pos, "string")?,
            "hasflag" => self.need("imap4flags", node.pos, "hasflag")?,
            "body" => self.need("body", node.pos, "body")?,
            "date" | "currentdate" => self.need("date", node.pos, name)?,
            "environment" => self.need("environment", node.pos, "environment")?,
            "spamtest" => self.need("spamtest", node.pos, "spamtest")?,
            "virustest" => self.need("virustest", node.pos, "virustest")?,
            _ => {}
        }
        let mut spec = MatchSpec::default();
        let mut part: Option<AddressPart> = None;
        let mut index: Option<u64> = None;
        let mut last = false;
        let mut zone: Option<Zone> = None;
        let mut percent = false;
        let mut transform: Option<BodyTransform> = None;
        let addressy = matches!(name, "address" | "envelope");
        while let Some((tag, pos)) = args.tag() {
            if self.match_tag(&mut spec, tag, pos, args)? {
                continue;
            }
            match tag {
                "all" | "localpart" | "domain" | "user" | "detail" if addressy => {
                    if part.is_some() {
                        return Err(pos.error("only one address part"));
                    }
                    if matches!(tag, "user" | "detail") {
                        self.need("subaddress", pos, &format!(":{tag}"))?;
                    }
                    part = Some(match tag {
                        "all" => AddressPart::All,
                        "localpart" => AddressPart::LocalPart,
                        "domain" => AddressPart::Domain,
                        "user" => AddressPart::User,
                        _ => AddressPart::Detail,
                    });
                }
                "index" if matches!(name, "header" | "address" | "date") => {
                    index = Some(self.index_number(args, pos)?);
                }
                "last" if matches!(name, "header" | "address" | "date") => {
                    self.need("index", pos, ":last")?;
                    last = true;
                }
                "zone" if matches!(name, "date" | "currentdate") => {
                    if zone.is_some() {
                        return Err(pos.error("only one of :zone and :originalzone"));
                    }
                    let (s, p) = args.string("the zone")?;
                    let z = self.string(s, p)?;
                    if let Some(c) = z.as_const()
                        && crate::date::parse_zone(c).is_none()
                    {
                        return Err(p.error(format!("\"{c}\" is not a zone (+hhmm or -hhmm)")));
                    }
                    zone = Some(Zone::Given(z));
                }
                "originalzone" if name == "date" => {
                    if zone.is_some() {
                        return Err(pos.error("only one of :zone and :originalzone"));
                    }
                    zone = Some(Zone::Original);
                }
                "percent" if name == "spamtest" => {
                    self.need("spamtestplus", pos, ":percent")?;
                    percent = true;
                }
                "raw" | "text" | "content" if name == "body" => {
                    if transform.is_some() {
                        return Err(pos.error("only one body transform"));
                    }
                    transform = Some(match tag {
                        "raw" => BodyTransform::Raw,
                        "text" => BodyTransform::Text,
                        _ => {
                            let v = args.strings("the content types")?;
                            BodyTransform::Content(self.string_list(v)?)
                        }
                    });
                }
                _ => return Err(pos.error(format!("{name}: unknown tag :{tag}"))),
            }
        }
        if last && index.is_none() {
            return Err(node
                .pos
                .error(format!("{name}: :last requires :index (RFC 5260 6)")));
        }
        let index = index.map(|n| Index { n, last });
        // Every test, spamtest and virustest included, defaults to i;ascii-casemap (RFC
        // 5228 2.7.3): RFC 5235 3.2/3.3 name no other default (RFC 3685's i;ascii-numeric
        // was dropped), so `spamtest :matches "*"` is valid, as in Pigeonhole.
        let default_cmp = Comparator::AsciiCasemap;
        let part = part.unwrap_or(AddressPart::All);
        let zone = zone.unwrap_or(Zone::Local);
        Ok(match name {
            "header" | "address" => {
                let v = args.strings("the header names")?;
                let names = self.string_list(v)?;
                let keys = args.strings("the keys")?;
                let matcher = self.matcher(spec, keys, default_cmp)?;
                if name == "header" {
                    Test::Header {
                        names,
                        index,
                        matcher,
                    }
                } else {
                    Test::Address {
                        names,
                        part,
                        index,
                        matcher,
                    }
                }
            }
            "envelope" => {
                let v = args.strings("the envelope parts")?;
                for (p, ppos) in v {
                    if !p.contains("${")
                        && !matches!(
                            p.to_ascii_lowercase().as_str(),
                            "from" | "to" | "orig_to" | "auth"
                        )
                    {
                        return Err(ppos.error(format!("envelope: unknown envelope part \"{p}\"")));
                    }
                }
                let parts = self.string_list(v)?;
                let keys = args.strings("the keys")?;
                let matcher = self.matcher(spec, keys, default_cmp)?;
                Test::Envelope {
                    parts,
                    part,
                    matcher,
                }
            }
            "string" => {
                let v = args.strings("the source strings")?;
                let sources = self.string_list(v)?;
                let keys = args.strings("the keys")?;
                Test::String {
                    sources,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "hasflag" => {
                let mut variables = Vec::new();
                if args.remaining() == 2 {
                    for (n, p) in args.strings("the variable names")? {
                        variables.push(self.variable_name(n, *p)?);
                    }
                }
                let keys = args.strings("the flags")?;
                Test::HasFlag {
                    variables,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "body" => {
                let keys = args.strings("the keys")?;
                Test::Body {
                    transform: transform.unwrap_or(BodyTransform::Text),
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "date" => {
                let (h, hp) = args.string("the header name")?;
                let header = self.string(h, hp)?;
                let part = self.date_part(args)?;
                let keys = args.strings("the keys")?;
                Test::Date {
                    zone,
                    header,
                    part,
                    index,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "currentdate" => {
                let part = self.date_part(args)?;
                let keys = args.strings("the keys")?;
                Test::CurrentDate {
                    zone,
                    part,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "environment" => {
                let (n, np) = args.string("the item name")?;
                let name = self.string(n, np)?;
                let keys = args.strings("the keys")?;
                Test::Environment {
                    name,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            "spamtest" => {
                let keys = args.strings("the value")?;
                Test::Spam {
                    percent,
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
            _ => {
                let keys = args.strings("the value")?;
                Test::Virus {
                    matcher: self.matcher(spec, keys, default_cmp)?,
                }
            }
        })
    }

    fn date_part(&mut self, args: &mut Args<'_>) -> Result<Str, CompileError> {
        let (s, p) = args.string("the date part")?;
        let part = self.string(s, p)?;
        if let Some(c) = part.as_const()
            && crate::date::date_part(crate::date::Moment { utc: 0, zone: 0 }, c).is_none()
        {
            return Err(p.error(format!("unknown date part \"{c}\" (RFC 5260 4.2)")));
        }
        Ok(part)
    }

    fn custom_args(&mut self, args: &[Arg]) -> Result<Vec<CustomArg>, CompileError> {
        args.iter()
            .map(|a| {
                Ok(match a {
                    Arg::Tag(t, _) => CustomArg::Tag(t.clone()),
                    Arg::Number(n, _) => CustomArg::Number(*n),
                    Arg::Strings { values, .. } => CustomArg::Strings(self.string_list(values)?),
                })
            })
            .collect()
    }

    fn custom_command(&mut self, node: &CommandNode, ext: &str) -> Result<Cmd, CompileError> {
        let ext = ext.to_string();
        self.need(&ext, node.pos, &node.name)?;
        let args = self.custom_args(&node.args)?;
        let tests = node
            .tests
            .iter()
            .map(|t| self.test(t))
            .collect::<Result<Vec<_>, _>>()?;
        let block = match &node.block {
            Some(b) => Some(self.block(b, false)?),
            None => None,
        };
        Ok(Cmd::Custom(Box::new(Custom {
            name: node.name.clone(),
            args,
            tests,
            block,
        })))
    }

    fn custom_test(&mut self, node: &TestNode, ext: &str) -> Result<Test, CompileError> {
        let ext = ext.to_string();
        self.need(&ext, node.pos, &node.name)?;
        let args = self.custom_args(&node.args)?;
        let tests = node
            .tests
            .iter()
            .map(|t| self.test(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Test::Custom(Box::new(Custom {
            name: node.name.clone(),
            args,
            tests,
            block: None,
        })))
    }
}
