//! A filter's packets, decoded into typed responses.
//!
//! The decoder is fed bytes as they arrive and hands out one response per complete packet.
//! Its memory is bounded by `reply_bytes_max` given at construction: a packet that claims more
//! is an error as soon as its 4-byte length arrives, and the claimed size is never allocated.
//! The first error is final: the stream is out of step, so the connection must go.

use std::fmt;

use crate::reply::Reply;
use crate::wire::reply as code;

/// One packet from a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// `SMFIC_OPTNEG` answered: the filter's version, the actions it may take, the protocol
    /// flags it wants, and the macro lists it asks for (`SMFIF_SETSYMLIST`: an `SMFIM_*`
    /// list number and the names, space-separated).
    OptNeg {
        version: u32,
        actions: u32,
        protocol: u32,
        symlists: Vec<(u32, String)>,
    },
    /// `SMFIR_CONTINUE`.
    Continue,
    /// `SMFIR_ACCEPT`.
    Accept,
    /// `SMFIR_REJECT`.
    Reject,
    /// `SMFIR_TEMPFAIL`.
    TempFail,
    /// `SMFIR_DISCARD`.
    Discard,
    /// `SMFIR_REPLYCODE`, checked: 4xx or 5xx.
    ReplyCode(Reply),
    /// `SMFIR_QUARANTINE` with its reason.
    Quarantine(String),
    /// `SMFIR_ADDHEADER`: append a field.
    AddHeader { name: String, value: String },
    /// `SMFIR_CHGHEADER`: change (empty value: delete) the `index`th field of that name.
    ChangeHeader {
        index: u32,
        name: String,
        value: String,
    },
    /// `SMFIR_INSHEADER`: insert a field after the first `index` fields (0: at the top).
    InsertHeader {
        index: u32,
        name: String,
        value: String,
    },
    /// `SMFIR_ADDRCPT`.
    AddRecipient(String),
    /// `SMFIR_ADDRCPT_PAR`: a recipient and its ESMTP arguments.
    AddRecipientPar {
        address: String,
        args: Option<String>,
    },
    /// `SMFIR_DELRCPT`.
    DeleteRecipient(String),
    /// `SMFIR_REPLBODY`: a piece of the new body (several packets make the whole).
    ReplaceBody(Vec<u8>),
    /// `SMFIR_CHGFROM`: a new envelope sender and its ESMTP arguments.
    ChangeFrom {
        address: String,
        args: Option<String>,
    },
    /// `SMFIR_PROGRESS`: still working; the MTA keeps waiting.
    Progress,
    /// `SMFIR_SETSYMLIST` as a packet of its own (libmilter sends the lists inside the OPTNEG
    /// reply instead; see `OptNeg::symlists`).
    SetSymList { list: u32, names: String },
    /// `SMFIR_SKIP`: no more of this kind of step for this message.
    Skip,
    /// `SMFIR_SHUTDOWN`: the filter is going away (Postfix answers the client 421).
    Shutdown,
    /// `SMFIR_CONN_FAIL`: the filter asks that the SMTP connection fail.
    ConnFail,
}

/// Why the bytes from a filter are not a valid packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The packet claims more bytes than `reply_bytes_max`.
    TooLong { length: u32, max: usize },
    /// A length of 0: not even a command byte (Postfix milter8.c: "bad packet length").
    Empty,
    /// A reply code libmilter does not define.
    UnknownReply(u8),
    /// The data does not fit the reply.
    Malformed { reply: u8, why: &'static str },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLong { length, max } => {
                write!(f, "a packet of {length} bytes, more than the {max} allowed")
            }
            DecodeError::Empty => write!(f, "a packet of length 0"),
            DecodeError::UnknownReply(byte) => {
                write!(f, "unknown reply {:?} ({byte:#04x})", char::from(*byte))
            }
            DecodeError::Malformed { reply, why } => {
                write!(f, "malformed reply '{}': {why}", char::from(*reply))
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Bytes in, responses out.
#[derive(Debug)]
pub struct Decoder {
    buffer: Vec<u8>,
    reply_bytes_max: usize,
    failed: Option<DecodeError>,
}

impl Decoder {
    /// A decoder that refuses packets longer than `reply_bytes_max` bytes (command byte and
    /// data).
    pub fn new(reply_bytes_max: usize) -> Decoder {
        Decoder {
            buffer: Vec::new(),
            reply_bytes_max,
            failed: None,
        }
    }

    /// Appends bytes read from the filter.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buffer.extend_from_slice(bytes);
        }
    }

    /// Bytes received and not yet handed out as a response.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The next complete response; `Ok(None)` until one has arrived whole. After an error,
    /// every call returns that error.
    pub fn next_response(&mut self) -> Result<Option<Response>, DecodeError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match self.take() {
            Ok(response) => Ok(response),
            Err(error) => {
                self.buffer = Vec::new();
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    fn take(&mut self) -> Result<Option<Response>, DecodeError> {
        let Some(header) = self.buffer.first_chunk::<4>() else {
            return Ok(None);
        };
        let length = u32::from_be_bytes(*header);
        if length == 0 {
            return Err(DecodeError::Empty);
        }
        let max = self.reply_bytes_max;
        let Ok(size) = usize::try_from(length) else {
            return Err(DecodeError::TooLong { length, max });
        };
        if size > max {
            return Err(DecodeError::TooLong { length, max });
        }
        let Some(packet) = self.buffer.get(4..4 + size) else {
            return Ok(None);
        };
        let response = parse(packet[0], &packet[1..])?;
        self.buffer.drain(..4 + size);
        Ok(Some(response))
    }
}

/// Decodes one packet's data by its reply code.
fn parse(reply: u8, data: &[u8]) -> Result<Response, DecodeError> {
    let malformed = |why| DecodeError::Malformed { reply, why };
    let mut fields = Fields { data, reply };
    let response = match reply {
        b'O' => fields.optneg()?,
        code::CONTINUE => Response::Continue,
        code::ACCEPT => Response::Accept,
        code::REJECT => Response::Reject,
        code::TEMPFAIL => Response::TempFail,
        code::DISCARD => Response::Discard,
        code::PROGRESS => Response::Progress,
        code::SKIP => Response::Skip,
        code::SHUTDOWN => Response::Shutdown,
        code::CONN_FAIL => Response::ConnFail,
        code::REPLYCODE => return reply_code(data).map_err(malformed),
        code::QUARANTINE => Response::Quarantine(fields.text()?),
        code::ADDHEADER => Response::AddHeader {
            name: fields.name()?,
            value: fields.text()?,
        },
        code::CHGHEADER | code::INSHEADER => {
            let index = fields.word()?;
            let name = fields.name()?;
            let value = fields.text()?;
            if reply == code::CHGHEADER {
                Response::ChangeHeader { index, name, value }
            } else {
                Response::InsertHeader { index, name, value }
            }
        }
        code::ADDRCPT => Response::AddRecipient(fields.text()?),
        code::DELRCPT => Response::DeleteRecipient(fields.text()?),
        code::ADDRCPT_PAR | code::CHGFROM => {
            let (address, args) = fields.address_and_args()?;
            if reply == code::CHGFROM {
                Response::ChangeFrom { address, args }
            } else {
                Response::AddRecipientPar { address, args }
            }
        }
        code::REPLBODY => {
            fields.data = &[];
            Response::ReplaceBody(data.to_vec())
        }
        code::SETSYMLIST => Response::SetSymList {
            list: fields.word()?,
            names: fields.text()?,
        },
        other => return Err(DecodeError::UnknownReply(other)),
    };
    if !fields.data.is_empty() {
        // Postfix milter8.c: "reply was followed by data bytes" is a protocol error.
        return Err(malformed("data left over after the reply's fields"));
    }
    Ok(response)
}

/// `SMFIR_REPLYCODE`: the text, NUL-terminated as libmilter sends it (Postfix also takes it
/// without), checked.
fn reply_code(data: &[u8]) -> Result<Response, &'static str> {
    let raw = data.strip_suffix(&[0]).unwrap_or(data);
    if raw.contains(&0) {
        return Err("a NUL inside the reply text");
    }
    Reply::parse(&String::from_utf8_lossy(raw)).map(Response::ReplyCode)
}

/// The data of a packet, read field by field.
struct Fields<'a> {
    data: &'a [u8],
    reply: u8,
}

impl Fields<'_> {
    fn malformed(&self, why: &'static str) -> DecodeError {
        DecodeError::Malformed {
            reply: self.reply,
            why,
        }
    }

    /// The OPTNEG answer: version, actions, protocol, then macro lists (a list number and
    /// the names) to the end.
    fn optneg(&mut self) -> Result<Response, DecodeError> {
        let version = self.word()?;
        let actions = self.word()?;
        let protocol = self.word()?;
        let mut symlists = Vec::new();
        while !self.data.is_empty() {
            let list = self.word()?;
            symlists.push((list, self.text()?));
        }
        Ok(Response::OptNeg {
            version,
            actions,
            protocol,
            symlists,
        })
    }

    /// An address and, if more data follows, its ESMTP arguments.
    fn address_and_args(&mut self) -> Result<(String, Option<String>), DecodeError> {
        let address = self.text()?;
        let args = if self.data.is_empty() {
            None
        } else {
            Some(self.text()?)
        };
        Ok((address, args))
    }

    /// A big-endian 32-bit number.
    fn word(&mut self) -> Result<u32, DecodeError> {
        let Some((word, rest)) = self.data.split_first_chunk::<4>() else {
            return Err(self.malformed("too short for a 32-bit number"));
        };
        self.data = rest;
        Ok(u32::from_be_bytes(*word))
    }

    /// A NUL-terminated string; bytes that are not UTF-8 become U+FFFD.
    fn text(&mut self) -> Result<String, DecodeError> {
        let Some(end) = self.data.iter().position(|&b| b == 0) else {
            return Err(self.malformed("a string without its NUL"));
        };
        let text = String::from_utf8_lossy(&self.data[..end]).into_owned();
        self.data = &self.data[end + 1..];
        Ok(text)
    }

    /// A header field name: printable US-ASCII but the colon (RFC 5322 2.2, `ftext`).
    fn name(&mut self) -> Result<String, DecodeError> {
        let name = self.text()?;
        if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b) && b != b':') {
            return Err(self.malformed("not a header field name"));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(code: u8, data: &[u8]) -> Vec<u8> {
        let mut out = ((data.len() + 1) as u32).to_be_bytes().to_vec();
        out.push(code);
        out.extend_from_slice(data);
        out
    }

    fn decode(bytes: &[u8]) -> Result<Option<Response>, DecodeError> {
        let mut decoder = Decoder::new(1024);
        decoder.feed(bytes);
        decoder.next_response()
    }

    #[test]
    fn optneg_with_and_without_macro_lists() {
        assert_eq!(
            decode(b"\0\0\0\x0dO\0\0\0\x06\0\0\0\x01\0\x10\0\0"),
            Ok(Some(Response::OptNeg {
                version: 6,
                actions: 1,
                protocol: 0x0010_0000,
                symlists: vec![],
            }))
        );
        assert_eq!(
            decode(b"\0\0\0\x1fO\0\0\0\x06\0\0\x01\0\0\0\0\0\0\0\0\x02i {mail_addr}\0"),
            Ok(Some(Response::OptNeg {
                version: 6,
                actions: 0x100,
                protocol: 0,
                symlists: vec![(2, "i {mail_addr}".to_string())],
            }))
        );
        assert!(decode(b"\0\0\0\x05O\0\0\0\x06").is_err());
    }

    #[test]
    fn the_one_letter_replies() {
        for (code, response) in [
            (b'c', Response::Continue),
            (b'a', Response::Accept),
            (b'r', Response::Reject),
            (b't', Response::TempFail),
            (b'd', Response::Discard),
            (b'p', Response::Progress),
            (b's', Response::Skip),
            (b'4', Response::Shutdown),
            (b'f', Response::ConnFail),
        ] {
            assert_eq!(decode(&packet(code, b"")), Ok(Some(response)));
            assert!(matches!(
                decode(&packet(code, b"x")),
                Err(DecodeError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn reply_code_is_parsed_and_checked() {
        assert_eq!(
            decode(&packet(b'y', b"554 5.7.1 Gtube pattern\0")),
            Ok(Some(Response::ReplyCode(Reply {
                code: 554,
                enhanced: Some((5, 7, 1)),
                text: "Gtube pattern".to_string(),
            })))
        );
        assert!(decode(&packet(b'y', b"250 ok\0")).is_err());
        assert!(decode(&packet(b'y', b"550 a\0b\0")).is_err());
    }

    #[test]
    fn modifications() {
        assert_eq!(
            decode(&packet(b'h', b"X-Spam\0yes\0")),
            Ok(Some(Response::AddHeader {
                name: "X-Spam".into(),
                value: "yes".into()
            }))
        );
        assert_eq!(
            decode(&packet(b'm', b"\0\0\0\x02Subject\0\0")),
            Ok(Some(Response::ChangeHeader {
                index: 2,
                name: "Subject".into(),
                value: String::new()
            }))
        );
        assert_eq!(
            decode(&packet(b'i', b"\0\0\0\0X-A\0 v\0")),
            Ok(Some(Response::InsertHeader {
                index: 0,
                name: "X-A".into(),
                value: " v".into()
            }))
        );
        assert_eq!(
            decode(&packet(b'+', b"<c@example.org>\0")),
            Ok(Some(Response::AddRecipient("<c@example.org>".into())))
        );
        assert_eq!(
            decode(&packet(b'-', b"<b@example.net>\0")),
            Ok(Some(Response::DeleteRecipient("<b@example.net>".into())))
        );
        assert_eq!(
            decode(&packet(b'2', b"<c@example.org>\0NOTIFY=NEVER\0")),
            Ok(Some(Response::AddRecipientPar {
                address: "<c@example.org>".into(),
                args: Some("NOTIFY=NEVER".into())
            }))
        );
        assert_eq!(
            decode(&packet(b'e', b"<new@example.org>\0")),
            Ok(Some(Response::ChangeFrom {
                address: "<new@example.org>".into(),
                args: None
            }))
        );
        assert_eq!(
            decode(&packet(b'b', b"new body\r\n")),
            Ok(Some(Response::ReplaceBody(b"new body\r\n".to_vec())))
        );
        assert_eq!(
            decode(&packet(b'q', b"held\0")),
            Ok(Some(Response::Quarantine("held".into())))
        );
        assert_eq!(
            decode(&packet(b'l', b"\0\0\0\x01{x}\0")),
            Ok(Some(Response::SetSymList {
                list: 1,
                names: "{x}".into()
            }))
        );
    }

    #[test]
    fn bad_names_missing_nuls_and_leftovers_are_errors() {
        assert!(decode(&packet(b'h', b"Bad Name\0v\0")).is_err());
        assert!(decode(&packet(b'h', b"Bad:Name\0v\0")).is_err());
        assert!(decode(&packet(b'h', b"\0v\0")).is_err());
        assert!(decode(&packet(b'h', b"X\0v")).is_err());
        assert!(decode(&packet(b'+', b"a\0b\0")).is_err());
        assert!(decode(&packet(b'm', b"\0\0")).is_err());
    }

    #[test]
    fn unknown_reply_and_bad_lengths() {
        assert_eq!(
            decode(&packet(b'Z', b"")),
            Err(DecodeError::UnknownReply(b'Z'))
        );
        assert_eq!(decode(b"\0\0\0\0c"), Err(DecodeError::Empty));
        assert_eq!(
            decode(b"\xff\xff\xff\xffc"),
            Err(DecodeError::TooLong {
                length: u32::MAX,
                max: 1024
            })
        );
    }

    #[test]
    fn split_input_and_several_packets() {
        let mut decoder = Decoder::new(1024);
        let mut bytes = packet(b'h', b"X-A\0a\0");
        bytes.extend(packet(b'c', b""));
        for byte in &bytes[..bytes.len() - 1] {
            decoder.feed(std::slice::from_ref(byte));
        }
        assert!(matches!(
            decoder.next_response(),
            Ok(Some(Response::AddHeader { .. }))
        ));
        assert_eq!(decoder.next_response(), Ok(None));
        decoder.feed(&bytes[bytes.len() - 1..]);
        assert_eq!(decoder.next_response(), Ok(Some(Response::Continue)));
        assert_eq!(decoder.next_response(), Ok(None));
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn a_packet_over_the_bound_fails_before_its_data_arrives() {
        let mut decoder = Decoder::new(16);
        decoder.feed(&17u32.to_be_bytes());
        assert!(matches!(
            decoder.next_response(),
            Err(DecodeError::TooLong { length: 17, .. })
        ));
        decoder.feed(b"more");
        assert!(decoder.next_response().is_err());
        assert_eq!(decoder.buffered(), 0);
        let mut exact = Decoder::new(16);
        exact.feed(&packet(b'b', &[b'x'; 15]));
        assert!(matches!(
            exact.next_response(),
            Ok(Some(Response::ReplaceBody(_)))
        ));
    }
}
