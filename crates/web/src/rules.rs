//! Mail rules as the Rules page edits them: a list of rules (conditions on From, To/Cc,
//! Subject, a named header field or the size, matched all or any; actions: move or copy to a
//! folder, flag, forward, discard, reject, stop) and an out-of-office reply, kept as one Sieve
//! script (RFC 5228), [`RULES_SCRIPT`], that this module writes.
//!
//! The script carries the form's own data on its first line (`# mailstow-rules v1 <base64 of
//! JSON>`), so the page can load it back. That line is never trusted: it is bounded, decoded,
//! every field checked as a submitted form is, and the script is written again from it and
//! compared with the stored one; a script edited by hand (or any other script) fails that and
//! is shown read-only, to be edited as text.
//!
//! Every user string reaches the script through [`quoted`] (`\` and `"` escaped; control
//! characters are refused by the checks, and replaced should one get through) or, for the
//! out-of-office text, a `text:` multi-line string with dot-stuffing (RFC 5228 2.4.2).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The name of the script the form writes.
pub const RULES_SCRIPT: &str = "mailstow-rules";
/// Rules in one script.
pub const RULES_MAX: usize = 50;
/// Conditions of one rule.
pub const CONDITIONS_MAX: usize = 8;
/// Actions of one rule.
pub const ACTIONS_MAX: usize = 8;
/// A rule's name, a value to match, a folder, an address, a keyword, a reason, the
/// out-of-office subject: bytes each.
pub const FIELD_BYTES_MAX: usize = 512;
/// A header field name a condition names.
pub const HEADER_NAME_BYTES_MAX: usize = 76;
/// The out-of-office text.
pub const VACATION_TEXT_BYTES_MAX: usize = 8192;
/// Extra own addresses of the out-of-office reply (RFC 5230 `:addresses`).
pub const VACATION_ADDRESSES_MAX: usize = 20;
/// Days between two replies to the same sender (RFC 5230 `:days`), at most.
pub const VACATION_DAYS_MAX: u32 = 30;
/// The out-of-office reply's default `:days`.
pub const VACATION_DAYS_DEFAULT: u32 = 7;
/// The largest size a size condition names, in KB (4 GB).
pub const SIZE_KB_MAX: u64 = 4 << 20;
/// IMAP keywords (RFC 3501 `flag-keyword`), bytes.
const KEYWORD_BYTES_MAX: usize = 64;
/// Addresses (RFC 5321 4.5.3.1.3's path, less its brackets).
const ADDRESS_BYTES_MAX: usize = 254;

/// The first line's prefix: the form's data follows it.
const DATA_PREFIX: &str = "# mailstow-rules v1 ";

/// Why a form (or the data of a stored script) is refused: one sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesError(pub String);

impl std::fmt::Display for RulesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(why: impl Into<String>) -> Result<T, RulesError> {
    Err(RulesError(why.into()))
}

/// Everything the form edits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    pub rules: Vec<Rule>,
    pub vacation: Vacation,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Shown in the list and as a comment in the script; may be empty.
    pub name: String,
    /// Any condition suffices (`anyof`), rather than all (`allof`).
    pub any: bool,
    /// None: every message.
    pub conditions: Vec<Condition>,
    pub actions: Vec<Action>,
    /// Stop processing: the rules below (and the out-of-office reply) are skipped.
    pub stop: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub field: Field,
    /// The field's name, for [`Field::Header`] (empty otherwise).
    pub header: String,
    pub op: Op,
    /// The text to compare; for [`Field::Size`], a number of KB.
    pub value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    From,
    /// To or Cc.
    To,
    Subject,
    Header,
    Size,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Contains,
    NotContains,
    Is,
    /// Wildcards: `*` any text, `?` one character.
    Matches,
    Regex,
    /// Size only.
    Over,
    /// Size only.
    Under,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// `fileinto` (RFC 5228 4.1), `:create` (RFC 5490) when asked.
    Move {
        folder: String,
        create: bool,
    },
    /// `fileinto :copy` (RFC 3894).
    Copy {
        folder: String,
        create: bool,
    },
    /// `addflag "\\Seen"` (RFC 5232).
    MarkRead,
    /// `addflag "\\Flagged"`.
    Flag,
    /// `addflag "keyword"`.
    Keyword {
        keyword: String,
    },
    /// `redirect`, `:copy` to keep a copy.
    Forward {
        address: String,
        keep_copy: bool,
    },
    Discard,
    /// RFC 5429 `reject`.
    Reject {
        reason: String,
    },
}

/// The out-of-office reply (RFC 5230), between two dates (RFC 5260 `currentdate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vacation {
    pub enabled: bool,
    /// `YYYY-MM-DD`, or empty: from now on.
    pub start: String,
    /// `YYYY-MM-DD`, or empty: until turned off. Inclusive.
    pub end: String,
    /// Empty: the interpreter's default (`Auto: ` and the message's subject).
    pub subject: String,
    /// Lines separated by `\n`.
    pub text: String,
    pub days: u32,
    /// The user's other addresses (mail to them is answered too).
    pub addresses: Vec<String>,
}

impl Default for Vacation {
    fn default() -> Vacation {
        Vacation {
            enabled: false,
            start: String::new(),
            end: String::new(),
            subject: String::new(),
            text: String::new(),
            days: VACATION_DAYS_DEFAULT,
            addresses: Vec::new(),
        }
    }
}

// --- Checks ------------------------------------------------------------------------------------

/// A one-line field: at most `max` bytes, no control character.
fn check_line(what: &str, s: &str, max: usize) -> Result<(), RulesError> {
    if s.len() > max {
        return refuse(format!("{what} is longer than {max} bytes."));
    }
    if s.chars().any(char::is_control) {
        return refuse(format!(
            "{what} contains a control character (a line break or tab, for instance)."
        ));
    }
    Ok(())
}

fn check_nonempty_line(what: &str, s: &str, max: usize) -> Result<(), RulesError> {
    if s.trim().is_empty() {
        return refuse(format!("{what} is empty."));
    }
    check_line(what, s, max)
}

/// A plain mail address: `local@domain`, no spaces, quotes or brackets.
pub fn check_address(what: &str, s: &str) -> Result<(), RulesError> {
    check_nonempty_line(what, s, ADDRESS_BYTES_MAX)?;
    let ok = match s.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || "\"<>()[],;:\\".contains(c))
                && !domain.contains('@')
        }
        None => false,
    };
    if !ok {
        return refuse(format!(
            "{what} is not a mail address like name@example.org: {s}"
        ));
    }
    Ok(())
}

/// `YYYY-MM-DD`, a day that exists.
pub fn check_date(what: &str, s: &str) -> Result<(), RulesError> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && digits(0..4)
        && digits(5..7)
        && digits(8..10);
    if !shaped {
        return refuse(format!("{what} is not a date like 2025-07-31."));
    }
    let year: u32 = s[0..4].parse().unwrap_or(0);
    let month: u32 = s[5..7].parse().unwrap_or(0);
    let day: u32 = s[8..10].parse().unwrap_or(0);
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    if year < 1970 || day == 0 || day > days {
        return refuse(format!("{what} is not a day of the calendar: {s}."));
    }
    Ok(())
}

impl Condition {
    fn check(&self, at: &str) -> Result<(), RulesError> {
        if self.field == Field::Header {
            let h = &self.header;
            if h.is_empty() {
                return refuse(format!("{at}: name the header field."));
            }
            if h.len() > HEADER_NAME_BYTES_MAX
                || !h.bytes().all(|b| (33..=126).contains(&b) && b != b':')
            {
                return refuse(format!(
                    "{at}: a header field name is at most {HEADER_NAME_BYTES_MAX} letters, \
                     digits or punctuation, without spaces or a colon."
                ));
            }
        } else if !self.header.is_empty() {
            return refuse(format!("{at}: only a header condition names a field."));
        }
        let sized = matches!(self.op, Op::Over | Op::Under);
        if (self.field == Field::Size) != sized {
            return refuse(format!(
                "{at}: \"is over\" and \"is under\" go with the size, and only with it."
            ));
        }
        if self.field == Field::Size {
            match self.value.parse::<u64>() {
                Ok(n) if (1..=SIZE_KB_MAX).contains(&n) && n.to_string() == self.value => {}
                _ => {
                    return refuse(format!(
                        "{at}: the size is a whole number of KB from 1 to {SIZE_KB_MAX}."
                    ));
                }
            }
            return Ok(());
        }
        check_nonempty_line(
            &format!("{at}: the text to compare"),
            &self.value,
            FIELD_BYTES_MAX,
        )
    }
}

impl Action {
    fn check(&self, at: &str) -> Result<(), RulesError> {
        match self {
            Action::Move { folder, .. } | Action::Copy { folder, .. } => {
                check_nonempty_line(&format!("{at}: the folder"), folder, FIELD_BYTES_MAX)?;
                if folder.trim() != folder {
                    return refuse(format!(
                        "{at}: the folder name starts or ends with a space."
                    ));
                }
                Ok(())
            }
            Action::MarkRead | Action::Flag | Action::Discard => Ok(()),
            Action::Keyword { keyword } => {
                let ok = !keyword.is_empty()
                    && keyword.len() <= KEYWORD_BYTES_MAX
                    && !keyword.starts_with('\\')
                    && keyword
                        .bytes()
                        .all(|b| b.is_ascii_graphic() && !b"(){%*\"\\]".contains(&b));
                if !ok {
                    return refuse(format!(
                        "{at}: a keyword is 1 to {KEYWORD_BYTES_MAX} letters, digits or \
                         punctuation other than ( ) {{ % * \" \\ ], without spaces."
                    ));
                }
                Ok(())
            }
            Action::Forward { address, .. } => {
                check_address(&format!("{at}: the address"), address)
            }
            Action::Reject { reason } => {
                check_nonempty_line(&format!("{at}: the reason"), reason, FIELD_BYTES_MAX)
            }
        }
    }

    fn ends(&self) -> bool {
        matches!(self, Action::Discard | Action::Reject { .. })
    }
}

impl Rule {
    fn check(&self, number: usize) -> Result<(), RulesError> {
        let at = format!("Rule {number}");
        check_line(&format!("{at}: the name"), &self.name, FIELD_BYTES_MAX)?;
        if self.conditions.len() > CONDITIONS_MAX {
            return refuse(format!(
                "{at} has {} conditions; a rule has at most {CONDITIONS_MAX}.",
                self.conditions.len()
            ));
        }
        if self.actions.len() > ACTIONS_MAX {
            return refuse(format!(
                "{at} has {} actions; a rule has at most {ACTIONS_MAX}.",
                self.actions.len()
            ));
        }
        if self.actions.is_empty() {
            return refuse(format!("{at} has no action."));
        }
        for (i, c) in self.conditions.iter().enumerate() {
            c.check(&format!("{at}, condition {}", i + 1))?;
        }
        for (i, a) in self.actions.iter().enumerate() {
            a.check(&format!("{at}, action {}", i + 1))?;
        }
        if self.actions.iter().any(Action::ends) && self.actions.len() > 1 {
            return refuse(format!(
                "{at}: a rule that discards or rejects a message can do nothing else."
            ));
        }
        Ok(())
    }
}

impl Vacation {
    fn check(&self) -> Result<(), RulesError> {
        let at = "The out-of-office reply";
        for (what, date) in [("start date", &self.start), ("end date", &self.end)] {
            if !date.is_empty() {
                check_date(&format!("{at}: the {what}"), date)?;
            }
        }
        if !self.start.is_empty() && !self.end.is_empty() && self.end < self.start {
            return refuse(format!("{at}: the end date is before the start date."));
        }
        check_line(
            &format!("{at}: the subject"),
            &self.subject,
            FIELD_BYTES_MAX,
        )?;
        if self.text.len() > VACATION_TEXT_BYTES_MAX {
            return refuse(format!(
                "{at}: the message is longer than {VACATION_TEXT_BYTES_MAX} bytes."
            ));
        }
        if self
            .text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return refuse(format!("{at}: the message contains a control character."));
        }
        if self.enabled && self.text.trim().is_empty() {
            return refuse(format!("{at}: the message is empty."));
        }
        if !(1..=VACATION_DAYS_MAX).contains(&self.days) {
            return refuse(format!(
                "{at}: the days between replies are 1 to {VACATION_DAYS_MAX}."
            ));
        }
        if self.addresses.len() > VACATION_ADDRESSES_MAX {
            return refuse(format!(
                "{at}: at most {VACATION_ADDRESSES_MAX} other addresses."
            ));
        }
        for a in &self.addresses {
            check_address(&format!("{at}: an address"), a)?;
        }
        Ok(())
    }
}

impl Rules {
    /// Whether the form's data can be stored: every bound and field.
    pub fn check(&self) -> Result<(), RulesError> {
        if self.rules.len() > RULES_MAX {
            return refuse(format!(
                "{} rules; at most {RULES_MAX} can be kept.",
                self.rules.len()
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            r.check(i + 1)?;
        }
        self.vacation.check()
    }

    // --- Writing the script --------------------------------------------------------------------

    /// The Sieve script, once checked.
    pub fn script(&self) -> Result<String, RulesError> {
        self.check()?;
        Ok(self.write())
    }

    /// The extensions the script uses, sorted.
    fn requires(&self) -> Vec<&'static str> {
        let mut r = std::collections::BTreeSet::new();
        for rule in &self.rules {
            for c in &rule.conditions {
                if c.op == Op::Regex {
                    r.insert("regex");
                }
            }
            for a in &rule.actions {
                match a {
                    Action::Move { create, .. } => {
                        r.insert("fileinto");
                        if *create {
                            r.insert("mailbox");
                        }
                    }
                    Action::Copy { create, .. } => {
                        r.extend(["fileinto", "copy"]);
                        if *create {
                            r.insert("mailbox");
                        }
                    }
                    Action::MarkRead | Action::Flag | Action::Keyword { .. } => {
                        r.insert("imap4flags");
                    }
                    Action::Forward { keep_copy, .. } => {
                        if *keep_copy {
                            r.insert("copy");
                        }
                    }
                    Action::Discard => {}
                    Action::Reject { .. } => {
                        r.insert("reject");
                    }
                }
            }
        }
        if self.vacation.enabled {
            r.insert("vacation");
            if !self.vacation.start.is_empty() || !self.vacation.end.is_empty() {
                r.extend(["date", "relational"]);
            }
        }
        r.into_iter().collect()
    }

    fn write(&self) -> String {
        let data = serde_json::to_vec(self).unwrap_or_default();
        let mut s = String::new();
        s.push_str(DATA_PREFIX);
        s.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
        s.push_str("\r\n");
        s.push_str(
            "# Written by the Rules page of the mailstow web view. Change it there: once this\r\n\
             # script is edited by hand, the page shows it read-only (\"edit as text\").\r\n",
        );
        let requires = self.requires();
        if !requires.is_empty() {
            let list: Vec<String> = requires.iter().map(|r| quoted(r)).collect();
            s.push_str(&format!("require [{}];\r\n", list.join(", ")));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            s.push_str("\r\n");
            if rule.name.is_empty() {
                s.push_str(&format!("# Rule {}\r\n", i + 1));
            } else {
                s.push_str(&format!("# Rule {}: {}\r\n", i + 1, comment(&rule.name)));
            }
            s.push_str(&format!("if {} {{\r\n", test(rule)));
            // Flags first, so a `fileinto` below stores them too (RFC 5232 3).
            let (flags, others): (Vec<&Action>, Vec<&Action>) =
                rule.actions.iter().partition(|a| {
                    matches!(a, Action::MarkRead | Action::Flag | Action::Keyword { .. })
                });
            for a in flags.into_iter().chain(others) {
                s.push_str("    ");
                s.push_str(&command(a));
                s.push_str("\r\n");
            }
            if rule.stop || rule.actions.iter().any(Action::ends) {
                s.push_str("    stop;\r\n");
            }
            s.push_str("}\r\n");
        }
        let v = &self.vacation;
        if v.enabled {
            s.push_str("\r\n# Out of office");
            match (v.start.is_empty(), v.end.is_empty()) {
                (true, true) => {}
                (false, true) => s.push_str(&format!(" from {}", v.start)),
                (true, false) => s.push_str(&format!(" until {}", v.end)),
                (false, false) => s.push_str(&format!(" from {} to {}", v.start, v.end)),
            }
            s.push_str("\r\n");
            let mut dates = Vec::new();
            if !v.start.is_empty() {
                dates.push(format!(
                    "currentdate :value \"ge\" \"date\" {}",
                    quoted(&v.start)
                ));
            }
            if !v.end.is_empty() {
                dates.push(format!(
                    "currentdate :value \"le\" \"date\" {}",
                    quoted(&v.end)
                ));
            }
            let mut reply = format!("vacation :days {}", v.days);
            if !v.subject.is_empty() {
                reply.push_str(&format!(" :subject {}", quoted(&v.subject)));
            }
            if !v.addresses.is_empty() {
                reply.push_str(&format!(" :addresses {}", string_list(&v.addresses)));
            }
            reply.push(' ');
            reply.push_str(&multiline(&v.text));
            reply.push_str(";\r\n");
            match dates.len() {
                0 => s.push_str(&reply),
                1 => s.push_str(&format!("if {} {{\r\n{reply}}}\r\n", dates[0])),
                _ => s.push_str(&format!(
                    "if allof ({},\r\n          {}) {{\r\n{reply}}}\r\n",
                    dates[0], dates[1]
                )),
            }
        }
        s
    }

    // --- Reading it back ---------------------------------------------------------------------

    /// The form's data from a script this module wrote, or `None`: no data line, data that
    /// does not decode or pass the checks, or a script that is not exactly what the data
    /// writes (edited by hand). Line ends are compared as LF (a browser's textarea sends
    /// CRLF).
    pub fn from_script(source: &str, bytes_max: usize) -> Option<Rules> {
        if source.len() > bytes_max {
            return None;
        }
        let first = source.lines().next()?;
        let data = first.strip_prefix(DATA_PREFIX)?.trim_end();
        let json = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()?;
        let rules: Rules = serde_json::from_slice(&json).ok()?;
        let written = rules.script().ok()?;
        let lf = |s: &str| s.replace("\r\n", "\n");
        (lf(&written) == lf(source)).then_some(rules)
    }
}

/// A Sieve quoted string (RFC 5228 2.4.2): `\` and `"` escaped. Control characters are
/// refused by the checks; one that got here anyway is replaced, so no user string can end
/// a line or the string.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn string_list(items: &[String]) -> String {
    let list: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", list.join(", "))
}

/// A `text:` multi-line string (RFC 5228 2.4.2): lines ending CRLF, a line starting with a
/// dot gets another (so a line "." does not end it), then the lone dot.
pub fn multiline(text: &str) -> String {
    let mut out = String::from("text:\r\n");
    let text = text.replace("\r\n", "\n");
    for line in text.split('\n') {
        if line.starts_with('.') {
            out.push('.');
        }
        for c in line.chars() {
            out.push(if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            });
        }
        out.push_str("\r\n");
    }
    out.push_str(".\r\n");
    out
}

/// Text for a `#` comment: one line.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

fn test(rule: &Rule) -> String {
    let tests: Vec<String> = rule.conditions.iter().map(condition).collect();
    match tests.len() {
        0 => "true".to_string(),
        1 => tests.into_iter().next().unwrap_or_default(),
        _ => format!(
            "{} ({})",
            if rule.any { "anyof" } else { "allof" },
            tests.join(",\r\n        ")
        ),
    }
}

fn condition(c: &Condition) -> String {
    let value = quoted(&c.value);
    let header = match c.field {
        Field::Size => {
            let over = if c.op == Op::Over { ":over" } else { ":under" };
            return format!("size {over} {}K", c.value);
        }
        Field::From => "\"from\"".to_string(),
        Field::To => "[\"to\", \"cc\"]".to_string(),
        Field::Subject => "\"subject\"".to_string(),
        Field::Header => quoted(&c.header),
    };
    let address = matches!(c.field, Field::From | Field::To);
    match c.op {
        // An address is compared whole, without its display name.
        Op::Is if address => format!("address :all :is {header} {value}"),
        Op::Is => format!("header :is {header} {value}"),
        Op::Contains => format!("header :contains {header} {value}"),
        Op::NotContains => format!("not header :contains {header} {value}"),
        Op::Matches => format!("header :matches {header} {value}"),
        Op::Regex => format!("header :regex {header} {value}"),
        Op::Over | Op::Under => "false".to_string(),
    }
}

fn command(a: &Action) -> String {
    match a {
        Action::Move { folder, create } => format!(
            "fileinto {}{};",
            if *create { ":create " } else { "" },
            quoted(folder)
        ),
        Action::Copy { folder, create } => format!(
            "fileinto :copy {}{};",
            if *create { ":create " } else { "" },
            quoted(folder)
        ),
        Action::MarkRead => "addflag \"\\\\Seen\";".to_string(),
        Action::Flag => "addflag \"\\\\Flagged\";".to_string(),
        Action::Keyword { keyword } => format!("addflag {};", quoted(keyword)),
        Action::Forward { address, keep_copy } => format!(
            "redirect {}{};",
            if *keep_copy { ":copy " } else { "" },
            quoted(address)
        ),
        Action::Discard => "discard;".to_string(),
        Action::Reject { reason } => format!("reject {};", quoted(reason)),
    }
}

// --- What the pages show -----------------------------------------------------------------------

impl Field {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Field::From => "from",
            Field::To => "to",
            Field::Subject => "subject",
            Field::Header => "header",
            Field::Size => "size",
        }
    }

    fn from_key(s: &str) -> Option<Field> {
        [
            Field::From,
            Field::To,
            Field::Subject,
            Field::Header,
            Field::Size,
        ]
        .into_iter()
        .find(|f| f.key() == s)
    }
}

impl Op {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Op::Contains => "contains",
            Op::NotContains => "not_contains",
            Op::Is => "is",
            Op::Matches => "matches",
            Op::Regex => "regex",
            Op::Over => "over",
            Op::Under => "under",
        }
    }

    fn from_key(s: &str) -> Option<Op> {
        [
            Op::Contains,
            Op::NotContains,
            Op::Is,
            Op::Matches,
            Op::Regex,
            Op::Over,
            Op::Under,
        ]
        .into_iter()
        .find(|o| o.key() == s)
    }

    fn words(self) -> &'static str {
        match self {
            Op::Contains => "contains",
            Op::NotContains => "does not contain",
            Op::Is => "is",
            Op::Matches => "matches",
            Op::Regex => "matches the regular expression",
            Op::Over => "is over",
            Op::Under => "is under",
        }
    }
}

/// One sentence for the rules list: "If Subject contains “invoice”: move to Invoices."
pub fn describe(rule: &Rule) -> String {
    let conditions: Vec<String> = rule
        .conditions
        .iter()
        .map(|c| {
            let field = match c.field {
                Field::From => "From".to_string(),
                Field::To => "To or Cc".to_string(),
                Field::Subject => "Subject".to_string(),
                Field::Header => c.header.clone(),
                Field::Size => "the size".to_string(),
            };
            if c.field == Field::Size {
                format!("{field} {} {} KB", c.op.words(), c.value)
            } else {
                format!("{field} {} “{}”", c.op.words(), c.value)
            }
        })
        .collect();
    let when = if conditions.is_empty() {
        "Every message".to_string()
    } else {
        format!(
            "If {}",
            conditions.join(if rule.any { " or " } else { " and " })
        )
    };
    let mut actions: Vec<String> = rule
        .actions
        .iter()
        .map(|a| match a {
            Action::Move { folder, create } => format!(
                "move to {folder}{}",
                if *create { " (created if missing)" } else { "" }
            ),
            Action::Copy { folder, create } => format!(
                "copy to {folder}{}",
                if *create { " (created if missing)" } else { "" }
            ),
            Action::MarkRead => "mark as read".to_string(),
            Action::Flag => "flag".to_string(),
            Action::Keyword { keyword } => format!("add the keyword {keyword}"),
            Action::Forward { address, keep_copy } => format!(
                "forward to {address}{}",
                if *keep_copy { ", keeping a copy" } else { "" }
            ),
            Action::Discard => "discard".to_string(),
            Action::Reject { reason } => format!("reject (“{reason}”)"),
        })
        .collect();
    if rule.stop {
        actions.push("stop".to_string());
    }
    format!("{when}: {}.", actions.join(", "))
}

// --- The form's fields ---------------------------------------------------------------------------

/// A condition row of the rule form, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConditionRow {
    pub field: String,
    pub header: String,
    pub op: String,
    pub value: String,
}

/// An action row of the rule form, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionRow {
    pub kind: String,
    /// The folder, keyword, address or reason.
    pub arg: String,
    /// Move or copy: create the folder when it is missing.
    pub create: bool,
    /// Forward: keep a copy.
    pub keep: bool,
}

/// The rule form, as text (what the page shows, and shows again with a problem).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleForm {
    pub name: String,
    pub any: bool,
    pub conditions: Vec<ConditionRow>,
    pub actions: Vec<ActionRow>,
    pub stop: bool,
}

/// Form fields one request may carry (the rule form has fewer).
const FORM_FIELDS_MAX: usize = 8 + 4 * CONDITIONS_MAX + 4 * ACTIONS_MAX;

impl RuleForm {
    /// The form for `rule` (the page adds empty rows to fill in).
    pub fn of(rule: &Rule) -> RuleForm {
        let conditions: Vec<ConditionRow> = rule
            .conditions
            .iter()
            .map(|c| ConditionRow {
                field: c.field.key().to_string(),
                header: c.header.clone(),
                op: c.op.key().to_string(),
                value: c.value.clone(),
            })
            .collect();
        let actions: Vec<ActionRow> = rule
            .actions
            .iter()
            .map(|a| {
                let (kind, arg, create, keep) = match a {
                    Action::Move { folder, create } => ("move", folder.clone(), *create, false),
                    Action::Copy { folder, create } => ("copy", folder.clone(), *create, false),
                    Action::MarkRead => ("read", String::new(), false, false),
                    Action::Flag => ("flag", String::new(), false, false),
                    Action::Keyword { keyword } => ("keyword", keyword.clone(), false, false),
                    Action::Forward { address, keep_copy } => {
                        ("forward", address.clone(), false, *keep_copy)
                    }
                    Action::Discard => ("discard", String::new(), false, false),
                    Action::Reject { reason } => ("reject", reason.clone(), false, false),
                };
                ActionRow {
                    kind: kind.to_string(),
                    arg,
                    create,
                    keep,
                }
            })
            .collect();
        RuleForm {
            name: rule.name.clone(),
            any: rule.any,
            conditions,
            actions,
            stop: rule.stop,
        }
    }

    /// The form as posted: `name`, `match` (`all`/`any`), `stop`, and rows numbered from 0:
    /// `cond_field_N`, `cond_header_N`, `cond_op_N`, `cond_value_N`, `act_kind_N`,
    /// `act_arg_N`, `act_create_N`, `act_keep_N`. Other fields (`csrf`, `index`) are the
    /// caller's.
    pub fn parse(fields: &[(String, String)]) -> Result<RuleForm, RulesError> {
        if fields.len() > FORM_FIELDS_MAX {
            return refuse("The form has too many fields.");
        }
        let mut f = RuleForm::default();
        let mut conditions = vec![ConditionRow::default(); CONDITIONS_MAX];
        let mut actions = vec![ActionRow::default(); ACTIONS_MAX];
        for (key, value) in fields {
            if value.len() > FIELD_BYTES_MAX {
                return refuse(format!("A field is longer than {FIELD_BYTES_MAX} bytes."));
            }
            let row = |prefix: &str, max: usize| -> Result<Option<usize>, RulesError> {
                match key.strip_prefix(prefix) {
                    Some(n) => match n.parse::<usize>() {
                        Ok(n) if n < max => Ok(Some(n)),
                        _ => refuse(format!(
                            "A rule has at most {CONDITIONS_MAX} conditions and {ACTIONS_MAX} actions."
                        )),
                    },
                    None => Ok(None),
                }
            };
            let value = value.clone();
            match key.as_str() {
                "name" => f.name = value.trim().to_string(),
                "match" => f.any = value == "any",
                "stop" => f.stop = !value.is_empty(),
                _ => {
                    if let Some(n) = row("cond_field_", CONDITIONS_MAX)? {
                        conditions[n].field = value;
                    } else if let Some(n) = row("cond_header_", CONDITIONS_MAX)? {
                        conditions[n].header = value.trim().to_string();
                    } else if let Some(n) = row("cond_op_", CONDITIONS_MAX)? {
                        conditions[n].op = value;
                    } else if let Some(n) = row("cond_value_", CONDITIONS_MAX)? {
                        conditions[n].value = value;
                    } else if let Some(n) = row("act_kind_", ACTIONS_MAX)? {
                        actions[n].kind = value;
                    } else if let Some(n) = row("act_arg_", ACTIONS_MAX)? {
                        actions[n].arg = value.trim().to_string();
                    } else if let Some(n) = row("act_create_", ACTIONS_MAX)? {
                        actions[n].create = !value.is_empty();
                    } else if let Some(n) = row("act_keep_", ACTIONS_MAX)? {
                        actions[n].keep = !value.is_empty();
                    }
                }
            }
        }
        // Rows left empty are dropped; the page shows them again.
        f.conditions = conditions
            .into_iter()
            .filter(|c| {
                !c.field.is_empty()
                    && (!c.value.trim().is_empty() || (c.field == "header" && !c.header.is_empty()))
            })
            .collect();
        f.actions = actions.into_iter().filter(|a| !a.kind.is_empty()).collect();
        Ok(f)
    }

    /// The rule the form describes, checked.
    pub fn rule(&self, number: usize) -> Result<Rule, RulesError> {
        let at = format!("Rule {number}");
        let mut conditions = Vec::new();
        for (i, c) in self.conditions.iter().enumerate() {
            let (Some(field), Some(op)) = (Field::from_key(&c.field), Op::from_key(&c.op)) else {
                return refuse(format!(
                    "{at}, condition {}: choose a field and a comparison.",
                    i + 1
                ));
            };
            let value = if field == Field::Size {
                c.value
                    .trim()
                    .trim_end_matches(['K', 'k', 'B', 'b'])
                    .trim()
                    .to_string()
            } else {
                c.value.clone()
            };
            let value = match value.parse::<u64>() {
                Ok(n) if field == Field::Size => n.to_string(),
                _ => value,
            };
            conditions.push(Condition {
                field,
                header: if field == Field::Header {
                    c.header.clone()
                } else {
                    String::new()
                },
                op,
                value,
            });
        }
        let mut actions = Vec::new();
        for (i, a) in self.actions.iter().enumerate() {
            let arg = a.arg.clone();
            actions.push(match a.kind.as_str() {
                "move" => Action::Move {
                    folder: arg,
                    create: a.create,
                },
                "copy" => Action::Copy {
                    folder: arg,
                    create: a.create,
                },
                "read" => Action::MarkRead,
                "flag" => Action::Flag,
                "keyword" => Action::Keyword { keyword: arg },
                "forward" => Action::Forward {
                    address: arg,
                    keep_copy: a.keep,
                },
                "discard" => Action::Discard,
                "reject" => Action::Reject { reason: arg },
                _ => return refuse(format!("{at}, action {}: no such action.", i + 1)),
            });
        }
        let rule = Rule {
            name: self.name.clone(),
            any: self.any,
            conditions,
            actions,
            stop: self.stop,
        };
        rule.check(number)?;
        Ok(rule)
    }
}

/// The out-of-office form, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacationForm {
    pub enabled: bool,
    pub start: String,
    pub end: String,
    pub subject: String,
    pub text: String,
    pub days: String,
    /// One per line, or separated by commas.
    pub addresses: String,
}

impl VacationForm {
    pub fn of(v: &Vacation) -> VacationForm {
        VacationForm {
            enabled: v.enabled,
            start: v.start.clone(),
            end: v.end.clone(),
            subject: v.subject.clone(),
            text: v.text.clone(),
            days: v.days.to_string(),
            addresses: v.addresses.join("\n"),
        }
    }

    /// The form as posted: `enabled`, `start`, `end`, `subject`, `text`, `days`, `addresses`.
    pub fn parse(fields: &[(String, String)]) -> Result<VacationForm, RulesError> {
        if fields.len() > 16 {
            return refuse("The form has too many fields.");
        }
        let mut f = VacationForm::default();
        for (key, value) in fields {
            let max = match key.as_str() {
                "text" => VACATION_TEXT_BYTES_MAX,
                "addresses" => VACATION_ADDRESSES_MAX * (ADDRESS_BYTES_MAX + 2),
                _ => FIELD_BYTES_MAX,
            };
            if value.len() > max {
                return refuse(format!(
                    "The out-of-office {key} is longer than {max} bytes."
                ));
            }
            let value = value.clone();
            match key.as_str() {
                "enabled" => f.enabled = !value.is_empty(),
                "start" => f.start = value.trim().to_string(),
                "end" => f.end = value.trim().to_string(),
                "subject" => f.subject = value.trim().to_string(),
                "text" => f.text = value.replace("\r\n", "\n").replace('\r', "\n"),
                "days" => f.days = value.trim().to_string(),
                "addresses" => f.addresses = value,
                _ => {}
            }
        }
        Ok(f)
    }

    /// The reply the form describes, checked.
    pub fn vacation(&self) -> Result<Vacation, RulesError> {
        let days = if self.days.is_empty() {
            VACATION_DAYS_DEFAULT
        } else {
            match self.days.parse::<u32>() {
                Ok(d) => d,
                Err(_) => {
                    return refuse(format!(
                        "The out-of-office reply: the days between replies are 1 to {VACATION_DAYS_MAX}."
                    ));
                }
            }
        };
        let addresses: Vec<String> = self
            .addresses
            .split(['\n', ',', '\r'])
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        let v = Vacation {
            enabled: self.enabled,
            start: self.start.clone(),
            end: self.end.clone(),
            subject: self.subject.clone(),
            // Trailing blank lines would only lengthen the reply.
            text: self.text.trim_end().to_string(),
            days,
            addresses,
        };
        v.check()?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests;
