//! TEMPORARY stub for compiling while the real config lands (replaced on merge).
#![allow(missing_docs)]
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode { Steer, Followup, Collect, Interrupt }
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DropPolicy { Summarize, Old, New }
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmScope { Main, PerPeer, PerChannelPeer, PerAccountChannelPeer }
#[derive(Debug, Clone, Default)]
pub struct Config { pub store: StoreConfig, pub model: ModelConfig, pub agent: AgentConfig, pub tools: ToolsConfig, pub session: SessionConfig, pub queue: QueueConfig, pub terminal: TerminalConfig }
#[derive(Debug, Clone, Default)] pub struct StoreConfig { pub path: PathBuf }
#[derive(Debug, Clone, Default)] pub struct ModelConfig { pub provider: String, pub base_url: String, pub api_key: String, pub model: String, pub max_tokens: u32, pub idle_timeout_s: u64, pub max_retries: u32 }
#[derive(Debug, Clone, Default)] pub struct AgentConfig { pub id: String, pub workspace: PathBuf, pub timeout_s: u64, pub identity: String, pub max_concurrent_runs: usize, pub bootstrap_max_chars: usize, pub bootstrap_total_max_chars: usize, pub skills_dirs: Vec<PathBuf> }
#[derive(Debug, Clone, Default)] pub struct ToolsConfig { pub exec_timeout_s: u64, pub max_output_chars: usize }
#[derive(Debug, Clone)] pub struct SessionConfig { pub dm_scope: DmScope, pub identity_links: BTreeMap<String, Vec<String>> }
impl Default for SessionConfig { fn default() -> Self { SessionConfig { dm_scope: DmScope::PerChannelPeer, identity_links: BTreeMap::new() } } }
#[derive(Debug, Clone)] pub struct QueueConfig { pub mode: QueueMode, pub debounce_ms: u64, pub cap: usize, pub drop: DropPolicy }
impl Default for QueueConfig { fn default() -> Self { QueueConfig { mode: QueueMode::Steer, debounce_ms: 500, cap: 20, drop: DropPolicy::Summarize } } }
#[derive(Debug, Clone, Default)] pub struct TerminalConfig { pub user: String, pub show_tools: bool }
impl Config { pub fn resolved_max_concurrent_runs(&self) -> usize { 8 } }
pub struct LoadedConfig { pub config: Config, pub source: Option<PathBuf>, pub base_dir: PathBuf }
