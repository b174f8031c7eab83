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

mod commands;
mod conditions;

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
