//! BDAT (RFC 3030 2): chunks of exact byte counts, the last one marked LAST.
//!
//! A chunk's bytes are always read, whatever the reply will be: the client sends them right
//! after the command, and reading them as commands would execute message content. The reply
//! comes after the last byte of the chunk.

use crate::content::{Body, Content, Framing, no_room, too_big};
use crate::reply::Reply;
use crate::session::{Chunk, Chunks, Disposition, Phase, Session};

impl Session {
    pub(crate) fn bdat(&mut self, size: usize, last: bool) {
        let no_valid_recipients = self.no_valid_recipients();
        let config = &self.config;
        let disposition = match &mut self.transaction {
            None => Disposition::Refuse {
                reply: Reply::new(503, (5, 5, 1), "Need MAIL command"),
                is_error: true,
            },
            // As for DATA.
            Some(transaction) if transaction.recipients.is_empty() => Disposition::Refuse {
                reply: no_valid_recipients,
                is_error: false,
            },
            Some(transaction) => {
                if transaction.chunks.is_none() {
                    self.transfers = self.transfers.wrapping_add(1);
                }
                let chunks = transaction.chunks.get_or_insert_with(|| Chunks {
                    content: Content::new(
                        Framing::Chunks,
                        transaction.body,
                        config.message_bytes_max,
                        config.text_line_max,
                    ),
                    failed: None,
                });
                if chunks.failed.is_some() {
                    Disposition::Failed
                } else {
                    Disposition::Take
                }
            }
        };
        if matches!(disposition, Disposition::Refuse { .. }) {
            self.transfers = self.transfers.wrapping_add(1);
        }
        let size = u64::try_from(size).unwrap_or(u64::MAX);
        self.set_phase(Phase::Bdat(Chunk {
            remaining: size,
            size,
            last,
            disposition,
        }));
    }

    /// Bytes of the current chunk.
    pub(crate) fn chunk_step(&mut self, rest: &[u8]) -> Option<usize> {
        let Phase::Bdat(chunk) = &mut self.phase else {
            return None;
        };
        if chunk.remaining == 0 {
            self.chunk_done();
            return Some(0);
        }
        if rest.is_empty() {
            return None;
        }
        let take = usize::try_from(chunk.remaining)
            .unwrap_or(usize::MAX)
            .min(rest.len());
        let bytes = rest.get(..take).unwrap_or_default();
        chunk.remaining = chunk
            .remaining
            .saturating_sub(u64::try_from(take).unwrap_or(u64::MAX));
        if let (Disposition::Take, Some(transaction)) = (&chunk.disposition, &mut self.transaction)
            && let Some(chunks) = &mut transaction.chunks
        {
            chunks.content.ingest(bytes);
        }
        Some(take)
    }

    fn chunk_done(&mut self) {
        let Phase::Bdat(chunk) = std::mem::replace(&mut self.phase, Phase::Command) else {
            return;
        };
        let Chunk {
            size,
            last,
            disposition,
            ..
        } = chunk;
        match disposition {
            Disposition::Refuse { reply, is_error } => {
                self.reply(reply);
                if is_error {
                    self.count_error();
                }
            }
            Disposition::Failed => self.chunk_failed(last),
            Disposition::Take => {
                let Some(chunks) = self
                    .transaction
                    .as_mut()
                    .and_then(|transaction| transaction.chunks.as_mut())
                else {
                    return;
                };
                if last {
                    let mut content = std::mem::replace(
                        &mut chunks.content,
                        Content::new(Framing::Chunks, Body::Binary, 0, 0),
                    );
                    content.finish();
                    self.complete_message(content);
                } else if chunks.content.is_too_big() {
                    // RFC 3030 2 and RFC 1870 6.3: answer 552 right after the chunk that
                    // crossed the limit, so the client stops early.
                    chunks.failed = Some(too_big(self.config.message_bytes_max));
                    self.chunk_failed(false);
                } else if chunks.content.has_no_room() {
                    // No room now: say so after this chunk, so the client stops sending.
                    chunks.failed = Some(no_room());
                    self.chunk_failed(false);
                } else {
                    if size > 0 {
                        self.progress();
                    }
                    let text = format!("{size} octets received");
                    self.reply(Reply::new(250, (2, 0, 0), text));
                }
            }
        }
    }

    /// A chunk of a failed transaction: the failure again, and at LAST the end of the
    /// transaction (with one reply per recipient in LMTP).
    fn chunk_failed(&mut self, last: bool) {
        let reply = self
            .transaction
            .as_ref()
            .and_then(|transaction| transaction.chunks.as_ref())
            .and_then(|chunks| chunks.failed.clone())
            .unwrap_or_else(|| too_big(self.config.message_bytes_max));
        if last {
            self.message_refused(reply, false);
        } else {
            self.reply(reply);
        }
    }
}
