//! The compiled form of a script: a compact tree of typed commands and tests the
//! interpreter ([`crate::run`]) walks. Names, tags and `require` are resolved at compile
//! time; what is left for a run is only evaluation.

use regex::Regex;

use crate::context::Location;

/// A reference to a variable (RFC 5229 3): a slot of the script's own variables, or a
/// name in the run-wide set of `global` ones (RFC 6609 3.5).
#[derive(Debug, Clone)]
pub(crate) enum VarRef {
    Local(usize),
    Global(String),
}

/// One piece of a string with variable references.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    Lit(String),
    Var(VarRef),
    /// `${N}` (RFC 5229 3.2); indexes past 9 are always empty.
    Match(usize),
}

/// A string argument: constant, or a template expanded at run time (RFC 5229 3).
#[derive(Debug, Clone)]
pub(crate) enum Str {
    Const(String),
    Template(Vec<Part>),
}

impl Str {
    pub(crate) fn as_const(&self) -> Option<&str> {
        match self {
            Str::Const(s) => Some(s),
            Str::Template(_) => None,
        }
    }
}

/// Comparators (RFC 5228 2.7.3, RFC 4790 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparator {
    Octet,
    AsciiCasemap,
    AsciiNumeric,
}

/// Relational operators (RFC 5231 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relation {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// Match types (RFC 5228 2.7.1, RFC 5231, draft-ietf-sieve-regex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchType {
    Is,
    Contains,
    Matches,
    Regex,
    Value(Relation),
    Count(Relation),
}

/// A key: the string, and for `:regex` with a constant key, the regex compiled once.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) s: Str,
    pub(crate) regex: Option<Regex>,
}

/// How a test compares: comparator, match type, keys.
#[derive(Debug, Clone)]
pub(crate) struct Matcher {
    pub(crate) match_type: MatchType,
    pub(crate) comparator: Comparator,
    pub(crate) keys: Vec<Key>,
}

/// Address parts (RFC 5228 2.7.4, RFC 5233 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressPart {
    All,
    LocalPart,
    Domain,
    User,
    Detail,
}

/// `:index N [:last]` (RFC 5260 6).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Index {
    pub(crate) n: u64,
    pub(crate) last: bool,
}

/// The zone a date test works in (RFC 5260 4.1).
#[derive(Debug, Clone)]
pub(crate) enum Zone {
    Local,
    Original,
    Given(Str),
}

/// The body transform (RFC 5173 5).
#[derive(Debug, Clone)]
pub(crate) enum BodyTransform {
    Raw,
    Text,
    Content(Vec<Str>),
}

#[derive(Debug, Clone)]
pub(crate) enum Test {
    True,
    False,
    Not(Box<Test>),
    AllOf(Vec<Test>),
    AnyOf(Vec<Test>),
    Exists(Vec<Str>),
    Header {
        names: Vec<Str>,
        index: Option<Index>,
        matcher: Matcher,
    },
    Address {
        names: Vec<Str>,
        part: AddressPart,
        index: Option<Index>,
        matcher: Matcher,
    },
    Envelope {
        parts: Vec<Str>,
        part: AddressPart,
        matcher: Matcher,
    },
    Size {
        over: bool,
        limit: u64,
    },
    String {
        sources: Vec<Str>,
        matcher: Matcher,
    },
    HasFlag {
        variables: Vec<VarRef>,
        matcher: Matcher,
    },
    Body {
        transform: BodyTransform,
        matcher: Matcher,
    },
    Date {
        zone: Zone,
        header: Str,
        part: Str,
        index: Option<Index>,
        matcher: Matcher,
    },
    CurrentDate {
        zone: Zone,
        part: Str,
        matcher: Matcher,
    },
    MailboxExists(Vec<Str>),
    Duplicate(Box<Duplicate>),
    Environment {
        name: Str,
        matcher: Matcher,
    },
    Spam {
        percent: bool,
        matcher: Matcher,
    },
    Virus {
        matcher: Matcher,
    },
    Custom(Box<Custom>),
}

/// `duplicate` (RFC 7352 3).
#[derive(Debug, Clone)]
pub(crate) struct Duplicate {
    pub(crate) handle: Option<Str>,
    pub(crate) header: Option<Str>,
    pub(crate) unique_id: Option<Str>,
    pub(crate) seconds: Option<u64>,
    pub(crate) last: bool,
}

/// `vacation` (RFC 5230 4, RFC 6131).
#[derive(Debug, Clone)]
pub(crate) struct VacationCmd {
    pub(crate) period_seconds: u64,
    pub(crate) subject: Option<Str>,
    pub(crate) from: Option<Str>,
    pub(crate) addresses: Vec<Str>,
    pub(crate) mime: bool,
    pub(crate) handle: Option<Str>,
    pub(crate) reason: Str,
}

/// What setflag, addflag and removeflag do (RFC 5232 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlagOp {
    Set,
    Add,
    Remove,
}

/// Modifiers of `set` (RFC 5229 4.1, RFC 5435 7, draft-ietf-sieve-regex 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modifier {
    Lower,
    Upper,
    LowerFirst,
    UpperFirst,
    QuoteWildcard,
    QuoteRegex,
    EncodeUrl,
    Length,
}

impl Modifier {
    /// RFC 5229 4.1: higher precedence is applied first; two of one precedence conflict.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            Modifier::Lower | Modifier::Upper => 40,
            Modifier::LowerFirst | Modifier::UpperFirst => 30,
            Modifier::QuoteWildcard | Modifier::QuoteRegex => 20,
            Modifier::EncodeUrl => 15,
            Modifier::Length => 10,
        }
    }
}

/// An argument of a command or test registered by an [`crate::extension::Extension`].
#[derive(Debug, Clone)]
pub(crate) enum CustomArg {
    Tag(String),
    Number(u64),
    Strings(Vec<Str>),
}

/// A command or test an extension registered: its arguments, tests and block kept
/// generic; the harness gives them meaning.
#[derive(Debug, Clone)]
pub(crate) struct Custom {
    pub(crate) name: String,
    pub(crate) args: Vec<CustomArg>,
    pub(crate) tests: Vec<Test>,
    pub(crate) block: Option<Vec<Cmd>>,
}

#[derive(Debug, Clone)]
pub(crate) enum Cmd {
    /// if / elsif / else: the branches in order, then the else block.
    If(Vec<(Test, Vec<Cmd>)>, Option<Vec<Cmd>>),
    Stop,
    Return,
    Keep {
        flags: Option<Vec<Str>>,
    },
    Discard,
    FileInto {
        mailbox: Str,
        flags: Option<Vec<Str>>,
        copy: bool,
        create: bool,
    },
    Redirect {
        address: Str,
        copy: bool,
    },
    Reject {
        reason: Str,
        extended: bool,
    },
    Vacation(Box<VacationCmd>),
    Set {
        var: VarRef,
        modifiers: Vec<Modifier>,
        value: Str,
    },
    Flags {
        op: FlagOp,
        var: Option<VarRef>,
        flags: Vec<Str>,
    },
    AddHeader {
        last: bool,
        name: Str,
        value: Str,
    },
    DeleteHeader {
        index: Option<Index>,
        name: Str,
        matcher: Option<Matcher>,
    },
    Include {
        location: Location,
        once: bool,
        optional: bool,
        name: Str,
    },
    Error(Str),
    Custom(Box<Custom>),
}
