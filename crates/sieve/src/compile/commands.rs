//! The commands (RFC 5228 3 and 4, and the extensions' commands) compiled: arguments
//! checked, tags resolved, `require`d extensions enforced.

use super::*;

impl Compiler<'_> {
    pub(super) fn command(&mut self, node: &CommandNode) -> Result<Option<Cmd>, CompileError> {
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

    pub(super) fn vacation(&mut self, args: &mut Args<'_>) -> Result<VacationCmd, CompileError> {
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
}
