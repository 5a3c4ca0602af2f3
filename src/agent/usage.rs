//! A session's usage (`/usage`, `chela sessions show`): the tokens its model calls used, in
//! all (since the session began, `/new` included) and in its last turn, what they cost, and
//! how full the context window is, read from its transcript (every model call's answer keeps
//! its tokens, provider and model). Compaction summaries and memory flushes are not in the
//! transcript: the metrics count them, this does not.

use crate::agent::pricing::{PRICES_TAKEN, Pricing, dollars, thousands};
use crate::domain::message::{Message, StopReason, Usage};
use crate::store::{Entry, EntryKind};

/// Tokens and cost of some model calls.
#[derive(Debug, Default, PartialEq)]
struct Tally {
    usage: Usage,
    calls: u64,
    /// The cost of the calls whose model has a price.
    cost: f64,
    /// Models without a known price, among the calls.
    unpriced: Vec<String>,
}

impl Tally {
    fn add(&mut self, pricing: &Pricing, provider: &str, model: &str, usage: &Usage) {
        self.calls += 1;
        for (sum, n) in [
            (&mut self.usage.input, usage.input),
            (&mut self.usage.output, usage.output),
            (&mut self.usage.cache_read, usage.cache_read),
            (&mut self.usage.cache_write, usage.cache_write),
        ] {
            *sum += n;
        }
        match pricing.cost(provider, model, usage) {
            Some(cost) => self.cost += cost,
            // A call that used nothing (it failed at once) costs nothing, priced or not.
            None if *usage == Usage::default() => {}
            None => {
                let name = format!("{provider}/{model}");
                if !self.unpriced.contains(&name) {
                    self.unpriced.push(name);
                }
            }
        }
    }

    /// `12,345 in (4,000 cached) · 678 out · 9 calls · $0.0123`.
    fn line(&self) -> String {
        let u = &self.usage;
        let mut line = format!("{} in", thousands(u.input + u.cache_read + u.cache_write));
        if u.cache_read > 0 {
            line.push_str(&format!(" ({} cached)", thousands(u.cache_read)));
        }
        line.push_str(&format!(
            " · {} out · {} model call",
            thousands(u.output),
            self.calls
        ));
        if self.calls != 1 {
            line.push('s');
        }
        match self.unpriced.is_empty() {
            true => line.push_str(&format!(" · {}", dollars(self.cost))),
            false if self.cost > 0.0 => {
                line.push_str(&format!(" · at least {}", dollars(self.cost)));
            }
            false => {}
        }
        line
    }
}

/// The usage of the transcript `entries`, with the model's `context_window` (0: unknown);
/// `None` before its first model call.
pub fn summary(entries: &[Entry], pricing: &Pricing, context_window: u64) -> Option<String> {
    let mut session = Tally::default();
    let mut turn = Tally::default();
    let mut last_prompt = 0;
    // Whether the last call ended a run's answer (a user message then starts a turn; one
    // after a tool call was steered into the run going on).
    let mut answered = true;
    for entry in entries {
        let Entry::Item(item) = entry else { continue };
        match &item.kind {
            EntryKind::Message(Message::User(_)) if answered => turn = Tally::default(),
            EntryKind::Message(Message::Assistant(m)) => {
                session.add(pricing, &m.provider, &m.model, &m.usage);
                turn.add(pricing, &m.provider, &m.model, &m.usage);
                let prompt = m.usage.input + m.usage.cache_read + m.usage.cache_write;
                if prompt > 0 {
                    last_prompt = prompt;
                }
                answered = m.stop_reason != StopReason::ToolUse;
            }
            EntryKind::Message(_) => {}
            // The window starts again: what filled it is gone.
            EntryKind::Reset { .. } => {
                last_prompt = 0;
                turn = Tally::default();
                answered = true;
            }
            EntryKind::Compaction { .. } => last_prompt = 0,
            EntryKind::ModelChange { .. } => {}
        }
    }
    if session.calls == 0 {
        return None;
    }
    let mut lines = vec![format!("Session: {}", session.line())];
    if turn.calls > 0 {
        lines.push(format!("Last turn: {}", turn.line()));
    }
    if last_prompt > 0 {
        let mut context = format!("Context: {} tokens", thousands(last_prompt));
        if let Some(percent) = last_prompt.saturating_mul(100).checked_div(context_window) {
            context = format!(
                "Context: {} of {} tokens ({percent}%)",
                thousands(last_prompt),
                thousands(context_window)
            );
        }
        lines.push(context);
    }
    match session.unpriced.as_slice() {
        [] => lines.push(format!(
            "Prices of {PRICES_TAKEN} or [pricing]; tokens as the provider counted them."
        )),
        unpriced => lines.push(format!(
            "No price known for {}: add it under [pricing] to see its cost.",
            unpriced.join(", ")
        )),
    }
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::{AssistantMessage, StopReason};
    use crate::store::Item;

    fn entry(message: Message) -> Entry {
        Entry::Item(Item {
            id: "00000001".into(),
            parent_id: None,
            timestamp: String::new(),
            kind: EntryKind::Message(message),
        })
    }

    fn answered(model: &str, input: u64, output: u64, cache_read: u64) -> Entry {
        entry(Message::Assistant(AssistantMessage {
            content: Vec::new(),
            provider: "openai".into(),
            model: model.into(),
            usage: Usage {
                input,
                output,
                cache_read,
                cache_write: 0,
                total_tokens: input + output + cache_read,
            },
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: 0,
        }))
    }

    #[test]
    fn a_session_sums_every_call_and_the_last_turn_its_own() {
        let entries = [
            entry(Message::user("hi")),
            answered("gpt-4.1-mini", 1_000_000, 0, 0),
            entry(Message::user("again")),
            answered("gpt-4.1-mini", 2_000, 500, 1_000),
            answered("gpt-4.1-mini", 3_000, 100, 0),
        ];
        let text = summary(&entries, &Pricing::default(), 128_000).unwrap();
        assert!(
            text.contains(
                "Session: 1,006,000 in (1,000 cached) · 600 out · 3 model calls · $0.403"
            ),
            "{text}"
        );
        assert!(
            text.contains("Last turn: 6,000 in (1,000 cached) · 600 out · 2 model calls · $0.0031"),
            "{text}"
        );
        assert!(
            text.contains("Context: 3,000 of 128,000 tokens (2%)"),
            "{text}"
        );
        assert!(text.contains("Prices of 2026-11"), "{text}");
    }

    fn with_reason(entry: Entry, stop_reason: StopReason) -> Entry {
        let Entry::Item(mut item) = entry else {
            unreachable!()
        };
        if let EntryKind::Message(Message::Assistant(m)) = &mut item.kind {
            m.stop_reason = stop_reason;
        }
        Entry::Item(item)
    }

    #[test]
    fn a_steered_message_stays_in_its_turn_and_a_reset_empties_the_context() {
        let mut entries = vec![
            entry(Message::user("hi")),
            with_reason(answered("gpt-4.1-mini", 100, 10, 0), StopReason::ToolUse),
            entry(Message::user("steered in")),
            answered("gpt-4.1-mini", 200, 20, 0),
        ];
        let text = summary(&entries, &Pricing::default(), 1_000).unwrap();
        assert!(
            text.contains("Last turn: 300 in · 30 out · 2 model calls"),
            "{text}"
        );
        entries.push(Entry::Item(Item {
            id: "00000002".into(),
            parent_id: None,
            timestamp: String::new(),
            kind: EntryKind::Reset {
                reason: "new".into(),
            },
        }));
        let text = summary(&entries, &Pricing::default(), 1_000).unwrap();
        assert!(!text.contains("Context:"), "{text}");
        assert!(!text.contains("Last turn:"), "{text}");
        assert!(text.contains("Session: 300 in"), "{text}");
    }

    #[test]
    fn a_model_without_a_price_is_named_and_its_cost_left_out() {
        let entries = [entry(Message::user("hi")), answered("my-local", 10, 5, 0)];
        let text = summary(&entries, &Pricing::default(), 0).unwrap();
        assert!(
            text.contains("Session: 10 in · 5 out · 1 model call\n"),
            "{text}"
        );
        assert!(
            text.contains("No price known for openai/my-local"),
            "{text}"
        );
        assert!(text.contains("Context: 10 tokens"), "{text}");
        assert_eq!(summary(&[], &Pricing::default(), 0), None);
    }
}
