//! A simulated prompt cache, so tests and benches can see what a request's shape lets a
//! provider cache. A request is read as a sequence of blocks (tools, the system prompt,
//! messages or their content blocks); a prefix is identified by a hash of its blocks with any
//! `cache_control` left out.
//!
//! - OpenAI (chat completions, Responses): automatic. Every prefix a request holds is kept;
//!   a later request reads the longest kept prefix it starts with, when that prefix is at
//!   least [`MIN_CHARS`] long (OpenAI's 1,024 tokens).
//! - Anthropic: explicit. Only prefixes ending at a block marked `cache_control` are written;
//!   a request reads the longest kept prefix ending within 20 blocks before one of its marks
//!   (the API's lookback), and writes the prefixes of its marks beyond what it read. A prefix
//!   under [`MIN_CHARS`] is neither read nor written.
//!
//! Tokens are characters / 4, as in the rest of the fake.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// The least cacheable prefix, in characters (1,024 tokens).
pub(crate) const MIN_CHARS: usize = 4096;

/// How many blocks before a mark the API looks for a kept prefix.
const LOOKBACK: usize = 20;

/// Cached and written characters of one request's prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cached {
    /// Read from the cache.
    pub(crate) read: usize,
    /// Written to the cache (Anthropic only).
    pub(crate) written: usize,
}

/// The prefixes the fake server keeps.
#[derive(Debug, Default)]
pub(crate) struct PromptCache {
    kept: Mutex<HashSet<u64>>,
}

/// One block of a prompt: its text (without `cache_control`) and whether it is marked.
struct Block {
    text: String,
    marked: bool,
}

impl PromptCache {
    /// An OpenAI request's cached characters (every prefix is kept for later requests).
    pub(crate) fn automatic(&self, body: &Value) -> Cached {
        let blocks = openai_blocks(body);
        let (hashes, lengths) = prefixes(&blocks);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let read = (0..hashes.len())
            .rev()
            .find(|&i| lengths[i] >= MIN_CHARS && kept.contains(&hashes[i]))
            .map_or(0, |i| lengths[i]);
        kept.extend(hashes);
        Cached { read, written: 0 }
    }

    /// An Anthropic request's cached and written characters (only marked prefixes kept).
    pub(crate) fn explicit(&self, body: &Value) -> Cached {
        let blocks = anthropic_blocks(body);
        let (hashes, lengths) = prefixes(&blocks);
        let marks: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].marked).collect();
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let read = marks
            .iter()
            .flat_map(|&mark| (mark.saturating_sub(LOOKBACK)..=mark).rev())
            .filter(|&i| lengths[i] >= MIN_CHARS && kept.contains(&hashes[i]))
            .map(|i| lengths[i])
            .max()
            .unwrap_or(0);
        let mut written = 0;
        for &mark in &marks {
            if lengths[mark] >= MIN_CHARS && lengths[mark] > read {
                kept.insert(hashes[mark]);
                written = lengths[mark] - read;
            }
        }
        Cached { read, written }
    }
}

/// The hash and length of each prefix of `blocks` (prefix `i` ends with block `i`).
fn prefixes(blocks: &[Block]) -> (Vec<u64>, Vec<usize>) {
    let mut hasher = DefaultHasher::new();
    let mut length = 0;
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut lengths = Vec::with_capacity(blocks.len());
    for block in blocks {
        block.text.hash(&mut hasher);
        length += block.text.len();
        hashes.push(hasher.finish());
        lengths.push(length);
    }
    (hashes, lengths)
}

/// `value` as text without its `cache_control` fields, and whether it had one.
fn block(value: &Value) -> Block {
    let mut value = value.clone();
    let marked = value
        .as_object_mut()
        .and_then(|o| o.remove("cache_control"))
        .is_some();
    Block {
        text: value.to_string(),
        marked,
    }
}

/// Tools, then `instructions` (Responses), then each message or input item.
fn openai_blocks(body: &Value) -> Vec<Block> {
    let tools = body["tools"].as_array().into_iter().flatten();
    let instructions = body.get("instructions").into_iter();
    let messages = body["messages"]
        .as_array()
        .or_else(|| body["input"].as_array())
        .into_iter()
        .flatten();
    tools
        .chain(instructions)
        .chain(messages)
        .map(block)
        .collect()
}

/// Tools, then the system blocks, then each message's content blocks (the API's order).
fn anthropic_blocks(body: &Value) -> Vec<Block> {
    let mut blocks: Vec<Block> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(block)
        .collect();
    match &body["system"] {
        Value::Array(system) => blocks.extend(system.iter().map(block)),
        Value::String(_) => blocks.push(block(&body["system"])),
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default().to_owned();
        match &message["content"] {
            Value::Array(content) => blocks.extend(content.iter().map(|b| {
                let mut block = block(b);
                block.text.insert_str(0, &role);
                block
            })),
            other => blocks.push(Block {
                text: format!("{role}{other}"),
                marked: false,
            }),
        }
    }
    blocks
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn long(tag: &str) -> String {
        format!("{tag}{}", "x".repeat(MIN_CHARS))
    }

    #[test]
    fn openai_reads_the_longest_prefix_seen_before() {
        let cache = PromptCache::default();
        let first = json!({"messages": [{"role": "system", "content": long("s")}, {"role": "user", "content": "a"}]});
        assert_eq!(cache.automatic(&first).read, 0);
        let second = json!({"messages": [{"role": "system", "content": long("s")}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]});
        let read = cache.automatic(&second).read;
        assert!(read > MIN_CHARS, "{read}");
        let other = json!({"messages": [{"role": "system", "content": long("t")}]});
        assert_eq!(cache.automatic(&other).read, 0);
    }

    #[test]
    fn anthropic_caches_only_marked_prefixes() {
        let cache = PromptCache::default();
        let unmarked = json!({"system": long("s"), "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]});
        assert_eq!(cache.explicit(&unmarked), Cached::default());
        assert_eq!(cache.explicit(&unmarked), Cached::default());
        let mark = json!({"type": "ephemeral"});
        let marked = json!({"system": [{"type": "text", "text": long("s"), "cache_control": mark}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": mark}]}]});
        let first = cache.explicit(&marked);
        assert_eq!(first.read, 0);
        assert!(first.written > MIN_CHARS);
        let next = json!({"system": [{"type": "text", "text": long("s"), "cache_control": mark}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]},
                         {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": mark}]}]});
        let second = cache.explicit(&next);
        assert_eq!(second.read, first.written);
        assert!(second.written > 0);
    }
}
