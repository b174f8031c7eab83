//! The tests (RFC 5228 5 and the extensions' tests) compiled, with their match types,
//! comparators and date parts.

use super::*;

impl Compiler<'_> {
    pub(super) fn test(&mut self, node: &TestNode) -> Result<Test, CompileError> {
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
    pub(super) fn match_test(
        &mut self,
        node: &TestNode,
        args: &mut Args<'_>,
    ) -> Result<Test, CompileError> {
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

    pub(super) fn date_part(&mut self, args: &mut Args<'_>) -> Result<Str, CompileError> {
        let (s, p) = args.string("the date part")?;
        let part = self.string(s, p)?;
        if let Some(c) = part.as_const()
            && crate::date::date_part(crate::date::Moment { utc: 0, zone: 0 }, c).is_none()
        {
            return Err(p.error(format!("unknown date part \"{c}\" (RFC 5260 4.2)")));
        }
        Ok(part)
    }
}
