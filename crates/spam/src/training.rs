//! Learning from users' moves (docs/spam.md 3): which class a move trains, and the digest
//! that keeps one message from being counted twice.

use crate::fields::strip_status_fields;
use crate::model::Class;

/// The class a move or copy of a message trains: into Junk (from anywhere but Junk) is spam;
/// out of Junk into anything but Trash (or another Junk) is ham; anything else trains nothing.
pub fn training_class(from_junk: bool, to_junk: bool, to_trash: bool) -> Option<Class> {
    match (from_junk, to_junk) {
        (false, true) => Some(Class::Spam),
        (true, false) if !to_trash => Some(Class::Ham),
        _ => None,
    }
}

/// The identity of a message's content for "no double counting": the BLAKE3 hash of the
/// message without our `X-Spam-*` fields, truncated to 128 bits, as 32 lowercase hex digits.
/// Without our fields, so that the same message scored twice (two deliveries, a rescore)
/// is one message.
pub fn digest(message: &[u8]) -> String {
    let hash = blake3::hash(&strip_status_fields(message));
    hash.as_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_train_as_docs_spam_md_3_says() {
        // (from_junk, to_junk, to_trash) -> class
        let table = [
            ((false, true, false), Some(Class::Spam)),
            ((false, false, false), None),
            ((false, false, true), None),
            ((true, false, false), Some(Class::Ham)),
            ((true, false, true), None),
            ((true, true, false), None),
        ];
        for ((from_junk, to_junk, to_trash), class) in table {
            assert_eq!(
                training_class(from_junk, to_junk, to_trash),
                class,
                "{from_junk} {to_junk} {to_trash}"
            );
        }
    }

    #[test]
    fn digest_ignores_our_fields_only() {
        let plain = b"From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n";
        let scored = b"X-Spam-Status: No, score=0.1\r\nX-Spam-Score: 0.1\r\n\
            From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n";
        let other = b"From: a@example.com\r\nSubject: hi\r\n\r\nbody!\r\n";
        assert_eq!(digest(plain), digest(scored));
        assert_ne!(digest(plain), digest(other));
        assert_eq!(digest(plain).len(), 32);
        assert!(
            digest(plain)
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
