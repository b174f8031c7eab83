use super::{message, one_line};

fn body(content: &str, top_lines: Option<u32>) -> String {
    String::from_utf8(message("x", content.as_bytes(), top_lines)).unwrap()
}

#[test]
fn empty_message_is_just_the_terminator() {
    assert_eq!(body("", None), "+OK x\r\n.\r\n");
}

#[test]
fn one_empty_line_is_kept() {
    assert_eq!(body("\r\n", None), "+OK x\r\n\r\n.\r\n");
    assert_eq!(body("\n", None), "+OK x\r\n\r\n.\r\n");
}

#[test]
fn bare_lf_and_missing_final_line_ending_become_crlf() {
    assert_eq!(body("a\nb\r\nc", None), "+OK x\r\na\r\nb\r\nc\r\n.\r\n");
}

#[test]
fn bare_cr_inside_a_line_is_kept() {
    assert_eq!(body("a\rb\r\r\n", None), "+OK x\r\na\rb\r\r\n.\r\n");
}

#[test]
fn dots_are_stuffed() {
    assert_eq!(body(".\r\n..a\r\n", None), "+OK x\r\n..\r\n...a\r\n.\r\n");
}

#[test]
fn top_without_header_end_sends_everything_as_header() {
    assert_eq!(
        body("A: 1\r\nB: 2\r\n", Some(0)),
        "+OK x\r\nA: 1\r\nB: 2\r\n.\r\n"
    );
}

#[test]
fn shell_text_is_one_line() {
    assert_eq!(one_line("disk\r\n+OK fake", "x"), "disk  +OK fake");
    assert_eq!(one_line(" \r\n", "fallback"), "fallback");
    assert_eq!(one_line(&"é".repeat(500), "x").chars().count(), 200);
}
