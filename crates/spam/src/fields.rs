//! The `X-Spam-*` header fields of a scored message (docs/spam.md 2): written after our
//! Received, removed from arriving messages first so that no sender can claim a verdict, and
//! read back at delivery (the Junk folder) and by Sieve's `spamtest` (RFC 5235).

use std::borrow::Cow;

use crate::header;
use crate::score::{Action, Score, Thresholds};

/// The names of our fields, as we write them.
const STATUS: &str = "X-Spam-Status";
const SCORE: &str = "X-Spam-Score";
const FLAG: &str = "X-Spam-Flag";
/// RFC 5322 2.1.1: lines SHOULD be at most 78 characters, CRLF excluded.
const LINE_CHARS_MAX: usize = 78;

/// The fields for a scored message, each line ending in CRLF: `X-Spam-Status` (`Yes` when
/// the action is junk or reject, the score, the junk threshold as `required`, the reasons as
/// `tests`, and the reject threshold as `reject` (so that delivery and Sieve's
/// `spamtestplus` read the thresholds the verdict was made with), folded before a test that would pass 78 columns), `X-Spam-Score`, and
/// `X-Spam-Flag: YES` for junk and reject.
pub fn status_fields(score: &Score, thresholds: &Thresholds, action: Action) -> String {
    let flagged = matches!(action, Action::Junk | Action::Reject);
    let points = score_text(score.points);
    let mut status = format!(
        "{STATUS}: {}, score={points} required={} reject={}",
        if flagged { "Yes" } else { "No" },
        score_text(thresholds.junk),
        score_text(thresholds.reject),
    );
    let tests = score.reasons_text();
    let tests: Vec<String> = if tests.is_empty() {
        vec!["none".to_string()]
    } else {
        tests.split(',').map(field_safe).collect()
    };
    let mut line_start = 0;
    for (i, test) in tests.iter().enumerate() {
        let piece = if i == 0 {
            format!(" tests={test}")
        } else {
            format!(",{test}")
        };
        // RFC 5322 2.2.3: fold by a line end before white space.
        if status.len() - line_start + piece.len() > LINE_CHARS_MAX {
            if i == 0 {
                status.push_str("\r\n\t");
                line_start = status.len() - 1;
                status.push_str(&format!("tests={test}"));
            } else {
                status.push_str(",\r\n\t");
                line_start = status.len() - 1;
                status.push_str(test);
            }
        } else {
            status.push_str(&piece);
        }
    }
    let mut fields = format!("{status}\r\n{SCORE}: {points}\r\n");
    if flagged {
        fields.push_str(FLAG);
        fields.push_str(": YES\r\n");
    }
    fields
}

/// A reason name as a field may hold it: reasons may come from configuration and milters, so
/// anything but visible ASCII (a line end above all) becomes `_`.
fn field_safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

/// A score with one decimal, never `-0.0`.
fn score_text(points: f64) -> String {
    let tenths = (points * 10.0).round();
    if tenths == 0.0 || !tenths.is_finite() {
        "0.0".to_string()
    } else {
        format!("{:.1}", tenths / 10.0)
    }
}

fn is_ours(name: &[u8]) -> bool {
    [STATUS, SCORE, FLAG]
        .iter()
        .any(|ours| name.eq_ignore_ascii_case(ours.as_bytes()))
}

/// `message` without any `X-Spam-Status`, `X-Spam-Score` or `X-Spam-Flag` field (any case,
/// continuation lines included), from the header section only: the body is never touched.
/// Borrowed when there is none.
pub fn strip_status_fields(message: &[u8]) -> Cow<'_, [u8]> {
    let ours: Vec<(usize, usize)> = header::fields(message)
        .filter(|field| is_ours(field.name))
        .map(|field| (field.start, field.end))
        .collect();
    if ours.is_empty() {
        return Cow::Borrowed(message);
    }
    let mut out = Vec::with_capacity(message.len());
    let mut copied = 0;
    for (start, end) in ours {
        out.extend_from_slice(&message[copied..start]);
        copied = end;
    }
    out.extend_from_slice(&message[copied..]);
    Cow::Owned(out)
}

/// The verdict a message carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Status {
    pub score: f64,
    /// `X-Spam-Flag: YES`.
    pub flagged: bool,
    /// The thresholds the verdict was made with (`required=`, `reject=` of
    /// `X-Spam-Status`), the defaults where it does not say.
    pub thresholds: Thresholds,
}

impl Status {
    /// RFC 5235 `spamtest` and `spamtestplus :percent` of this verdict ([`spamtest`]).
    pub fn spamtest(&self) -> (u8, u8) {
        spamtest(self.score, &self.thresholds)
    }
}

/// `name=number` in an `X-Spam-Status` value.
fn status_number(status: &str, name: &str) -> Option<f64> {
    status
        .split([' ', ',', '\t'])
        .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|n| n.is_finite())
}

/// The verdict of the first `X-Spam-Score` field (and the first `X-Spam-Flag`) of the header
/// section; None without a score field or with one that is not a finite number.
pub fn status_of(message: &[u8]) -> Option<Status> {
    let score: f64 = header::first_value(message, SCORE)?.parse().ok()?;
    if !score.is_finite() {
        return None;
    }
    let flagged = header::first_value(message, FLAG).is_some_and(|f| f.eq_ignore_ascii_case("yes"));
    let mut thresholds = Thresholds::default();
    if let Some(status) = header::first_value(message, STATUS) {
        if let Some(junk) = status_number(&status, "required") {
            thresholds.junk = junk;
        }
        if let Some(reject) = status_number(&status, "reject") {
            thresholds.reject = reject;
        }
    }
    Some(Status {
        score,
        flagged,
        thresholds,
    })
}

/// The RFC 5235 values of a score: `spamtest` 1 to 10 (RFC 5235 3.1: 1 "definitely not
/// spam", 10 "definitely spam"), 1 for a score of 0 or less, 10 from the junk threshold on,
/// 2 to 9 linear between (docs/spam.md 2: scaled on the junk threshold, so a script's `ge 10`
/// is what we file as junk); and `spamtestplus :percent` 0 to 100 (RFC 5235 3.2), 0 for 0 or
/// less, 100 from the reject threshold on, 1 to 99 linear between. A NaN score counts as 0.
pub fn spamtest(score: f64, thresholds: &Thresholds) -> (u8, u8) {
    let score = if score.is_nan() { 0.0 } else { score };
    let value = if score <= 0.0 {
        1
    } else if score >= thresholds.junk {
        10
    } else {
        (1.0 + 9.0 * score / thresholds.junk)
            .floor()
            .clamp(2.0, 9.0) as u8
    };
    let percent = if score <= 0.0 {
        0
    } else if score >= thresholds.reject {
        100
    } else {
        (100.0 * score / thresholds.reject).round().clamp(1.0, 99.0) as u8
    };
    (value, percent)
}

#[cfg(test)]
mod tests;
