//! Golden transcripts and properties of `smtp::Session`, through its public API only.

mod auth;
mod bdat;
mod budget;
mod commands;
mod defences;
mod lmtp;
mod received;
mod shell;
mod split;
mod starttls;
