//! What can be wrong with an envelope, or with sealing one.

/// Why an envelope was refused (or could not be sealed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("message is too short to be a mailfs envelope")]
    Truncated,
    #[error("not a mailfs message")]
    NotMailfs,
    #[error("unknown envelope format version {0}")]
    Version(u8),
    #[error("unknown message kind {0}")]
    Kind(u8),
    #[error("payload of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The header is not the one the reader expected (another file system, file, block,
    /// version or account): a swapped, replayed or misplaced message.
    #[error("message is not the expected one: {0}")]
    Unexpected(&'static str),
    /// The cipher library refused the key.
    #[error("the cipher refused its key")]
    Key,
    /// The tag or MAC does not verify: the message was altered, or the key is wrong.
    #[error("message failed authentication")]
    Forged,
}
