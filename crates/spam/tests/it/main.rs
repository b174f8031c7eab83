//! The spam crate through its public API: properties over arbitrary and mutated messages,
//! and (with the `corpus` feature) the classifier on the synthetic corpus.

#[cfg(feature = "corpus")]
mod corpus;
mod properties;
mod samples;
