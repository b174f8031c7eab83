//! What the tests share: a small element tree read with quick-xml, which fails on any
//! document that is not well-formed, and Python's standard library as a second, independent
//! reader.

#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::process::{Command, Stdio};

use quick_xml::XmlVersion;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;

/// One element: its local name, namespace, attributes, text and children.
#[derive(Debug, Clone, Default)]
pub struct Element {
    pub name: String,
    pub namespace: String,
    pub attributes: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every child named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The one child named `name`; panics if there is none or more than one.
    pub fn one<'a>(&'a self, name: &'a str) -> &'a Element {
        let found: Vec<&Element> = self.all(name).collect();
        assert_eq!(found.len(), 1, "{} has {} <{name}>", self.name, found.len());
        found[0]
    }

    /// The text of the one child named `name`.
    pub fn text_of<'a>(&'a self, name: &'a str) -> &'a str {
        &self.one(name).text
    }
}

/// Parses `document` as XML into its root element; panics (failing the test) on anything
/// not well-formed: mismatched or unclosed tags, undeclared entities, a second root.
pub fn parse(document: &str) -> Element {
    let mut reader = NsReader::from_str(document);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let (namespace, event) = reader.read_resolved_event().expect("well-formed XML");
        let namespace = match namespace {
            ResolveResult::Bound(ns) => ns.into_inner().to_string(),
            ResolveResult::Unbound => String::new(),
            ResolveResult::Unknown(prefix) => panic!("unknown prefix {prefix}"),
        };
        match event {
            Event::Start(ref start) | Event::Empty(ref start) => {
                assert!(root.is_none() || !stack.is_empty(), "a second root element");
                let attributes = start
                    .attributes()
                    .map(|a| {
                        let a = a.expect("attribute");
                        let value = a
                            .normalized_value(XmlVersion::Implicit1_0)
                            .expect("attribute value")
                            .into_owned();
                        (a.key.local_name().into_inner().to_string(), value)
                    })
                    .collect();
                let element = Element {
                    name: start.local_name().into_inner().to_string(),
                    namespace,
                    attributes,
                    ..Element::default()
                };
                if matches!(event, Event::Start(_)) {
                    stack.push(element);
                } else {
                    close(&mut stack, &mut root, element);
                }
            }
            Event::End(_) => {
                let element = stack.pop().expect("an open element");
                close(&mut stack, &mut root, element);
            }
            Event::Text(text) => {
                let text = text.xml10_content();
                match stack.last_mut() {
                    Some(open) => open.text.push_str(&text),
                    None => assert!(text.trim().is_empty(), "text outside the root"),
                }
            }
            Event::CData(text) => stack
                .last_mut()
                .expect("open")
                .text
                .push_str(&text.xml10_content()),
            Event::GeneralRef(reference) => {
                let c = match reference.resolve_char_ref().expect("char ref") {
                    Some(c) => c,
                    None => match &*reference {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "apos" => '\'',
                        "quot" => '"',
                        other => panic!("undeclared entity {other}"),
                    },
                };
                stack.last_mut().expect("open").text.push(c);
            }
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => {}
        }
    }
    assert!(stack.is_empty(), "unclosed elements");
    root.expect("a root element")
}

fn close(stack: &mut [Element], root: &mut Option<Element>, element: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(element),
        None => *root = Some(element),
    }
}

/// Runs `script` with `python3`, `input` on its standard input, and returns its standard
/// output; `None` (with a message) only if there is no python3 on this machine. A script that
/// fails fails the test.
pub fn python(script: &str, input: &[u8]) -> Option<String> {
    let child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "SKIPPED: python3 is not installed, so the check with Python's readers did not run"
            );
            return None;
        }
        Err(error) => panic!("python3: {error}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write to python3");
    let output = child.wait_with_output().expect("python3 runs");
    assert!(
        output.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8(output.stdout).expect("UTF-8 output"))
}

/// Checks `document` with expat, Python's strict XML parser (which, unlike quick-xml, also
/// refuses characters XML 1.0 cannot carry).
pub fn expat_accepts(document: &str) {
    python(
        "import sys, xml.parsers.expat; p = xml.parsers.expat.ParserCreate(); p.Parse(sys.stdin.buffer.read(), True)",
        document.as_bytes(),
    );
}
