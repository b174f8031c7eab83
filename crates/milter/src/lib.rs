//! The Sendmail milter protocol, version 6, from the MTA's side (docs/spam.md 4). Sans-IO.
