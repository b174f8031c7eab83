//! The spam and malware verdict of arriving mail, and training (docs/spam.md).

pub mod milter;
pub mod rspamd;
