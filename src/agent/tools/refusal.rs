//! [`ToolRefusal`]: why the gateway did not do what a tool asked of it (send into another
//! session, list or read sessions, spawn a sub-agent or coding agent). Its text is what the
//! model sees as the tool's error.

/// Why the gateway refused or failed a tool's request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolRefusal {
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The request cannot be done as asked; the reason says why and what to do instead.
    #[error("{0}")]
    Refused(String),
    /// The store, a channel or a coding agent failed while doing it.
    #[error("{0}")]
    Failed(String),
}

impl From<&str> for ToolRefusal {
    fn from(reason: &str) -> Self {
        ToolRefusal::Refused(reason.to_owned())
    }
}

impl From<String> for ToolRefusal {
    fn from(reason: String) -> Self {
        ToolRefusal::Refused(reason)
    }
}

impl From<crate::store::StoreError> for ToolRefusal {
    fn from(e: crate::store::StoreError) -> Self {
        ToolRefusal::Failed(e.to_string())
    }
}
