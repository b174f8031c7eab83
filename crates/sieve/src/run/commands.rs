//! The commands (RFC 5228 3 and 4, and the extensions' commands): control, actions, and
//! what they change in the run.

use super::*;

impl State<'_> {
    pub(super) fn command(
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
}
