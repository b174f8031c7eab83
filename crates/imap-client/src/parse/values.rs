//! Values inside responses and commands: dates, modified UTF-7 mailbox names, quoting,
//! header fields.

/// An IMAP date-time (RFC 3501 9): `dd-Mon-yyyy hh:mm:ss +zzzz`, the day maybe
/// space-padded; Unix seconds.
pub(crate) fn internal_date(s: &str) -> Option<i64> {
    let s = s.trim_start();
    let (date, rest) = s.split_once(' ')?;
    let (time, zone) = rest.trim_start().split_once(' ')?;
    let mut d = date.split('-');
    let day: i64 = d.next()?.parse().ok()?;
    let month = d.next()?.to_ascii_lowercase();
    let year: i64 = d.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut t = time.split(':');
    let (h, m, sec): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    let zone = zone.trim();
    if zone.len() != 5 || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let sign = match &zone[..1] {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let zh: i64 = zone[1..3].parse().ok()?;
    let zm: i64 = zone[3..5].parse().ok()?;
    let days = mail_model::days_from_civil(year, month, day);
    Some(days * 86_400 + h * 3600 + m * 60 + sec - sign * (zh * 3600 + zm * 60))
}

/// Modified UTF-7 (RFC 3501 5.1.3) to UTF-8; None if it is not valid.
pub(crate) fn utf7_decode(raw: &[u8]) -> Option<String> {
    mail_model::mutf7::decode(std::str::from_utf8(raw).ok()?)
}

pub(crate) fn parse_u32(b: &[u8]) -> Option<u32> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The first 200 bytes of a response for error messages.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(200)];
    let mut s = String::from_utf8_lossy(cut).escape_debug().to_string();
    if bytes.len() > cut.len() {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

/// The unfolded (RFC 5322 2.2.3), trimmed value of header `field` in a header block as
/// returned for `BODY[HEADER.FIELDS (field)]`; empty if absent.
pub(crate) fn header_value(block: &[u8], field: &str) -> String {
    let text = String::from_utf8_lossy(block);
    let mut value: Option<String> = None;
    let mut done = false;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(v) = value.as_mut()
            && !done
        {
            if line.starts_with([' ', '\t']) {
                v.push(' ');
                v.push_str(line.trim());
                continue;
            }
            done = true;
        }
        if value.is_none()
            && let Some((name, rest)) = line.split_once(':')
            && name.trim_end().eq_ignore_ascii_case(field)
        {
            value = Some(rest.trim().to_string());
        }
    }
    value.unwrap_or_default().trim().to_string()
}

/// A mailbox name as an IMAP astring: modified UTF-7 (RFC 3501 5.1.3), then quoted.
pub(crate) fn mailbox(name: &str) -> Vec<u8> {
    quoted(utf7_encode(name).as_bytes())
}

/// Quoted string (RFC 3501 4.3): `"` and `\` escaped. Only for bytes that a quoted
/// string may carry (7-bit, no CR/LF/NUL); see [`can_quote`].
pub(crate) fn quoted(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for &b in s {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Whether `s` fits a quoted string (RFC 3501 9, `QUOTED-CHAR`).
pub(crate) fn can_quote(s: &[u8]) -> bool {
    s.iter()
        .all(|&b| (0x01..=0x7f).contains(&b) && b != b'\r' && b != b'\n')
}

/// Modified UTF-7 for mailbox names (RFC 3501 5.1.3).
pub(crate) fn utf7_encode(name: &str) -> String {
    mail_model::mutf7::encode(name, &[])
}
