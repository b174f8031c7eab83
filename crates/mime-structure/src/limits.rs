//! The bounds that keep hostile mail from making the stored form large or the walk deep
//! (see the crate documentation).

/// Nesting levels (multiparts and encapsulated messages) that get described; a part at this
/// depth is an opaque leaf. Bounds the recursion when writing BODYSTRUCTURE.
pub const DEPTH_MAX: usize = 64;
/// Parts described, the top-level message included; further parts are left out of
/// BODYSTRUCTURE and the part table (shallow parts win: the table is filled breadth first).
pub const PARTS_MAX: usize = 10_000;
/// BODYSTRUCTURE size above which fewer parts are described (halving until it fits). Many
/// small encapsulated messages, each with its envelope, could otherwise make it several times
/// the size of the message.
pub const STRUCTURE_BYTES_MAX: usize = 1 << 20;
/// Bytes kept of one header value or parameter value in ENVELOPE and BODYSTRUCTURE.
pub const FIELD_BYTES_MAX: usize = 4096;
/// Bytes after which no more items of one list are written: the addresses of one address
/// header in ENVELOPE, the parameters or languages of one part in BODYSTRUCTURE.
pub const LIST_BYTES_MAX: usize = 64 << 10;
