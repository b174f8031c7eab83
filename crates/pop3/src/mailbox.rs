//! The TRANSACTION state's view of the maildrop: fixed message numbers and deletion marks.

use crate::error::Error;
use crate::event::Maildrop;

/// RFC 1939 5: message numbers are fixed for the session; `DELE` only marks, and the marks are
/// acted on in the UPDATE state.
#[derive(Debug)]
pub(crate) struct Mailbox {
    uidvalidity: u32,
    messages: Vec<Message>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Message {
    pub(crate) uid: u32,
    pub(crate) size: u64,
    deleted: bool,
}

impl Mailbox {
    pub(crate) fn new(maildrop: Maildrop) -> Mailbox {
        let messages = maildrop
            .messages
            .into_iter()
            .map(|(uid, size)| Message {
                uid,
                size,
                deleted: false,
            })
            .collect();
        Mailbox {
            uidvalidity: maildrop.uidvalidity,
            messages,
        }
    }

    /// RFC 1939 5 (STAT): count and octets of the messages not marked deleted.
    pub(crate) fn stat(&self) -> (usize, u64) {
        self.live().fold((0, 0), |(count, size), (_, message)| {
            (count + 1, size.saturating_add(message.size))
        })
    }

    /// Messages not marked deleted, with their numbers.
    pub(crate) fn live(&self) -> impl Iterator<Item = (usize, &Message)> {
        (1..)
            .zip(&self.messages)
            .filter(|(_, message)| !message.deleted)
    }

    /// The message with this number, unless it does not exist or is marked deleted.
    pub(crate) fn get(&self, number: usize) -> Result<&Message, Error> {
        let count = self.messages.len();
        let index = number
            .checked_sub(1)
            .ok_or(Error::NoSuchMessage { count })?;
        let message = self
            .messages
            .get(index)
            .ok_or(Error::NoSuchMessage { count })?;
        if message.deleted {
            return Err(Error::Deleted { number });
        }
        Ok(message)
    }

    pub(crate) fn delete(&mut self, number: usize) -> Result<(), Error> {
        self.get(number)?;
        if let Some(message) = self.messages.get_mut(number - 1) {
            message.deleted = true;
        }
        Ok(())
    }

    /// RFC 1939 5 (RSET): unmark every message.
    pub(crate) fn reset(&mut self) {
        for message in &mut self.messages {
            message.deleted = false;
        }
    }

    /// UIDs marked deleted, ascending (the shell's expunge wants them sorted even if the
    /// maildrop arrived out of order).
    pub(crate) fn deleted_uids(&self) -> Vec<u32> {
        let mut uids: Vec<u32> = self
            .messages
            .iter()
            .filter(|message| message.deleted)
            .map(|m| m.uid)
            .collect();
        uids.sort_unstable();
        uids
    }

    /// RFC 1939 7: the unique-id is 1 to 70 characters in 0x21..=0x7E and never reused for
    /// another message in the maildrop. UIDVALIDITY and UID together are unique in the store
    /// and survive restarts; 16 hex digits fit the syntax.
    pub(crate) fn unique_id(&self, message: &Message) -> String {
        let mut id = String::with_capacity(16);
        self.write_unique_id(message, &mut id);
        id
    }

    /// [`Self::unique_id`] appended to `out`, without allocating.
    pub(crate) fn write_unique_id(&self, message: &Message, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{:08x}{:08x}", self.uidvalidity, message.uid);
    }
}
