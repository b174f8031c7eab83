//! What a validation run fails with.

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("simulation: {0}")]
    Sim(String),
}
