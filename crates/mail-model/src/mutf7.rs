//! IMAP's modified UTF-7 (RFC 3501 5.1.3): printable ASCII stands for itself except `&`,
//! written `&-`; anything else is `&`, base64 (with `,` for `/`) of its UTF-16, `-`. The one
//! implementation for the IMAP server (names of clients that did not enable UTF8=ACCEPT), the
//! IMAP client, and Maildir++ folder directories (Dovecot names them this way).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

fn sextet(b: u8) -> Option<u32> {
    ALPHABET.iter().position(|&a| a == b).map(|i| i as u32)
}

/// Encodes `text`; characters in `escape` are base64-encoded too although printable (the
/// Maildir++ writer escapes its hierarchy separator `.` this way).
pub fn encode(text: &str, escape: &[char]) -> String {
    let mut out = String::new();
    let mut run: Vec<u16> = Vec::new();
    let flush = |run: &mut Vec<u16>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        out.push('&');
        let bytes: Vec<u8> = run.iter().flat_map(|u| u.to_be_bytes()).collect();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
            let sextets = (chunk.len() * 8).div_ceil(6);
            for k in 0..sextets {
                out.push(ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char);
            }
        }
        out.push('-');
        run.clear();
    };
    for c in text.chars() {
        if (' '..='~').contains(&c) && !escape.contains(&c) {
            flush(&mut run, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut buf = [0u16; 2];
            run.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Decodes modified UTF-7; `None` if `text` is not valid modified UTF-7 (a non-ASCII byte,
/// a bad base64 run, a broken surrogate pair). Lenient about what a run encodes: Maildir++
/// encodes its separator `.` although it is printable.
pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(0x20..=0x7e).contains(&b) {
            return None;
        }
        if b != b'&' {
            out.push(b as char);
            i += 1;
            continue;
        }
        let end = i + 1 + bytes[i + 1..].iter().position(|&c| c == b'-')?;
        if end == i + 1 {
            out.push('&');
            i = end + 1;
            continue;
        }
        let mut bits = 0u32;
        let mut nbits = 0;
        let mut units = Vec::new();
        for &c in &bytes[i + 1..end] {
            bits = (bits << 6 | sextet(c)?) & 0xff_ffff;
            nbits += 6;
            if nbits >= 16 {
                nbits -= 16;
                units.push((bits >> nbits) as u16);
            }
        }
        // Leftover bits are padding and must be zero.
        if nbits >= 6 || bits & ((1 << nbits) - 1) != 0 {
            return None;
        }
        out.push_str(&String::from_utf16(&units).ok()?);
        i = end + 1;
    }
    Some(out)
}

/// [`decode`] as RFC 3501 5.1.3 allows one encoding only, for names a client sends: `None`
/// also when a run encodes printable ASCII, or two runs stand back to back (they would have
/// been one).
pub fn decode_strict(text: &str) -> Option<String> {
    let decoded = decode(text)?;
    // The one encoding is the one `encode` writes: printable ASCII as itself, one run per
    // stretch of other characters.
    (encode(&decoded, &[]) == text).then_some(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_examples_round_trip() {
        assert_eq!(
            encode("~peter/mail/台北/日本語", &[]),
            "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
        );
        assert_eq!(
            decode("~peter/mail/&U,BTFw-/&ZeVnLIqe-").unwrap(),
            "~peter/mail/台北/日本語"
        );
        assert_eq!(encode("Entwürfe & more", &[]), "Entw&APw-rfe &- more");
        assert_eq!(decode("Entw&APw-rfe &- more").unwrap(), "Entwürfe & more");
        assert_eq!(encode("a.b", &['.']), "a&AC4-b");
        assert_eq!(decode("a&AC4-b").unwrap(), "a.b");
        assert_eq!(encode("😀", &[]), "&2D3eAA-");
        assert_eq!(decode("&2D3eAA-").unwrap(), "😀");
        for bad in ["&", "&U,BTF", "&U,BT-", "é", "&2D0-"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn strict_decoding_takes_one_encoding_only() {
        for name in [
            "INBOX",
            "Entwürfe",
            "A&B",
            "&",
            "台北/日本語",
            "emoji 😀 folder",
            "",
        ] {
            assert_eq!(
                decode_strict(&encode(name, &[])).as_deref(),
                Some(name),
                "{name}"
            );
        }
        for bad in [
            "Entwürfe",           // 8-bit
            "&Jjo!",              // no terminating '-'
            "&AGE-",              // printable ASCII ("a") encoded
            "&2D0-",              // a lone surrogate
            "&APx-",              // non-zero leftover bits
            "&U,BTFw-&ZeVnLIqe-", // two adjacent runs
            "&*-",                // not base64
        ] {
            assert_eq!(decode_strict(bad), None, "{bad}");
        }
        // Maildir++'s escaped separator is valid leniently, not strictly.
        assert_eq!(decode("a&AC4-b").as_deref(), Some("a.b"));
        assert_eq!(decode_strict("a&AC4-b"), None);
    }
}
