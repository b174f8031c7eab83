//! What can go wrong: a scenario that fails its checks, a model that cannot run it, I/O.

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("scenario: {0}")]
    Scenario(String),
    #[error("model: {0}")]
    Model(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
