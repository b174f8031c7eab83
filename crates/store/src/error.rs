//! The store's error type is `mail_model::StoreError`; this adds the context line the store
//! puts on every I/O error.

use std::io;

use mail_model::StoreError;

/// Adds a context line to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::io(context(), e))
    }
}
