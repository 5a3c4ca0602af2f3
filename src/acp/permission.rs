//! Answering an agent's permission requests (SPEC 4): a mode decides, options are chosen by
//! their kind (never by id: ids differ per agent).

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, SelectedPermissionOutcome,
    ToolKind,
};

use crate::config::PermissionMode;

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let the tool run (once).
    Allow,
    /// Refuse it (once).
    Deny,
}

/// The decision `mode` makes by itself for a tool of `kind`; `None` means a person must be
/// asked (mode `ask`).
pub fn decide(mode: PermissionMode, kind: Option<ToolKind>) -> Option<Decision> {
    match mode {
        PermissionMode::ApproveAll => Some(Decision::Allow),
        PermissionMode::DenyAll => Some(Decision::Deny),
        PermissionMode::ApproveReads if kind.is_some_and(is_read) => Some(Decision::Allow),
        PermissionMode::ApproveReads => Some(Decision::Deny),
        PermissionMode::Ask => None,
    }
}

/// Tool kinds that only look: reading, searching, fetching, thinking.
fn is_read(kind: ToolKind) -> bool {
    matches!(
        kind,
        ToolKind::Read | ToolKind::Search | ToolKind::Fetch | ToolKind::Think
    )
}

/// The outcome that carries `decision`: the `*_once` option of the right side, else its
/// `*_always` option, else `cancelled` (the agent offered no such choice).
pub fn outcome(options: &[PermissionOption], decision: Decision) -> RequestPermissionOutcome {
    let kinds = match decision {
        Decision::Allow => [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        Decision::Deny => [
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
    };
    kinds
        .iter()
        .find_map(|kind| options.iter().find(|o| o.kind == *kind))
        .map_or(RequestPermissionOutcome::Cancelled, |o| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
        })
}

/// The kind of the chosen option in `outcome`, for logs and the user ("allow_once"...).
pub fn chosen_kind(options: &[PermissionOption], outcome: &RequestPermissionOutcome) -> String {
    match outcome {
        RequestPermissionOutcome::Selected(selected) => options
            .iter()
            .find(|o| o.option_id == selected.option_id)
            .map_or_else(|| "unknown".to_owned(), |o| kind_name(o.kind).to_owned()),
        _ => "cancelled".to_owned(),
    }
}

/// The wire name of an option kind.
pub fn kind_name(kind: PermissionOptionKind) -> &'static str {
    match kind {
        PermissionOptionKind::AllowOnce => "allow_once",
        PermissionOptionKind::AllowAlways => "allow_always",
        PermissionOptionKind::RejectOnce => "reject_once",
        PermissionOptionKind::RejectAlways => "reject_always",
        _ => "other",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn options() -> Vec<PermissionOption> {
        [
            ("a1", PermissionOptionKind::AllowAlways),
            ("a0", PermissionOptionKind::AllowOnce),
            ("r0", PermissionOptionKind::RejectOnce),
            ("r1", PermissionOptionKind::RejectAlways),
        ]
        .into_iter()
        .map(|(id, kind)| PermissionOption::new(id.to_owned(), id.to_uppercase(), kind))
        .collect()
    }

    #[test]
    fn approve_reads_allows_reads_only() {
        let mode = PermissionMode::ApproveReads;
        assert_eq!(decide(mode, Some(ToolKind::Read)), Some(Decision::Allow));
        assert_eq!(decide(mode, Some(ToolKind::Search)), Some(Decision::Allow));
        assert_eq!(decide(mode, Some(ToolKind::Execute)), Some(Decision::Deny));
        assert_eq!(decide(mode, Some(ToolKind::Edit)), Some(Decision::Deny));
        assert_eq!(decide(mode, None), Some(Decision::Deny));
        assert_eq!(
            decide(PermissionMode::ApproveAll, Some(ToolKind::Delete)),
            Some(Decision::Allow)
        );
        assert_eq!(
            decide(PermissionMode::DenyAll, Some(ToolKind::Read)),
            Some(Decision::Deny)
        );
        assert_eq!(decide(PermissionMode::Ask, Some(ToolKind::Read)), None);
    }

    #[test]
    fn options_are_chosen_by_kind_preferring_once() {
        let options = options();
        let allow = outcome(&options, Decision::Allow);
        assert_eq!(chosen_kind(&options, &allow), "allow_once");
        let deny = outcome(&options, Decision::Deny);
        assert_eq!(chosen_kind(&options, &deny), "reject_once");
        let only_always: Vec<_> = options
            .iter()
            .filter(|o| o.kind == PermissionOptionKind::AllowAlways)
            .cloned()
            .collect();
        let allow = outcome(&only_always, Decision::Allow);
        assert_eq!(chosen_kind(&only_always, &allow), "allow_always");
        assert_eq!(
            outcome(&only_always, Decision::Deny),
            RequestPermissionOutcome::Cancelled
        );
    }
}
