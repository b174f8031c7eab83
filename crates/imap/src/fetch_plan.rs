//! What one FETCH asks for (RFC 9051 6.4.5 items, macros expanded, RFC 3516 BINARY, RFC
//! 7162 MODSEQ), worked out once from the command. A FETCH that yields to the shell at every
//! output chunk keeps its plan in the session between storage steps; `command/fetch.rs`
//! renders it.

use std::num::NonZeroU32;

use imap_codec::imap_types::fetch::{
    Macro, MacroOrMessageDataItemNames, MessageDataItemName, Section,
};

/// What one FETCH asks for, in request order.
#[derive(Clone)]
pub(crate) struct Plan {
    pub(crate) items: Vec<Item>,
    /// Some item needs the cached structure.
    pub(crate) needs_structure: bool,
    /// Some item needs the message content.
    pub(crate) needs_content: bool,
    /// A non-PEEK body item: \Seen is set as a side effect (RFC 9051 6.4.5).
    pub(crate) sets_seen: bool,
    pub(crate) modseq: bool,
    pub(crate) changed_since: Option<u64>,
}

#[derive(Clone)]
pub(crate) enum Item {
    Uid,
    Flags,
    InternalDate,
    Size,
    Envelope,
    BodyStructure,
    Body,
    /// BODY[...] / BINARY[...] / RFC822*: `label` is what the response echoes.
    Section {
        label: String,
        spec: Spec,
        partial: Option<(u32, u32)>,
        binary: bool,
    },
    BinarySize {
        label: String,
        path: Vec<u32>,
    },
}

#[derive(Clone)]
pub(crate) enum Spec {
    Full,
    Header(Vec<u32>),
    HeaderFields(Vec<u32>, Vec<Vec<u8>>, bool),
    Text(Vec<u32>),
    Mime(Vec<u32>),
    Part(Vec<u32>),
}

pub(crate) fn path_of(part: &[NonZeroU32]) -> Vec<u32> {
    part.iter().map(|n| n.get()).collect()
}

pub(crate) fn path_label(path: &[u32]) -> String {
    path.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

fn section_spec(section: &Option<Section<'_>>) -> (Spec, String) {
    let join = |path: &[u32], what: &str| {
        if path.is_empty() {
            what.to_string()
        } else if what.is_empty() {
            path_label(path)
        } else {
            format!("{}.{what}", path_label(path))
        }
    };
    match section {
        None => (Spec::Full, String::new()),
        Some(Section::Part(p)) => {
            let path = path_of(p.0.as_ref());
            let label = path_label(&path);
            (Spec::Part(path), label)
        }
        Some(Section::Header(p)) => {
            let path = p
                .as_ref()
                .map(|p| path_of(p.0.as_ref()))
                .unwrap_or_default();
            let label = join(&path, "HEADER");
            (Spec::Header(path), label)
        }
        Some(Section::HeaderFields(p, fields)) | Some(Section::HeaderFieldsNot(p, fields)) => {
            let not = matches!(section, Some(Section::HeaderFieldsNot(..)));
            let path = p
                .as_ref()
                .map(|p| path_of(p.0.as_ref()))
                .unwrap_or_default();
            let names: Vec<Vec<u8>> = fields
                .as_ref()
                .iter()
                .map(|f| f.as_ref().to_vec())
                .collect();
            let list = names
                .iter()
                .map(|n| String::from_utf8_lossy(n).to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join(" ");
            let what = if not {
                "HEADER.FIELDS.NOT"
            } else {
                "HEADER.FIELDS"
            };
            let label = format!("{} ({list})", join(&path, what));
            (Spec::HeaderFields(path, names, not), label)
        }
        Some(Section::Text(p)) => {
            let path = p
                .as_ref()
                .map(|p| path_of(p.0.as_ref()))
                .unwrap_or_default();
            let label = join(&path, "TEXT");
            (Spec::Text(path), label)
        }
        Some(Section::Mime(p)) => {
            let path = path_of(p.0.as_ref());
            let label = join(&path, "MIME");
            (Spec::Mime(path), label)
        }
    }
}

impl Plan {
    pub(crate) fn new(names: MacroOrMessageDataItemNames<'_>, uid: bool, condstore: bool) -> Plan {
        let names: Vec<MessageDataItemName<'_>> = match names {
            MacroOrMessageDataItemNames::Macro(m) => {
                let mut v = vec![
                    MessageDataItemName::Flags,
                    MessageDataItemName::InternalDate,
                    MessageDataItemName::Rfc822Size,
                ];
                if matches!(m, Macro::All | Macro::Full) {
                    v.push(MessageDataItemName::Envelope);
                }
                if matches!(m, Macro::Full) {
                    v.push(MessageDataItemName::Body);
                }
                v
            }
            MacroOrMessageDataItemNames::MessageDataItemNames(v) => v,
        };
        let mut plan = Plan {
            items: Vec::new(),
            needs_structure: false,
            needs_content: false,
            sets_seen: false,
            modseq: condstore,
            changed_since: None,
        };
        // RFC 9051 6.4.8: UID FETCH always returns UID.
        if uid {
            plan.items.push(Item::Uid);
        }
        for name in names {
            let item = match name {
                MessageDataItemName::Uid => {
                    if uid {
                        continue;
                    }
                    Item::Uid
                }
                MessageDataItemName::Flags => Item::Flags,
                MessageDataItemName::InternalDate => Item::InternalDate,
                MessageDataItemName::Rfc822Size => Item::Size,
                MessageDataItemName::ModSeq => {
                    plan.modseq = true;
                    continue;
                }
                MessageDataItemName::Envelope => Item::Envelope,
                MessageDataItemName::BodyStructure => Item::BodyStructure,
                MessageDataItemName::Body => Item::Body,
                MessageDataItemName::Rfc822 => {
                    plan.sets_seen = true;
                    Item::Section {
                        label: "RFC822".into(),
                        spec: Spec::Full,
                        partial: None,
                        binary: false,
                    }
                }
                MessageDataItemName::Rfc822Header => Item::Section {
                    label: "RFC822.HEADER".into(),
                    spec: Spec::Header(Vec::new()),
                    partial: None,
                    binary: false,
                },
                MessageDataItemName::Rfc822Text => {
                    plan.sets_seen = true;
                    Item::Section {
                        label: "RFC822.TEXT".into(),
                        spec: Spec::Text(Vec::new()),
                        partial: None,
                        binary: false,
                    }
                }
                MessageDataItemName::BodyExt {
                    section,
                    partial,
                    peek,
                } => {
                    plan.sets_seen |= !peek;
                    let (spec, label) = section_spec(&section);
                    let partial = partial.map(|(o, n)| (o, n.get()));
                    let label = match partial {
                        Some((o, _)) => format!("BODY[{label}]<{o}>"),
                        None => format!("BODY[{label}]"),
                    };
                    Item::Section {
                        label,
                        spec,
                        partial,
                        binary: false,
                    }
                }
                MessageDataItemName::Binary {
                    section,
                    partial,
                    peek,
                } => {
                    plan.sets_seen |= !peek;
                    let path = path_of(&section);
                    let partial = partial.map(|(o, n)| (o, n.get()));
                    let label = match partial {
                        Some((o, _)) => format!("BINARY[{}]<{o}>", path_label(&path)),
                        None => format!("BINARY[{}]", path_label(&path)),
                    };
                    let spec = if path.is_empty() {
                        Spec::Full
                    } else {
                        Spec::Part(path)
                    };
                    Item::Section {
                        label,
                        spec,
                        partial,
                        binary: true,
                    }
                }
                MessageDataItemName::BinarySize { section } => {
                    let path = path_of(&section);
                    Item::BinarySize {
                        label: format!("BINARY.SIZE[{}]", path_label(&path)),
                        path,
                    }
                }
            };
            match &item {
                Item::Envelope | Item::BodyStructure | Item::Body => plan.needs_structure = true,
                Item::Section { spec, binary, .. } => {
                    plan.needs_content = true;
                    plan.needs_structure |= !matches!(spec, Spec::Full) || *binary;
                }
                Item::BinarySize { .. } => {
                    plan.needs_content = true;
                    plan.needs_structure = true;
                }
                _ => {}
            }
            plan.items.push(item);
        }
        if plan.sets_seen && !plan.items.iter().any(|i| matches!(i, Item::Flags)) {
            plan.items.push(Item::Flags);
        }
        plan
    }
}
