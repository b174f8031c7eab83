//! format_tests
