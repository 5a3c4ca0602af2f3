//! The specs of the agent's own tools, built once. A tool's name, description and schema do
//! not change, and every model call needs them several times: the request, the prompt's tool
//! list, the compaction's estimate, finding the tool of a call. Built each time, they were a
//! good part of a reply's JSON work (docs/benchmarks.md, "Against a minimal bot").

use std::sync::{Arc, OnceLock};

use crate::agent::provider::ToolSpec;
use crate::agent::tools::Tool;

/// The specs of one tool list and their size, kept from the first use.
#[derive(Debug, Default)]
pub struct SpecCache {
    specs: OnceLock<Vec<Arc<ToolSpec>>>,
    chars: OnceLock<usize>,
}

impl SpecCache {
    /// The specs of `tools`, in their order. Built at the first call: `tools` is the same
    /// list at every call (the agent's own tools, fixed when it is built). Shared: a run's
    /// list and each model call's request hold them without copying a schema.
    pub fn specs(&self, tools: &[Arc<dyn Tool>]) -> &[Arc<ToolSpec>] {
        let specs = (self.specs).get_or_init(|| tools.iter().map(|t| Arc::new(t.spec())).collect());
        debug_assert_eq!(specs.len(), tools.len(), "a SpecCache serves one tool list");
        specs
    }

    /// [`spec_chars`] of [`SpecCache::specs`].
    pub fn chars(&self, tools: &[Arc<dyn Tool>]) -> usize {
        *self
            .chars
            .get_or_init(|| spec_chars(self.specs(tools).iter().map(|s| &**s)))
    }
}

/// The characters `specs` add to a call: names, descriptions and schemas as sent.
pub fn spec_chars<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> usize {
    specs
        .into_iter()
        .map(|t| {
            t.name.chars().count()
                + t.description.chars().count()
                + t.parameters.to_string().chars().count()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_are_built_once_and_match_the_tools() {
        let tools = crate::agent::tools::builtin_tools();
        let cache = SpecCache::default();
        let first = cache.specs(&tools).as_ptr();
        let names: Vec<&str> = cache
            .specs(&tools)
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        let expected: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
        assert_eq!(names, expected);
        assert_eq!(cache.specs(&tools).as_ptr(), first);
        let fresh: Vec<ToolSpec> = tools.iter().map(|t| t.spec()).collect();
        assert_eq!(cache.chars(&tools), spec_chars(&fresh));
        assert!(cache.chars(&tools) > 0);
    }
}
