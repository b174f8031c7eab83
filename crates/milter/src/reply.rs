//! A filter's own SMTP reply (`SMFIR_REPLYCODE`), and the decisions a step ends with.

/// An SMTP reply a filter chose: `ddd [x.y.z] text` (RFC 5321 4.2, RFC 3463).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// 400..=599: a filter's reply always refuses.
    pub code: u16,
    /// The enhanced status code, its class equal to the code's first digit.
    pub enhanced: Option<(u8, u16, u16)>,
    /// The text; the lines of a multi-line reply joined by `\n`.
    pub text: String,
}

/// The result of one step, from the filter's final reply to it.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Go on (`SMFIR_CONTINUE`, or a step the filter does not get or answer).
    Continue,
    /// The filter wants nothing more of this message (of the connection, at connect or HELO):
    /// `SMFIR_ACCEPT`.
    Accept,
    /// `SMFIR_REJECT` (`None`: 550 5.7.1) or a 5xx `SMFIR_REPLYCODE`.
    Reject(Option<Reply>),
    /// `SMFIR_TEMPFAIL` (`None`: 451 4.7.1) or a 4xx `SMFIR_REPLYCODE`.
    TempFail(Option<Reply>),
    /// Accept the message and drop it (`SMFIR_DISCARD`).
    Discard,
    /// Accept the message and hold it (`SMFIR_QUARANTINE` with the filter's reason).
    Quarantine(String),
}

impl Reply {
    /// Parses a `SMFIR_REPLYCODE` text. Every line must start with the same 4xx or 5xx code
    /// and a space or hyphen; an enhanced code, when present, must be of the same class
    /// (Postfix milter8.c checks the first line; we check each). Sendmail treats the text as
    /// a format string, so filters double `%`: `%%` becomes `%` and a lone `%` is dropped, as
    /// Postfix does.
    pub fn parse(text: &str) -> Result<Reply, &'static str> {
        let text = text.strip_suffix("\r\n").unwrap_or(text);
        let mut code = None;
        let mut enhanced = None;
        let mut lines = Vec::new();
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let bytes = line.as_bytes();
            if bytes.len() < 3 || !bytes[..3].iter().all(u8::is_ascii_digit) {
                return Err("a reply line does not start with a three-digit code");
            }
            let this: u16 = line[..3].parse().map_err(|_| "bad reply code")?;
            if !(400..=599).contains(&this) {
                return Err("a filter's reply code must be 4xx or 5xx");
            }
            if *code.get_or_insert(this) != this {
                return Err("the lines of a reply have different codes");
            }
            let rest = match bytes.get(3) {
                None => "",
                Some(b' ' | b'-') => &line[4..],
                Some(_) => return Err("a reply code is not followed by a space or hyphen"),
            };
            let (this_enhanced, rest) = enhanced_code(rest);
            if let Some((class, _, _)) = this_enhanced
                && u16::from(class) != this / 100
            {
                return Err("the enhanced code's class differs from the reply code's");
            }
            if enhanced.is_none() {
                enhanced = this_enhanced;
            }
            lines.push(unescape_percent(rest));
        }
        Ok(Reply {
            code: code.ok_or("an empty reply")?,
            enhanced,
            text: lines.join("\n"),
        })
    }
}

/// Splits a leading `x.y.z ` (RFC 3463: class 2, 4 or 5, subject and detail 0..=999).
fn enhanced_code(rest: &str) -> (Option<(u8, u16, u16)>, &str) {
    let (word, after) = match rest.split_once(' ') {
        Some((word, after)) => (word, after),
        None => (rest, ""),
    };
    let mut parts = word.split('.');
    let parsed = (|| {
        let class: u8 = number(parts.next()?, 1)?.try_into().ok()?;
        let subject = number(parts.next()?, 3)?;
        let detail = number(parts.next()?, 3)?;
        if parts.next().is_some() {
            return None;
        }
        Some((class, subject, detail))
    })();
    match parsed {
        Some(code) => (Some(code), after),
        None => (None, rest),
    }
}

fn number(digits: &str, digits_max: usize) -> Option<u16> {
    if digits.is_empty() || digits.len() > digits_max || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    digits.parse().ok()
}

fn unescape_percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '%' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(code: u16, enhanced: Option<(u8, u16, u16)>, text: &str) -> Reply {
        Reply {
            code,
            enhanced,
            text: text.to_string(),
        }
    }

    #[test]
    fn parses_code_enhanced_code_and_text() {
        assert_eq!(
            Reply::parse("554 5.7.1 Gtube pattern"),
            Ok(reply(554, Some((5, 7, 1)), "Gtube pattern"))
        );
        assert_eq!(
            Reply::parse("451 Try later"),
            Ok(reply(451, None, "Try later"))
        );
        assert_eq!(Reply::parse("550"), Ok(reply(550, None, "")));
        assert_eq!(
            Reply::parse("550 5.7.1"),
            Ok(reply(550, Some((5, 7, 1)), ""))
        );
        assert_eq!(
            Reply::parse("550 100% spam, 50%% sure"),
            Ok(reply(550, None, "100 spam, 50% sure"))
        );
    }

    #[test]
    fn multi_line_replies_join_their_texts() {
        assert_eq!(
            Reply::parse("550-5.7.1 first\r\n550 5.7.1 second"),
            Ok(reply(550, Some((5, 7, 1)), "first\nsecond"))
        );
        assert!(Reply::parse("550-first\r\n451 second").is_err());
    }

    #[test]
    fn only_4xx_and_5xx_of_a_matching_class() {
        assert!(Reply::parse("250 2.0.0 Ok").is_err());
        assert!(Reply::parse("600 x").is_err());
        assert!(Reply::parse("55").is_err());
        assert!(Reply::parse("").is_err());
        assert!(Reply::parse("5x0 no").is_err());
        assert!(Reply::parse("550x no").is_err());
        assert!(Reply::parse("550 4.7.1 mixed").is_err());
        assert!(Reply::parse("451 5.7.1 mixed").is_err());
    }
}
