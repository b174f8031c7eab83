//! The spam and malware verdict of arriving mail, and training (docs/spam.md).
