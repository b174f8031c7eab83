//! `smtp::Session` in LMTP mode (docs/fuzzing.md): one reply per recipient after the data.
//!
//! Input: as smtp_session (bit 0 of the selector is ignored).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mailstow_fuzz::smtp_shell::fuzz(smtp::Mode::Lmtp, data);
});
