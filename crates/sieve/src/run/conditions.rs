//! The tests (RFC 5228 5 and the extensions' tests): each evaluated against the message,
//! the envelope and the run's variables.

use super::*;

impl State<'_> {
    pub(super) fn test(
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
}
