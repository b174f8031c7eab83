//! The grammar (RFC 5228 8.2) into a generic tree: commands with their arguments, tests
//! and blocks, before any meaning is given to names (that is [`crate::compile`]'s).

use crate::error::CompileError;
use crate::lexer::{Pos, Tok};

/// An argument (RFC 5228 2.6): a tag, a number, or a string list (a single string is
/// a list of one; `list` says whether it was written with brackets).
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Tag(String, Pos),
    Number(u64, Pos),
    Strings {
        values: Vec<(String, Pos)>,
        list: bool,
        pos: Pos,
    },
}

impl Arg {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Arg::Tag(_, p) | Arg::Number(_, p) => *p,
            Arg::Strings { pos, .. } => *pos,
        }
    }
}

/// A test: identifier, arguments, and the tests of a test list (allof, anyof, not).
#[derive(Debug, Clone)]
pub(crate) struct TestNode {
    pub(crate) name: String,
    pub(crate) pos: Pos,
    pub(crate) args: Vec<Arg>,
    pub(crate) tests: Vec<TestNode>,
    /// Whether the tests were written as a parenthesised list.
    pub(crate) test_list: bool,
}

/// A command: identifier, arguments, tests, and a block or `;`.
#[derive(Debug, Clone)]
pub(crate) struct CommandNode {
    pub(crate) name: String,
    pub(crate) pos: Pos,
    pub(crate) args: Vec<Arg>,
    pub(crate) tests: Vec<TestNode>,
    pub(crate) block: Option<Vec<CommandNode>>,
}

/// Parses the tokens; `nesting_max` bounds blocks and tests nested in one another, so a
/// hostile script cannot overflow the stack.
pub(crate) fn parse(
    tokens: &[(Tok, Pos)],
    nesting_max: usize,
) -> Result<Vec<CommandNode>, CompileError> {
    let mut p = Parser {
        tokens,
        at: 0,
        nesting_max,
    };
    let mut commands = Vec::new();
    while p.at < tokens.len() {
        commands.push(p.command(0)?);
    }
    Ok(commands)
}

struct Parser<'a> {
    tokens: &'a [(Tok, Pos)],
    at: usize,
    nesting_max: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn pos(&self) -> Pos {
        match self.tokens.get(self.at) {
            Some((_, p)) => *p,
            None => self
                .tokens
                .last()
                .map(|(_, p)| *p)
                .unwrap_or(Pos { line: 1, column: 1 }),
        }
    }

    fn depth_check(&self, depth: usize) -> Result<(), CompileError> {
        if depth > self.nesting_max {
            return Err(self.pos().error(format!(
                "blocks and tests nested more than {} deep (sieve_nesting_max)",
                self.nesting_max
            )));
        }
        Ok(())
    }

    fn command(&mut self, depth: usize) -> Result<CommandNode, CompileError> {
        self.depth_check(depth)?;
        let pos = self.pos();
        let name = match self.peek() {
            Some(Tok::Identifier(name)) => name.to_ascii_lowercase(),
            Some(_) => return Err(pos.error("expected a command")),
            None => return Err(pos.error("unexpected end of script: expected a command")),
        };
        self.at += 1;
        let args = self.arguments()?;
        let mut tests = Vec::new();
        match self.peek() {
            Some(Tok::Identifier(_)) => tests.push(self.test(depth + 1)?),
            Some(Tok::LParen) => tests = self.test_list(depth + 1)?,
            _ => {}
        }
        let block = match self.peek() {
            Some(Tok::Semicolon) => {
                self.at += 1;
                None
            }
            Some(Tok::LBrace) => {
                self.at += 1;
                let mut block = Vec::new();
                loop {
                    match self.peek() {
                        Some(Tok::RBrace) => {
                            self.at += 1;
                            break;
                        }
                        None => return Err(self.pos().error("missing '}' at the end of a block")),
                        _ => block.push(self.command(depth + 1)?),
                    }
                }
                Some(block)
            }
            None => return Err(self.pos().error(format!("missing ';' after {name}"))),
            Some(_) => {
                return Err(self.pos().error(format!(
                    "expected ';' or a block after the arguments of {name}"
                )));
            }
        };
        Ok(CommandNode {
            name,
            pos,
            args,
            tests,
            block,
        })
    }

    fn arguments(&mut self) -> Result<Vec<Arg>, CompileError> {
        let mut args = Vec::new();
        loop {
            let pos = self.pos();
            match self.peek() {
                Some(Tok::Tag(t)) => {
                    args.push(Arg::Tag(t.clone(), pos));
                    self.at += 1;
                }
                Some(Tok::Number(n)) => {
                    args.push(Arg::Number(*n, pos));
                    self.at += 1;
                }
                Some(Tok::Str(s)) => {
                    args.push(Arg::Strings {
                        values: vec![(s.clone(), pos)],
                        list: false,
                        pos,
                    });
                    self.at += 1;
                }
                Some(Tok::LBracket) => {
                    self.at += 1;
                    let mut values = Vec::new();
                    loop {
                        let spos = self.pos();
                        match self.peek() {
                            Some(Tok::Str(s)) => {
                                values.push((s.clone(), spos));
                                self.at += 1;
                            }
                            _ => return Err(spos.error("expected a string in a string list")),
                        }
                        match self.peek() {
                            Some(Tok::Comma) => self.at += 1,
                            Some(Tok::RBracket) => {
                                self.at += 1;
                                break;
                            }
                            _ => {
                                return Err(self
                                    .pos()
                                    .error("expected ',' or ']' in a string list"));
                            }
                        }
                    }
                    args.push(Arg::Strings {
                        values,
                        list: true,
                        pos,
                    });
                }
                _ => return Ok(args),
            }
        }
    }

    fn test(&mut self, depth: usize) -> Result<TestNode, CompileError> {
        self.depth_check(depth)?;
        let pos = self.pos();
        let name = match self.peek() {
            Some(Tok::Identifier(name)) => name.to_ascii_lowercase(),
            _ => return Err(pos.error("expected a test")),
        };
        self.at += 1;
        let args = self.arguments()?;
        let (tests, test_list) = match self.peek() {
            Some(Tok::Identifier(_)) => (vec![self.test(depth + 1)?], false),
            Some(Tok::LParen) => (self.test_list(depth + 1)?, true),
            _ => (Vec::new(), false),
        };
        Ok(TestNode {
            name,
            pos,
            args,
            tests,
            test_list,
        })
    }

    fn test_list(&mut self, depth: usize) -> Result<Vec<TestNode>, CompileError> {
        self.depth_check(depth)?;
        self.at += 1; // (
        let mut tests = Vec::new();
        loop {
            tests.push(self.test(depth)?);
            match self.peek() {
                Some(Tok::Comma) => self.at += 1,
                Some(Tok::RParen) => {
                    self.at += 1;
                    return Ok(tests);
                }
                _ => return Err(self.pos().error("expected ',' or ')' in a test list")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::tokenize;

    fn p(s: &str) -> Result<Vec<CommandNode>, CompileError> {
        parse(&tokenize(s)?, 32)
    }

    // RFC 5228 8.2
    #[test]
    fn grammar() {
        let c = p("if anyof (true, header :is \"a\" [\"b\",\"c\"]) { keep; } else { discard; }")
            .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].tests[0].tests.len(), 2);
        assert!(p("keep").is_err());
        assert!(p("if true { keep;").is_err());
        assert!(p("x [\"a\",]").is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("if {}true {{ }}", "not ".repeat(100));
        assert!(p(&deep).is_err());
        let deep = format!("if {}true{} {{ }}", "allof(".repeat(100), ")".repeat(100));
        assert!(p(&deep).is_err());
        let deep = format!("{}{}", "if true {".repeat(100), "}".repeat(100));
        assert!(p(&deep).is_err());
    }
}
