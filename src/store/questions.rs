//! What the questions stage keeps in the store, on every engine (as settings, JSON under one
//! key each): the messages of a node still showing a question's buttons, so the next start
//! can end them, and the strangers approved while no gateway ran, so the next start can
//! tell them they are in.

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use super::{PairingRequest, Store, StoreError};

/// One message showing a question's buttons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenQuestion {
    /// The question (an approval or permission id, a pairing request's key and owner).
    pub id: String,
    /// Where the message is.
    pub to: Conversation,
    /// The platform's id of the message.
    pub message_id: String,
    /// Its text as asked.
    pub text: String,
}

/// The settings key of the strangers approved while no gateway ran.
const APPROVED_OFFLINE: &str = "chela:pairing:approved-offline";

/// The settings key of node `node`'s open questions (`""`: a single gateway).
fn open_key(node: &str) -> String {
    match node {
        "" => "chela:questions".to_owned(),
        node => format!("chela:questions:{node}"),
    }
}

impl Store {
    /// The questions node `node` (`""`: a single gateway) left showing buttons.
    pub fn open_questions(&self, node: &str) -> Result<Vec<OpenQuestion>, StoreError> {
        Ok(self.get_settings(&open_key(node))?.unwrap_or_default())
    }

    /// Replaces node `node`'s open questions with `open`. Buffered ([`Store::flush`]).
    pub fn put_open_questions(&self, node: &str, open: &[OpenQuestion]) -> Result<(), StoreError> {
        match open.is_empty() {
            true => self.clear_settings(&open_key(node)),
            false => self.put_settings(&open_key(node), &open),
        }
    }

    /// The strangers approved while no gateway ran, oldest first, not told yet.
    pub fn approved_offline(&self) -> Result<Vec<PairingRequest>, StoreError> {
        Ok(self.get_settings(APPROVED_OFFLINE)?.unwrap_or_default())
    }

    /// Replaces the strangers approved while no gateway ran with `noted`. Buffered.
    pub fn put_approved_offline(&self, noted: &[PairingRequest]) -> Result<(), StoreError> {
        match noted.is_empty() {
            true => self.clear_settings(APPROVED_OFFLINE),
            false => self.put_settings(APPROVED_OFFLINE, &noted),
        }
    }
}
