//! `smtp::Session` in mail exchange and submission mode (docs/fuzzing.md).
//!
//! Input: a selector byte (bit 0 submission, 2 peer on TLS, 3 STARTTLS offered, 4 AUTH
//! without TLS, 5 AUTH required, 6 small limits), a chunk-size byte, then client bytes
//! with flights separated by `\xff\xfe`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mailstow_fuzz::smtp_shell::fuzz(smtp::Mode::Mx, data);
});
