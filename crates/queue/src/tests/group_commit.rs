//! group_commit
