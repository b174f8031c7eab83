//! An import's INBOX delivered through the user's Sieve rules (`mailstow mailbox import
//! --rules`): each message as new mail, by the deposit, which runs the rules.

use store::ImportedMessage;

/// INBOX messages of an import asked to go through the user's rules: each one delivered as
/// new mail would be (`mailboxes::Deposit` runs the rules; the sender is the message's
/// Return-Path, if any), in one group commit. The outcome of a message the rules stored
/// nowhere (discarded, sent on) or refused (which an import cannot tell a sender: it is
/// kept) is reported as imported.
pub(super) fn deliver(
    deposit: &mailboxes::Deposit,
    shared: &mailboxes::Shared<'_>,
    user: &str,
    messages: Vec<ImportedMessage>,
) -> Vec<Result<store::ImportOutcome, store::StoreError>> {
    let copies = messages
        .into_iter()
        .map(|m| {
            let sender = return_path(&m.content);
            mailboxes::Copy {
                append: store::AppendRequest {
                    user: user.to_string(),
                    folder: "INBOX".to_string(),
                    message: store::NewMessage {
                        flags: m.flags,
                        keywords: m.keywords,
                        internal_date: m.internal_date,
                        content: m.content,
                    },
                },
                origin: mailboxes::Origin::Own,
                rules: Some(mailboxes::rules::Envelope {
                    sender,
                    recipient: user.to_string(),
                }),
            }
        })
        .collect();
    deposit
        .deposit(shared, copies)
        .into_iter()
        .map(|outcome| match outcome {
            mailboxes::Deposited::Stored(appended) => Ok(store::ImportOutcome {
                uid: appended.uid,
                uid_kept: false,
                modseq: appended.modseq,
                dropped_keywords: Vec::new(),
            }),
            mailboxes::Deposited::Disposed | mailboxes::Deposited::Rejected(_) => {
                Ok(store::ImportOutcome {
                    uid: 0,
                    uid_kept: false,
                    modseq: 0,
                    dropped_keywords: Vec::new(),
                })
            }
            mailboxes::Deposited::Held => Err(store::StoreError::Failed(
                "the mailbox is held (a move or a deletion)".into(),
            )),
            mailboxes::Deposited::Failed(e) => Err(e),
        })
        .collect()
}

/// The address of a message's first `Return-Path:` field (empty: none, or `<>`).
fn return_path(content: &[u8]) -> String {
    for line in content.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line.len() > 12 && line[..12].eq_ignore_ascii_case(b"Return-Path:") {
            let value = String::from_utf8_lossy(&line[12..]);
            return value
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string();
        }
    }
    String::new()
}
