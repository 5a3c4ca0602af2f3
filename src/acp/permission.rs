//! Answering an agent's permission requests (SPEC 4): a mode decides, options are chosen by
//! their kind (never by id: ids differ per agent), or a person picks one of the agent's own
//! options from the request's list.

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, SelectedPermissionOutcome,
    ToolKind,
};

use agent_client_protocol::v1::schema::{
    Meta, SessionUpdate, ToolCallUpdate, ToolCallUpdateFields,
};

use crate::config::PermissionMode;

/// The `_meta` key of the tool-call update by which chela marks a call its policy refused;
/// its value is the reason shown to the user ([`refusal_note`]).
pub const REFUSED_META_KEY: &str = "chela/refused";

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let the tool run (once).
    Allow,
    /// Refuse it (once).
    Deny,
    /// The agent's own option at this place of the request's list (a button showing it was
    /// pressed).
    Chosen(usize),
}

/// Why chela's policy refused a tool call, and which setting lets it run. `asked_nobody`:
/// mode `ask` found nobody to ask (a run without a bound conversation).
pub fn refusal_reason(mode: PermissionMode, asked_nobody: bool) -> String {
    match mode {
        _ if asked_nobody => "nobody could be asked here ([acp] permissions = \"ask\"); \
             set \"approve-all\" (or \"approve-reads\" for reads) to let it run"
            .to_owned(),
        PermissionMode::ApproveReads => "[acp] permissions = \"approve-reads\" allows only \
             reads; set \"ask\" or \"approve-all\" to let it run"
            .to_owned(),
        PermissionMode::DenyAll => "[acp] permissions = \"deny-all\"; set \"approve-reads\", \
             \"ask\" or \"approve-all\" to let tools run"
            .to_owned(),
        PermissionMode::ApproveAll | PermissionMode::Ask => "refused".to_owned(),
    }
}

/// `update` without chela's refusal mark: only chela may say that its policy refused a call
/// (an agent could otherwise show a forged refusal urging a looser setting).
pub fn without_refusal_marks(mut update: SessionUpdate) -> SessionUpdate {
    let meta = match &mut update {
        SessionUpdate::ToolCallUpdate(call) => call.meta.as_mut(),
        SessionUpdate::ToolCall(call) => call.meta.as_mut(),
        _ => None,
    };
    if let Some(meta) = meta {
        meta.remove(REFUSED_META_KEY);
    }
    update
}

/// The update that tells the turn's reader tool call `call_id` was refused because `reason`.
/// It carries the call's id (so the agent's own "failed" for it can be left out) and the
/// reason under [`REFUSED_META_KEY`].
pub fn refusal_note(call: &ToolCallUpdate, reason: String) -> ToolCallUpdate {
    let mut meta = Meta::new();
    meta.insert(REFUSED_META_KEY.to_owned(), reason.into());
    let fields = ToolCallUpdateFields::new().title(call.fields.title.clone());
    let mut note = ToolCallUpdate::new(call.tool_call_id.clone(), fields);
    note.meta = Some(meta);
    note
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
/// `*_always` option, else `cancelled` (the agent offered no such choice); the chosen option
/// itself for [`Decision::Chosen`] (`cancelled` when the list has no such place).
pub fn outcome(options: &[PermissionOption], decision: Decision) -> RequestPermissionOutcome {
    let selected = |o: &PermissionOption| {
        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
    };
    let kinds = match decision {
        Decision::Chosen(at) => {
            return options
                .get(at)
                .map_or(RequestPermissionOutcome::Cancelled, selected);
        }
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
        .map_or(RequestPermissionOutcome::Cancelled, selected)
}

/// Whether option `option` lets the tool run (`allow_once`, `allow_always`).
pub fn allows(option: &PermissionOption) -> bool {
    matches!(
        option.kind,
        PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
    )
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

    #[test]
    fn a_chosen_option_is_answered_by_its_own_id() {
        let options = options();
        let always = outcome(&options, Decision::Chosen(0));
        assert_eq!(
            always,
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("a1".to_owned()))
        );
        assert_eq!(chosen_kind(&options, &always), "allow_always");
        let reject = outcome(&options, Decision::Chosen(3));
        assert_eq!(chosen_kind(&options, &reject), "reject_always");
        assert_eq!(
            outcome(&options, Decision::Chosen(4)),
            RequestPermissionOutcome::Cancelled
        );
        assert!(allows(&options[1]) && !allows(&options[2]));
    }

    #[test]
    fn refusals_name_the_setting_that_changes_them() {
        let reads = refusal_reason(PermissionMode::ApproveReads, false);
        assert!(
            reads.contains("approve-reads") && reads.contains("approve-all"),
            "{reads}"
        );
        assert!(refusal_reason(PermissionMode::DenyAll, false).contains("deny-all"));
        let nobody = refusal_reason(PermissionMode::Ask, true);
        assert!(nobody.contains("nobody could be asked"), "{nobody}");
    }
}
