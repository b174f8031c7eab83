//! The Sendmail milter protocol, version 6, from the MTA's side (docs/spam.md 4), as Postfix
//! speaks it (`src/milter/milter8.c`), with libmilter's numbers (`include/libmilter/mfdef.h`).
//! Sans-IO: no socket, clock or runtime; `crates/filter` does the I/O.
//!
//! # The protocol
//!
//! Every packet, both ways, is a 4-byte big-endian length, a 1-byte code and its data. The
//! MTA opens with `SMFIC_OPTNEG` (`Offer`): its version, the actions a filter may take
//! (`SMFIF_*`) and the protocol steps it can do without (`SMFIP_*`). The filter answers with
//! its version, the actions it wants and the steps it does not want or will not answer;
//! `Negotiated` holds the result. Then, per SMTP session:
//!
//! ```text
//! MTA                                   filter
//! D C macros, C connect            ->   (reply unless NR_CONN)
//! D H macros, H helo               ->   (reply unless NR_HELO)
//! D M macros, M <from> args        ->   (reply unless NR_MAIL)
//! D R macros, R <to> args          ->   (reply unless NR_RCPT)      per recipient
//! D T macros, T                    ->   (reply unless NR_DATA)
//! L name value                     ->   (reply unless NR_HDR)       per header field
//! N                                ->   (reply unless NR_EOH)
//! B chunk                          ->   (reply unless NR_BODY)      per 65,535 bytes
//! D E macros, E                    ->   modifications..., then the final word
//! A (abort: RSET, next MAIL), Q (quit)  no reply
//! ```
//!
//! A step the filter declined (`SMFIP_NO*`) is not sent; a step it will not answer
//! (`SMFIP_NR_*`) is sent without waiting. A reply is the final word of its step (`c`, `a`,
//! `r`, `t`, `d`, `y`, `s`), or `p` (progress: keep waiting), or at the end of the message a
//! modification (`h`, `m`, `i`, `+`, `2`, `-`, `b`, `e`) or `q` (quarantine) before the final
//! word. `Step` folds a step's replies into its `Decision` and `Modification`s; `apply` puts
//! the header and body changes into the message.
//!
//! # Invariants
//!
//! - The `Decoder` never holds more than one packet of at most `reply_bytes_max` bytes plus
//!   what it was fed since the last complete packet; a packet claiming more is an error before
//!   its data arrives, and its claimed size is never allocated. No input makes it panic.
//! - Encoded strings never contain a NUL (a NUL ends a C string early; the encoder ends each
//!   string there), and no body packet is longer than 65,535 bytes.
//! - A filter's SMTP reply is 4xx or 5xx, or it is a protocol error: a filter can never make
//!   a refusal read as success.
//! - `apply` never lets a header value end the header section early.

mod command;
mod decode;
mod header;
mod modify;
mod negotiate;
mod reply;
mod step;
mod wire;

pub use command::{ClientAddress, Command};
pub use decode::{DecodeError, Decoder, Response};
pub use modify::{Modification, apply};
pub use negotiate::{Negotiated, NegotiationError, Offer};
pub use reply::{Decision, Reply};
pub use step::{Fold, Step, StepError};
pub use wire::reply as replies;
pub use wire::{
    CHUNK_BYTES_MAX, Stage, VERSION, VERSION_MIN, action, command as commands, protocol,
};

/// A header field as a filter gets it (`SMFIC_HEADER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderField {
    pub name: Vec<u8>,
    /// What follows the colon: without the one space after it unless `SMFIP_HDR_LEADSPC`,
    /// folded lines joined by LF (as Sendmail sends them), without the final line end.
    pub value: Vec<u8>,
}

/// A message's header fields as the filter gets them, and its body (`SMFIC_BODY` data).
/// `leading_space` is `Negotiated::leading_space`. These are the fields `apply` counts.
pub fn header_fields(message: &[u8], leading_space: bool) -> (Vec<HeaderField>, &[u8]) {
    let split = header::split(message);
    let fields = split
        .fields
        .iter()
        .map(|field| HeaderField {
            name: field.name.to_vec(),
            value: field.value_for_filter(leading_space),
        })
        .collect();
    (fields, split.body)
}
