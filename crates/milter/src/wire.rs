//! The protocol's numbers: command and reply codes, action and protocol flags, the steps of a
//! session. Values from libmilter's `include/libmilter/mfdef.h` (protocol version 6, Sendmail
//! 8.14), the same that Postfix's `src/milter/milter8.c` defines for itself.

/// The protocol version we speak (`SMFI_PROT_VERSION`).
pub const VERSION: u32 = 6;
/// The oldest version a filter may answer with: version 2 is the first with the negotiation
/// Postfix implements (milter8.c `milter8_event_masks`).
pub const VERSION_MIN: u32 = 2;
/// The longest body chunk (`MILTER_CHUNK_SIZE`): longer `SMFIC_BODY` data is split.
pub const CHUNK_BYTES_MAX: usize = 65535;

/// milter protocol: commands from the MTA (`SMFIC_*`).
pub mod command {
    pub const ABORT: u8 = b'A';
    pub const BODY: u8 = b'B';
    pub const CONNECT: u8 = b'C';
    pub const MACRO: u8 = b'D';
    pub const BODYEOB: u8 = b'E';
    pub const HELO: u8 = b'H';
    pub const QUIT_NC: u8 = b'K';
    pub const HEADER: u8 = b'L';
    pub const MAIL: u8 = b'M';
    pub const EOH: u8 = b'N';
    pub const OPTNEG: u8 = b'O';
    pub const QUIT: u8 = b'Q';
    pub const RCPT: u8 = b'R';
    pub const DATA: u8 = b'T';
    pub const UNKNOWN: u8 = b'U';
}

/// milter protocol: replies and modification requests from the filter (`SMFIR_*`).
pub mod reply {
    pub const ADDRCPT: u8 = b'+';
    pub const DELRCPT: u8 = b'-';
    pub const ADDRCPT_PAR: u8 = b'2';
    pub const SHUTDOWN: u8 = b'4';
    pub const ACCEPT: u8 = b'a';
    pub const REPLBODY: u8 = b'b';
    pub const CONTINUE: u8 = b'c';
    pub const DISCARD: u8 = b'd';
    pub const CHGFROM: u8 = b'e';
    pub const CONN_FAIL: u8 = b'f';
    pub const ADDHEADER: u8 = b'h';
    pub const INSHEADER: u8 = b'i';
    pub const SETSYMLIST: u8 = b'l';
    pub const CHGHEADER: u8 = b'm';
    pub const PROGRESS: u8 = b'p';
    pub const QUARANTINE: u8 = b'q';
    pub const REJECT: u8 = b'r';
    pub const SKIP: u8 = b's';
    pub const TEMPFAIL: u8 = b't';
    pub const REPLYCODE: u8 = b'y';
}

/// milter protocol: what a filter may do to a message (`SMFIF_*`, the OPTNEG actions word).
pub mod action {
    pub const ADDHDRS: u32 = 1 << 0;
    pub const CHGBODY: u32 = 1 << 1;
    pub const ADDRCPT: u32 = 1 << 2;
    pub const DELRCPT: u32 = 1 << 3;
    pub const CHGHDRS: u32 = 1 << 4;
    pub const QUARANTINE: u32 = 1 << 5;
    pub const CHGFROM: u32 = 1 << 6;
    pub const ADDRCPT_PAR: u32 = 1 << 7;
    pub const SETSYMLIST: u32 = 1 << 8;
    /// Every action of version 6 (`SMFI_CURR_ACTS`): what we offer, as Postfix does.
    pub const ALL: u32 = 0x1FF;
}

/// milter protocol: the OPTNEG protocol word (`SMFIP_*`). The MTA offers what it can do
/// without; the filter answers with the steps it does not want (`NO*`) and the steps it will
/// not reply to (`NR_*`).
pub mod protocol {
    pub const NOCONNECT: u32 = 1 << 0;
    pub const NOHELO: u32 = 1 << 1;
    pub const NOMAIL: u32 = 1 << 2;
    pub const NORCPT: u32 = 1 << 3;
    pub const NOBODY: u32 = 1 << 4;
    pub const NOHDRS: u32 = 1 << 5;
    pub const NOEOH: u32 = 1 << 6;
    pub const NR_HDR: u32 = 1 << 7;
    pub const NOUNKNOWN: u32 = 1 << 8;
    pub const NODATA: u32 = 1 << 9;
    /// The MTA understands `SMFIR_SKIP`.
    pub const SKIP: u32 = 1 << 10;
    /// The MTA sends rejected recipients too. Not offered: we do not.
    pub const RCPT_REJ: u32 = 1 << 11;
    pub const NR_CONN: u32 = 1 << 12;
    pub const NR_HELO: u32 = 1 << 13;
    pub const NR_MAIL: u32 = 1 << 14;
    pub const NR_RCPT: u32 = 1 << 15;
    pub const NR_DATA: u32 = 1 << 16;
    pub const NR_UNKN: u32 = 1 << 17;
    pub const NR_EOH: u32 = 1 << 18;
    pub const NR_BODY: u32 = 1 << 19;
    /// Header values keep their leading space, both ways.
    pub const HDR_LEADSPC: u32 = 1 << 20;

    /// Steps a filter may ask not to get (milter8.c `SMFIP_NOSEND_MASK`).
    pub const NO_SEND: u32 =
        NOCONNECT | NOHELO | NOMAIL | NORCPT | NOBODY | NOHDRS | NOEOH | NOUNKNOWN | NODATA;
    /// Steps a filter may decline to answer (milter8.c `SMFIP_NOREPLY_MASK`).
    pub const NO_REPLY: u32 =
        NR_CONN | NR_HELO | NR_MAIL | NR_RCPT | NR_DATA | NR_UNKN | NR_HDR | NR_EOH | NR_BODY;
    /// What we offer: every step may be left out or go unanswered, `SMFIR_SKIP`, and leading
    /// spaces (milter8.c `MILTER8_V6_PROTO_MASK` less `SMFIP_RCPT_REJ`).
    pub const OFFER: u32 = NO_SEND | NO_REPLY | SKIP | HDR_LEADSPC;
}

/// A step of an SMTP session that the MTA reports to a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Connect,
    Helo,
    Mail,
    Rcpt,
    Data,
    Header,
    EndOfHeaders,
    Body,
    EndOfMessage,
    Unknown,
}

impl Stage {
    /// The command that reports the step (`SMFIC_*`); also the stage byte of its macros.
    pub fn command(self) -> u8 {
        match self {
            Stage::Connect => command::CONNECT,
            Stage::Helo => command::HELO,
            Stage::Mail => command::MAIL,
            Stage::Rcpt => command::RCPT,
            Stage::Data => command::DATA,
            Stage::Header => command::HEADER,
            Stage::EndOfHeaders => command::EOH,
            Stage::Body => command::BODY,
            Stage::EndOfMessage => command::BODYEOB,
            Stage::Unknown => command::UNKNOWN,
        }
    }

    /// The `SMFIP_NO*` flag by which a filter declines the step; end of message has none.
    pub(crate) fn no_send_flag(self) -> u32 {
        match self {
            Stage::Connect => protocol::NOCONNECT,
            Stage::Helo => protocol::NOHELO,
            Stage::Mail => protocol::NOMAIL,
            Stage::Rcpt => protocol::NORCPT,
            Stage::Data => protocol::NODATA,
            Stage::Header => protocol::NOHDRS,
            Stage::EndOfHeaders => protocol::NOEOH,
            Stage::Body => protocol::NOBODY,
            Stage::Unknown => protocol::NOUNKNOWN,
            Stage::EndOfMessage => 0,
        }
    }

    /// The `SMFIP_NR_*` flag by which a filter declines to answer; end of message has none.
    pub(crate) fn no_reply_flag(self) -> u32 {
        match self {
            Stage::Connect => protocol::NR_CONN,
            Stage::Helo => protocol::NR_HELO,
            Stage::Mail => protocol::NR_MAIL,
            Stage::Rcpt => protocol::NR_RCPT,
            Stage::Data => protocol::NR_DATA,
            Stage::Header => protocol::NR_HDR,
            Stage::EndOfHeaders => protocol::NR_EOH,
            Stage::Body => protocol::NR_BODY,
            Stage::Unknown => protocol::NR_UNKN,
            Stage::EndOfMessage => 0,
        }
    }

    /// The macro list (`SMFIM_*`) that a filter's `SMFIF_SETSYMLIST` lists replace for the
    /// step. Postfix sends the end-of-header macros with each header and the end-of-data
    /// macros with each body chunk (milter8.c `milter8_header`, `milter8_body`).
    pub(crate) fn symlist(self) -> Option<usize> {
        match self {
            Stage::Connect => Some(0),
            Stage::Helo => Some(1),
            Stage::Mail => Some(2),
            Stage::Rcpt => Some(3),
            Stage::Data => Some(4),
            Stage::Body | Stage::EndOfMessage => Some(5),
            Stage::Header | Stage::EndOfHeaders => Some(6),
            Stage::Unknown => None,
        }
    }

    /// Connect and HELO decide for the whole connection (milter8.c `IN_CONNECT_EVENT`).
    pub fn is_connection_level(self) -> bool {
        matches!(self, Stage::Connect | Stage::Helo)
    }
}
