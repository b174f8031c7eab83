//! Session tests through the public API only: golden transcripts (one file per command, plus
//! framing, limits and timeouts) and properties.

mod harness;

mod auth;
mod capa;
mod dele;
mod framing;
mod limits;
mod list;
mod noop;
mod pass;
mod props;
mod quit;
mod retr;
mod rset;
mod stat;
mod stls;
mod timeout;
mod top;
mod uidl;
mod user;
