//! Session tests through the public API only: golden transcripts (one file per command, plus
//! framing, limits and deadlines) and properties.

mod harness;

mod authenticate;
mod capability;
mod checkscript;
mod deletescript;
mod framing;
mod getscript;
mod havespace;
mod limits;
mod listscripts;
mod logout;
mod noop;
mod props;
mod putscript;
mod renamescript;
mod setactive;
mod starttls;
mod timeouts;
mod unauthenticate;
