//! The dates of From_ lines: C's `asctime` form, `Sat Nov 21 12:00:00 2026`, in UTC.

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `Www Mmm dd hh:mm:ss yyyy` in UTC, the day padded with a space (as `asctime` does).
pub fn asctime(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

fn month_of(token: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(token))
        .map(|i| i as u32 + 1)
}

fn is_weekday(token: &str) -> bool {
    WEEKDAYS.iter().any(|d| d.eq_ignore_ascii_case(token))
}

/// `hh:mm[:ss]`.
fn time_of(token: &str) -> Option<i64> {
    let mut parts = token.split(':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let s: i64 = match parts.next() {
        Some(s) => s.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(h * 3600 + m * 60 + s)
}

/// `+hhmm` / `-hhmm` as seconds east of UTC.
fn zone_of(token: &str) -> Option<i64> {
    let (sign, digits) = match token.as_bytes().first()? {
        b'+' => (1, &token[1..]),
        b'-' => (-1, &token[1..]),
        _ => return None,
    };
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    Some(sign * ((n / 100) * 3600 + (n % 100) * 60))
}

fn year_of(token: &str) -> Option<i64> {
    (token.len() == 4 && token.bytes().all(|b| b.is_ascii_digit()))
        .then(|| token.parse().ok())
        .flatten()
}

/// Parses what follows `From ` on a From_ line: the envelope sender and the date, e.g.
/// `MAILER-DAEMON Sat Nov 21 12:00:00 2026`. Accepted variants: no weekday, no seconds, a
/// numeric zone after the time or after the year, a zone name (ignored), a `remote from`
/// tail. A date without a numeric zone is taken as UTC (Python and Dovecot write UTC).
/// `None` if no date is found: such a line is not a From_ line, except at the very start
/// of a file.
pub fn parse_from_line(rest: &[u8]) -> Option<(String, i64)> {
    let text = String::from_utf8_lossy(rest);
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    // The date is the last run that parses; the sender is everything before it.
    for start in (0..tokens.len()).rev() {
        let mut i = start;
        if is_weekday(tokens[i]) {
            i += 1;
        }
        let Some(month) = tokens.get(i).and_then(|t| month_of(t)) else {
            continue;
        };
        let Some(day) = tokens.get(i + 1).and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Some(secs) = tokens.get(i + 2).and_then(|t| time_of(t)) else {
            continue;
        };
        if !(1..=31).contains(&day) {
            continue;
        }
        let mut j = i + 3;
        let mut zone = 0;
        // A zone between the time and the year: numeric, or a name such as `PST` (ignored).
        if let Some(t) = tokens.get(j)
            && year_of(t).is_none()
        {
            if let Some(z) = zone_of(t) {
                zone = z;
            }
            j += 1;
        }
        let Some(year) = tokens.get(j).and_then(|t| year_of(t)) else {
            continue;
        };
        if let Some(z) = tokens.get(j + 1).and_then(|t| zone_of(t)) {
            zone = z;
        }
        // Scanning from the end finds the month before its weekday: take the weekday too.
        let start = if start > 0 && !is_weekday(tokens[start]) && is_weekday(tokens[start - 1]) {
            start - 1
        } else {
            start
        };
        let sender = tokens[..start].join(" ");
        let t = days_from_civil(year, month, day) * 86_400 + secs - zone;
        return Some((sender, t));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asctime_round_trips() {
        assert_eq!(asctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(asctime(1_700_000_000), "Tue Nov 14 22:13:20 2023");
        for t in [
            0,
            1,
            86_399,
            951_782_400,
            1_700_000_000,
            4_102_444_800,
            -86_401,
        ] {
            let line = format!("MAILER-DAEMON {}", asctime(t));
            assert_eq!(
                parse_from_line(line.as_bytes()),
                Some(("MAILER-DAEMON".to_string(), t))
            );
        }
        for d in [-800_000, -1, 0, 59, 60, 11_016, 730_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn from_line_variants() {
        let t = days_from_civil(1992, 12, 2) * 86_400 + 5 * 3600 + 53 * 60 + 22;
        let p = |s: &str| parse_from_line(s.as_bytes());
        assert_eq!(
            p("user@host Wed Dec  2 05:53:22 1992"),
            Some(("user@host".into(), t))
        );
        assert_eq!(p("a@b Dec 2 05:53:22 1992").unwrap().1, t);
        assert_eq!(p("a@b Wed Dec 2 05:53 1992").unwrap().1, t - 22);
        assert_eq!(p("a@b Wed Dec 2 05:53:22 PST 1992").unwrap().1, t);
        assert_eq!(
            p("a@b Wed Dec 2 05:53:22 1992 -0800").unwrap().1,
            t + 8 * 3600
        );
        assert_eq!(p("a@b Wed Dec 2 06:53:22 +0100 1992").unwrap().1, t);
        assert_eq!(
            p("\"a b\"@c Wed Dec 2 05:53:22 1992 remote from x").unwrap(),
            ("\"a b\"@c".to_string(), t)
        );
        assert_eq!(p("here on, we talk"), None);
        assert_eq!(p(""), None);
        assert_eq!(p("x Wed Dec 32 05:53:22 1992"), None);
    }
}
