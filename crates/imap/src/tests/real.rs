//! The real store behind the transcripts, forwarded the way the server forwards it.

pub(crate) struct RealStore(pub(crate) std::sync::Arc<store::Store>);

crate::forward_mailstore!(RealStore, 0);
