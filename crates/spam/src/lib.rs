//! The spam verdict's pure parts (docs/spam.md): no I/O.
