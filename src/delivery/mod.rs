//! Delivery: the last stage of a reply. The outbox worker ([`outbox`]) sends every recorded
//! final, per chat in order, retrying what the platform refuses for now; outgoing files
//! ([`files`]) are checked and attached; the reply journal ([`journal`]) notes each message a
//! reply sends so recovery ([`recover_replies`]) can take back what an unfinished one left
//! and hand a previous process's undelivered finals to the worker. A final of a session with
//! voice replies on (`[tts]`, `/tts on`) is spoken first and goes with a voice note
//! ([`voice`], [`speech`], [`tts_choice`]).
//!
//! The stage owns its state (the outbox's queue and its workers) and takes what it uses at
//! construction: the store, the channels, the delivery settings.

mod answer;
pub mod files;
pub mod journal;
pub mod notices;
pub mod outbox;
mod recover;
pub mod speech;
mod spoken;
pub mod tts_choice;
pub mod voice;

pub use journal::{Holds, RunJournal};
pub use notices::{Channels, Notices, SendError};
pub use outbox::{Delivery, Outbox};
pub use recover::recover_replies;
