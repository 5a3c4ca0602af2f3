//! What a steered message brings into a running turn.

/// A message injected into a running turn (steer mode).
#[derive(Debug, Clone, PartialEq)]
pub struct Steer {
    /// Durable pending seqs this message answers.
    pub seqs: Vec<u64>,
    /// The text.
    pub text: String,
    /// The files that came with it, each with the seq of its message (downloaded by the run
    /// that takes it, through `RunRequest::steer_files` in `run.rs`).
    pub files: Vec<(u64, chela_channel::Attachment)>,
}
