//! The mail file system end to end: the real `mailstow` binary, a real FUSE mount, and real
//! Dovecot servers (private instances on loopback) as the accounts. One test binary, a file
//! per concern.

mod cli;
mod hung;
mod posix;
mod replicas;
mod rewrite;
mod rig;
mod transfer;
mod versions;
