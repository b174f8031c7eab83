//! Properties of the decoder and of `apply` on arbitrary input: no panic, bounded memory,
//! output independent of how the input was split.

use milter::{Decoder, Modification, Response, apply};
use proptest::prelude::*;

/// A packet with a valid length prefix around arbitrary bytes, so that the decoder gets past
/// the framing and into the parsers.
fn framed() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(b"OcartdypqhmiL+2-bepls4fZ\0".to_vec()),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(code, data)| {
            let mut out = ((data.len() + 1) as u32).to_be_bytes().to_vec();
            out.push(code);
            out.extend(data);
            out
        })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        prop::collection::vec(framed(), 0..8).prop_map(|packets| packets.concat()),
    ]
}

/// Feeds the input in pieces of `piece` bytes, draining after each; returns the responses
/// up to the first error, and whether there was one.
fn drain(input: &[u8], piece: usize, max: usize) -> (Vec<Response>, bool) {
    let mut decoder = Decoder::new(max);
    let mut responses = Vec::new();
    for chunk in input.chunks(piece.max(1)) {
        decoder.feed(chunk);
        loop {
            match decoder.next_response() {
                Ok(Some(response)) => responses.push(response),
                Ok(None) => break,
                Err(_) => return (responses, true),
            }
        }
        // Bounded: at most one incomplete packet of at most `max` bytes and its length.
        assert!(decoder.buffered() < 4 + max);
    }
    (responses, false)
}

proptest! {
    #[test]
    fn the_decoder_never_panics_and_stays_bounded(
        input in input(),
        piece in 1usize..100,
        max in 1usize..128,
    ) {
        drain(&input, piece, max);
    }

    #[test]
    fn the_decoder_does_not_care_how_input_is_split(input in input(), piece in 1usize..100) {
        prop_assert_eq!(drain(&input, piece, 1024), drain(&input, input.len(), 1024));
    }

    #[test]
    fn a_claimed_length_is_never_allocated(length in 1025u32.., tail in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut decoder = Decoder::new(1024);
        decoder.feed(&length.to_be_bytes());
        decoder.feed(&tail);
        prop_assert!(decoder.next_response().is_err());
        prop_assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn apply_never_panics_and_keeps_the_body_apart(
        message in prop::collection::vec(prop::sample::select(b"ab: \r\n\tX-".to_vec()), 0..200),
        index in 0u32..6,
        value in "[ a\r\n\t]{0,12}",
    ) {
        let modifications = [
            Modification::AddHeader { name: "X-New".into(), value: value.clone() },
            Modification::ChangeHeader { index, name: "X-".into(), value: value.clone() },
            Modification::InsertHeader { index, name: "X-Ins".into(), value },
        ];
        let out = apply(&message, &modifications);
        // The added fields stay in the header: the first empty line comes after them.
        let text = String::from_utf8_lossy(&out);
        let header_end = text.find("\r\n\r\n").map_or(text.len(), |i| i + 2);
        prop_assert!(text[..header_end].contains("X-New:"));
        prop_assert!(text[..header_end].contains("X-Ins:"));
    }
}
