//! The IMAP framer (crates/imap/src/framer.rs, through `imap::fuzzing::Framer`;
//! docs/fuzzing.md): lines, literals and every size limit, before any parsing.
//!
//! Input: a selector byte (bit 0 small limits; the high nibble is the number of frames after
//! which the client logs in, 15 never), a chunk-size byte, then the client's bytes. Checks:
//! a command is whole lines and never longer than `command_bytes_max` plus one line; the
//! framer holds at most one line's worth of unframed input beyond the last feed; and the
//! frames do not depend on how the input was split.
#![no_main]

use imap::Config;
use imap::fuzzing::Framer;
use libfuzzer_sys::fuzz_target;
use mailstow_fuzz::Split;

fn config(selector: u8) -> Config {
    if selector & 1 == 0 {
        return Config::default();
    }
    // Small enough that short inputs reach every limit. Lines stay longer than a tag (64
    // bytes) can be, as in any real configuration.
    Config {
        line_bytes_max: 120,
        literal_bytes_max: 60,
        command_bytes_max: 300,
        nesting_depth_max: 4,
        prelogin_line_bytes_max: 90,
        prelogin_literal_bytes_max: 20,
        ..Config::default()
    }
}

fn run(
    config: &Config,
    login_after: usize,
    input: &[u8],
    split: Split,
) -> Vec<Result<Vec<u8>, String>> {
    let mut framer = Framer::new(config);
    let mut frames = Vec::new();
    let line_max = config.line_bytes_max;
    let command_max = usize::try_from(config.command_bytes_max).unwrap_or(usize::MAX);
    if login_after == 0 {
        framer.logged_in();
    }
    for piece in split.pieces(input) {
        framer.feed(piece);
        while let Some(frame) = framer.next() {
            if let Ok(command) = &frame {
                assert!(
                    command.ends_with(b"\n"),
                    "a command that is not whole lines"
                );
                assert!(
                    command.len() <= command_max.saturating_add(line_max),
                    "a command of {} bytes",
                    command.len()
                );
            }
            let closing = matches!(&frame, Err(text) if text.starts_with("Closing"));
            frames.push(frame);
            if frames.len() == login_after {
                framer.logged_in();
            }
            if closing {
                // The session closes the connection: nothing after this is read.
                return frames;
            }
        }
        assert!(
            framer.buffered() <= line_max + piece.len(),
            "{} bytes left unframed",
            framer.buffered()
        );
    }
    frames
}

fuzz_target!(|data: &[u8]| {
    let [selector, chunk, input @ ..] = data else {
        return;
    };
    let config = config(*selector);
    let login_after = match selector >> 4 {
        15 => usize::MAX,
        n => usize::from(n),
    };
    let whole = run(&config, login_after, input, Split::Whole);
    let bytes = run(&config, login_after, input, Split::Bytes);
    assert_eq!(
        whole, bytes,
        "frames differ between whole and byte-by-byte feeding"
    );
    let chunked = run(
        &config,
        login_after,
        input,
        Split::Chunks(usize::from(*chunk % 64) + 2),
    );
    assert_eq!(whole, chunked, "frames differ when fed in chunks");
});
