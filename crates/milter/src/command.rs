//! Commands from the MTA to a filter, as wire packets.
//!
//! milter protocol: every packet is a 4-byte big-endian length (of what follows it), a 1-byte
//! command and its data. Strings are C strings: NUL-terminated, so a NUL inside one would end
//! it early; the encoder ends each string at its first NUL, as a C MTA would (Postfix's are C
//! strings). Numbers are big-endian.

use std::net::IpAddr;

use crate::wire::{CHUNK_BYTES_MAX, Stage, command};

/// Where the SMTP client connected from (the `SMFIC_CONNECT` family and address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAddress<'a> {
    /// `'4'` or `'6'` by the address, then the port and the address as text.
    Inet { ip: IpAddr, port: u16 },
    /// `'L'`: a local socket, port 0 and its path.
    Unix { path: &'a str },
    /// `'U'`: unknown; nothing follows the family.
    Unknown,
}

/// One command to a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `SMFIC_OPTNEG`: our version, the actions a filter may take, the protocol steps it may
    /// leave out (`crate::Offer`).
    OptNeg {
        version: u32,
        actions: u32,
        protocol: u32,
    },
    /// `SMFIC_MACRO`: the macros of the step that follows, each name and value a C string.
    Macro {
        stage: Stage,
        macros: &'a [(&'a str, &'a str)],
    },
    /// `SMFIC_CONNECT`: the client's host name (`[ip]` without reverse DNS) and address.
    Connect {
        hostname: &'a str,
        address: ClientAddress<'a>,
    },
    /// `SMFIC_HELO`: the HELO or EHLO argument.
    Helo(&'a str),
    /// `SMFIC_MAIL`: the sender in angle brackets (`<>` for the null sender), then each ESMTP
    /// argument, each a C string.
    Mail {
        address: &'a str,
        args: &'a [String],
    },
    /// `SMFIC_RCPT`: the recipient in angle brackets, then each ESMTP argument.
    Rcpt {
        address: &'a str,
        args: &'a [String],
    },
    /// `SMFIC_DATA`.
    Data,
    /// `SMFIC_HEADER`: a header field's name and value (folded lines joined by LF).
    Header { name: &'a [u8], value: &'a [u8] },
    /// `SMFIC_EOH`.
    EndOfHeaders,
    /// `SMFIC_BODY`: body bytes. Data longer than `CHUNK_BYTES_MAX` is written as several
    /// packets, since a filter refuses longer ones (libmilter `MILTER_MAX_DATA_SIZE`).
    Body(&'a [u8]),
    /// `SMFIC_BODYEOB`: the end of the message; the filter's modifications and final word
    /// follow.
    EndOfMessage,
    /// `SMFIC_ABORT`: the transaction ended (RSET, or a new MAIL); no reply.
    Abort,
    /// `SMFIC_QUIT`: the connection ends; no reply.
    Quit,
    /// `SMFIC_QUIT_NC`: the connection ends, a new one will follow; no reply.
    QuitNewConnection,
}

impl Command<'_> {
    /// Appends the command's packet(s) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Command::OptNeg {
                version,
                actions,
                protocol,
            } => {
                let at = begin(out, command::OPTNEG);
                for word in [version, actions, protocol] {
                    out.extend_from_slice(&word.to_be_bytes());
                }
                finish(out, at);
            }
            Command::Macro { stage, macros } => {
                let at = begin(out, command::MACRO);
                out.push(stage.command());
                for (name, value) in macros {
                    c_string(out, name.as_bytes());
                    c_string(out, value.as_bytes());
                }
                finish(out, at);
            }
            Command::Connect { hostname, address } => {
                let at = begin(out, command::CONNECT);
                c_string(out, hostname.as_bytes());
                connect_address(out, address);
                finish(out, at);
            }
            Command::Helo(name) => {
                let at = begin(out, command::HELO);
                c_string(out, name.as_bytes());
                finish(out, at);
            }
            Command::Mail { address, args } => envelope(out, command::MAIL, address, args),
            Command::Rcpt { address, args } => envelope(out, command::RCPT, address, args),
            Command::Data => empty(out, command::DATA),
            Command::Header { name, value } => {
                let at = begin(out, command::HEADER);
                c_string(out, name);
                c_string(out, value);
                finish(out, at);
            }
            Command::EndOfHeaders => empty(out, command::EOH),
            Command::Body(bytes) => {
                for chunk in bytes.chunks(CHUNK_BYTES_MAX) {
                    let at = begin(out, command::BODY);
                    out.extend_from_slice(chunk);
                    finish(out, at);
                }
            }
            Command::EndOfMessage => empty(out, command::BODYEOB),
            Command::Abort => empty(out, command::ABORT),
            Command::Quit => empty(out, command::QUIT),
            Command::QuitNewConnection => empty(out, command::QUIT_NC),
        }
    }

    /// The command's packet(s) as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// Writes a length placeholder and the command byte; returns where the length goes.
fn begin(out: &mut Vec<u8>, command: u8) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, command]);
    at
}

/// Fills in the length: the command byte and the data.
fn finish(out: &mut [u8], at: usize) {
    let length = out.len() - at - 4;
    // The longest packet we write is a body chunk (65,536 bytes) or a header or envelope
    // line the SMTP session bounded; none is near 4 GiB.
    let length = u32::try_from(length).unwrap_or(u32::MAX);
    out[at..at + 4].copy_from_slice(&length.to_be_bytes());
}

fn empty(out: &mut Vec<u8>, command: u8) {
    let at = begin(out, command);
    finish(out, at);
}

/// A C string: the bytes up to the first NUL, then a NUL.
fn c_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    out.extend_from_slice(&bytes[..end]);
    out.push(0);
}

fn connect_address(out: &mut Vec<u8>, address: ClientAddress<'_>) {
    match address {
        ClientAddress::Inet { ip, port } => {
            out.push(if ip.is_ipv4() { b'4' } else { b'6' });
            out.extend_from_slice(&port.to_be_bytes());
            c_string(out, ip.to_string().as_bytes());
        }
        ClientAddress::Unix { path } => {
            out.push(b'L');
            out.extend_from_slice(&0u16.to_be_bytes());
            c_string(out, path.as_bytes());
        }
        ClientAddress::Unknown => out.push(b'U'),
    }
}

/// MAIL and RCPT: the address in angle brackets (added when missing), then the arguments
/// (milter8.c sends smtpd's argv: `<address>` and each ESMTP parameter).
fn envelope(out: &mut Vec<u8>, command: u8, address: &str, args: &[String]) {
    let at = begin(out, command);
    if address.starts_with('<') && address.ends_with('>') && address.len() >= 2 {
        c_string(out, address.as_bytes());
    } else {
        c_string(out, format!("<{address}>").as_bytes());
    }
    for arg in args {
        c_string(out, arg.as_bytes());
    }
    finish(out, at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{action, protocol};

    fn bytes(command: Command<'_>) -> Vec<u8> {
        command.to_bytes()
    }

    #[test]
    fn optneg_is_three_words() {
        let packet = bytes(Command::OptNeg {
            version: 6,
            actions: action::ALL,
            protocol: protocol::OFFER,
        });
        assert_eq!(
            packet,
            b"\0\0\0\x0dO\0\0\0\x06\0\0\x01\xff\0\x1f\xf7\xff".to_vec()
        );
    }

    #[test]
    fn macros_are_stage_then_name_value_pairs() {
        let packet = bytes(Command::Macro {
            stage: Stage::Connect,
            macros: &[("j", "mx.example"), ("{daemon_name}", "mailstow")],
        });
        assert_eq!(
            packet,
            b"\0\0\0\x26DCj\0mx.example\0{daemon_name}\0mailstow\0".to_vec()
        );
    }

    #[test]
    fn connect_carries_family_port_and_address() {
        let v4 = bytes(Command::Connect {
            hostname: "[192.0.2.1]",
            address: ClientAddress::Inet {
                ip: "192.0.2.1".parse().unwrap(),
                port: 4321,
            },
        });
        assert_eq!(
            v4,
            b"\0\0\0\x1aC[192.0.2.1]\x004\x10\xe1192.0.2.1\0".to_vec()
        );
        let v6 = bytes(Command::Connect {
            hostname: "host.example",
            address: ClientAddress::Inet {
                ip: "2001:db8::1".parse().unwrap(),
                port: 25,
            },
        });
        assert_eq!(
            v6,
            b"\0\0\0\x1dChost.example\x006\0\x192001:db8::1\0".to_vec()
        );
        let local = bytes(Command::Connect {
            hostname: "localhost",
            address: ClientAddress::Unix { path: "/run/s" },
        });
        assert_eq!(local, b"\0\0\0\x15Clocalhost\0L\0\0/run/s\0".to_vec());
        let unknown = bytes(Command::Connect {
            hostname: "unknown",
            address: ClientAddress::Unknown,
        });
        assert_eq!(unknown, b"\0\0\0\x0aCunknown\0U".to_vec());
    }

    #[test]
    fn mail_and_rcpt_put_the_address_in_brackets_then_the_args() {
        let args = vec!["SIZE=100".to_string(), "BODY=8BITMIME".to_string()];
        let mail = bytes(Command::Mail {
            address: "a@example.org",
            args: &args,
        });
        assert_eq!(
            mail,
            b"\0\0\0\x28M<a@example.org>\0SIZE=100\0BODY=8BITMIME\0".to_vec()
        );
        let null_sender = bytes(Command::Mail {
            address: "<>",
            args: &[],
        });
        assert_eq!(null_sender, b"\0\0\0\x04M<>\0".to_vec());
        let empty = bytes(Command::Mail {
            address: "",
            args: &[],
        });
        assert_eq!(empty, null_sender);
        let rcpt = bytes(Command::Rcpt {
            address: "<b@example.net>",
            args: &[],
        });
        assert_eq!(rcpt, b"\0\0\0\x11R<b@example.net>\0".to_vec());
    }

    #[test]
    fn helo_header_and_the_empty_commands() {
        assert_eq!(
            bytes(Command::Helo("client.example")),
            b"\0\0\0\x10Hclient.example\0".to_vec()
        );
        assert_eq!(
            bytes(Command::Header {
                name: b"Subject",
                value: b"hi\n\tthere",
            }),
            b"\0\0\0\x13LSubject\0hi\n\tthere\0".to_vec()
        );
        for (command, code) in [
            (Command::Data, b'T'),
            (Command::EndOfHeaders, b'N'),
            (Command::EndOfMessage, b'E'),
            (Command::Abort, b'A'),
            (Command::Quit, b'Q'),
            (Command::QuitNewConnection, b'K'),
        ] {
            assert_eq!(bytes(command), vec![0, 0, 0, 1, code]);
        }
    }

    #[test]
    fn a_nul_ends_a_string_as_in_c() {
        assert_eq!(bytes(Command::Helo("a\0b")), b"\0\0\0\x03Ha\0".to_vec());
    }

    #[test]
    fn body_is_split_into_chunks_of_65535_bytes() {
        assert_eq!(
            bytes(Command::Body(b"hi\r\n")),
            b"\0\0\0\x05Bhi\r\n".to_vec()
        );
        let body = vec![b'x'; CHUNK_BYTES_MAX * 2 + 10];
        let packets = bytes(Command::Body(&body));
        assert_eq!(packets.len(), body.len() + 3 * 5);
        assert_eq!(&packets[..5], &[0, 1, 0, 0, b'B']);
        let second = 5 + CHUNK_BYTES_MAX;
        assert_eq!(&packets[second..second + 5], &[0, 1, 0, 0, b'B']);
        let third = 2 * second;
        assert_eq!(&packets[third..third + 5], &[0, 0, 0, 11, b'B']);
        assert!(bytes(Command::Body(b"")).is_empty());
    }
}
