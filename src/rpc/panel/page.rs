//! What a panel page handler answers: a title and a body, or why it could not be made.

use crate::store::StoreError;

/// Why a page could not be made.
#[derive(Debug, thiserror::Error)]
pub(super) enum PageError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The gateway refused or failed.
    #[error("{0}")]
    Gateway(String),
    /// What the page is about does not exist.
    #[error("{0}")]
    NotFound(String),
}

/// A page's title and body.
pub(super) type Page = Result<(String, String), PageError>;
