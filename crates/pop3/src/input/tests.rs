use super::{Input, Line};

fn lines(input: &mut Input, line_max: usize) -> Vec<Line> {
    std::iter::from_fn(|| input.next_line(line_max)).collect()
}

fn text(bytes: &str) -> Line {
    Line::Text(bytes.as_bytes().to_vec())
}

#[test]
fn crlf_and_bare_lf_end_lines() {
    let mut input = Input::default();
    assert_eq!(input.push(b"STAT\r\nNOOP\nLI", 16, 100), 13);
    assert_eq!(lines(&mut input, 16), [text("STAT"), text("NOOP")]);
    assert_eq!(input.held(), 2);
    input.push(b"ST\r\n", 16, 100);
    assert_eq!(lines(&mut input, 16), [text("LIST")]);
    assert_eq!(input.held(), 0);
}

#[test]
fn line_of_exactly_line_max_octets_is_accepted() {
    let mut input = Input::default();
    input.push(b"abcd\r\nabcde\r\n", 6, 100);
    assert_eq!(lines(&mut input, 6), [text("abcd"), Line::TooLong]);
}

#[test]
fn overlong_line_keeps_line_max_bytes_and_drops_the_rest() {
    let mut input = Input::default();
    assert_eq!(input.push(&[b'x'; 1000], 8, 100), 1000);
    assert_eq!(input.held(), 8);
    input.push(b"yyy\r\nNOOP\r\n", 8, 100);
    assert_eq!(lines(&mut input, 8), [Line::TooLong, text("NOOP")]);
}

#[test]
fn zero_line_max_rejects_every_line() {
    let mut input = Input::default();
    input.push(b"\r\n\n", 0, 100);
    assert_eq!(lines(&mut input, 0), [Line::TooLong, Line::TooLong]);
}

#[test]
fn full_input_stops_taking() {
    let mut input = Input::default();
    assert_eq!(input.push(b"NOOP\r\nNOOP\r\nNOOP\r\n", 16, 10), 10);
    assert_eq!(input.held(), 10);
    assert_eq!(input.push(b"more", 16, 10), 0);
    assert_eq!(input.next_line(16), Some(text("NOOP")));
    assert_eq!(input.push(b"P\r\n", 16, 10), 3);
}
