//! `[mcp]` and `[mcp.servers.NAME]`: MCP servers whose tools chela's agent (and the coding
//! agents it drives) use (docs/mcp.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tools::ExecApprovals;

/// `[mcp]`: the servers and what every stdio server shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// How stdio servers are confined, as hooks are: `landlock` (everything this user can
    /// reach except chela's store, RPC token file and config) | `off`.
    pub sandbox: super::SandboxMode,
    /// `web` | `none` | `all`: the TCP ports stdio servers may connect to under the sandbox.
    pub network: super::NetworkMode,
    /// More TCP ports stdio servers may connect to under the sandbox.
    pub allow_ports: Vec<u16>,
    /// Seconds a run waits, at most, for a server still starting (counted from the gateway's
    /// start; the gateway itself never waits).
    #[serde(deserialize_with = "super::lenient::secs")]
    pub startup_timeout_s: u64,
    /// Seconds one tool call may take before it is cancelled.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub call_timeout_s: u64,
    /// The servers by name (`[a-z0-9][a-z0-9-]*`, no `__`): their tools are `NAME__tool`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            sandbox: super::SandboxMode::Landlock,
            network: super::NetworkMode::Web,
            allow_ports: Vec::new(),
            startup_timeout_s: 10,
            call_timeout_s: 120,
            servers: BTreeMap::new(),
        }
    }
}

/// `[mcp.servers.NAME]`: one server, started on stdio (`command`) or reached over streamable
/// HTTP (`url`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program of a stdio server (a bare name is looked up on `PATH`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for it (values may use `${VAR}`), beyond the scrubbed environment.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names of chela's environment variables it gets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// The endpoint of a streamable HTTP server (`http://` or `https://`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// Headers sent with every request to it (values may use `${VAR}`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `off` | `ask`: whether each call of its tools needs an owner's approval, as `exec`.
    pub approvals: ExecApprovals,
    /// Whether the coding agents chela drives get it too (in ACP `session/new`).
    #[serde(default = "yes")]
    pub coding_agents: bool,
    /// `false` keeps it configured but not started.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

impl McpServerConfig {
    /// True for a stdio server (`command`), false for an HTTP one (`url`).
    pub fn is_stdio(&self) -> bool {
        !self.command.trim().is_empty()
    }
}

impl McpConfig {
    /// Checks every server: a valid name, one of `command` and `url`, an http(s) URL, only
    /// stdio keys on a stdio server and only HTTP keys on an HTTP one.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        if self.startup_timeout_s == 0 || self.call_timeout_s == 0 {
            let key = match self.startup_timeout_s {
                0 => "mcp.startup_timeout_s",
                _ => "mcp.call_timeout_s",
            };
            return Err((key.to_owned(), "must be at least 1".to_owned()));
        }
        for (name, server) in &self.servers {
            let key = |field: &str| format!("mcp.servers.{name}{field}");
            if !super::mcp_names::is_server_name(name) {
                return Err((
                    key(""),
                    "a server name is lowercase letters, digits and '-' (at most 32), e.g. \"files\""
                        .to_owned(),
                ));
            }
            server
                .check()
                .map_err(|(field, message)| (key(field), message))?;
        }
        Ok(())
    }

    /// The names of the servers that are enabled, in order.
    pub fn enabled(&self) -> impl Iterator<Item = (&String, &McpServerConfig)> {
        self.servers.iter().filter(|(_, s)| s.enabled)
    }
}

/// Checks that every server named elsewhere is configured: `[agent] mcp`, `[[agents]] mcp`
/// and the MCP entries (`mcp:NAME`, `NAME__tool`) of the tool policy's lists.
pub(crate) fn check_references(config: &super::Config) -> Result<(), (String, String)> {
    let known = |name: &str| name == "*" || config.mcp.servers.contains_key(name);
    let unknown = |key: String, name: &str| {
        let names: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
        Err((
            key,
            format!(
                "no MCP server {name:?} in [mcp.servers] (there are: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ),
        ))
    };
    let selections = std::iter::once(("agent.mcp".to_owned(), &config.agent.mcp)).chain(
        (config.agents.iter().enumerate()).map(|(i, a)| (format!("agents[{i}].mcp"), &a.mcp)),
    );
    for (key, names) in selections {
        for name in names.iter().flatten() {
            if name == "*" || !config.mcp.servers.contains_key(name) {
                return unknown(key, name);
            }
        }
    }
    for (key, entries) in policy_lists(config) {
        for entry in entries {
            if let Some(server) = super::mcp_names::mcp_entry_server(entry)
                && !known(server)
            {
                return unknown(key.clone(), server);
            }
        }
    }
    Ok(())
}

/// Every allow and deny list of the tool policy, with its key.
fn policy_lists(config: &super::Config) -> Vec<(String, &Vec<String>)> {
    let tools = &config.tools;
    let mut lists = vec![
        ("tools.allow".to_owned(), &tools.allow),
        ("tools.deny".to_owned(), &tools.deny),
    ];
    let scopes = (tools
        .channels
        .iter()
        .map(|(n, s)| (format!("tools.channels.{n}"), s)))
    .chain(
        tools
            .groups
            .iter()
            .map(|(n, s)| (format!("tools.groups.\"{n}\""), s)),
    );
    for (key, scope) in scopes {
        lists.push((format!("{key}.allow"), &scope.allow));
        lists.push((format!("{key}.deny"), &scope.deny));
    }
    for (i, agent) in config.agents.iter().enumerate() {
        lists.extend(
            agent
                .tools_allow
                .as_ref()
                .map(|l| (format!("agents[{i}].tools_allow"), l)),
        );
        lists.extend(
            agent
                .tools_deny
                .as_ref()
                .map(|l| (format!("agents[{i}].tools_deny"), l)),
        );
    }
    lists
}

impl McpServerConfig {
    fn check(&self) -> Result<(), (&'static str, String)> {
        match (self.is_stdio(), self.url.trim().is_empty()) {
            (true, false) => Err((
                ".url",
                "a server is either stdio (command) or HTTP (url), not both".to_owned(),
            )),
            (false, true) => Err((
                ".command",
                "set command (a stdio server) or url (a streamable HTTP server)".to_owned(),
            )),
            (true, true) if !self.headers.is_empty() => Err((
                ".headers",
                "headers are for HTTP servers (url); a stdio server takes env".to_owned(),
            )),
            (false, false)
                if !self.args.is_empty() || !self.env.is_empty() || !self.pass_env.is_empty() =>
            {
                Err((
                    ".args",
                    "args, env and pass_env are for stdio servers (command); an HTTP server takes headers"
                        .to_owned(),
                ))
            }
            (false, false) if self.headers.iter().any(|(n, v)| bad_header(n, v)) => Err((
                ".headers",
                "a header name is letters, digits and -, and no value holds a line break"
                    .to_owned(),
            )),
            (false, false) => super::urls::check(&self.url, super::urls::HTTP)
                .map_err(|message| (".url", message)),
            (true, true) => Ok(()),
        }
    }
}

/// Whether a header cannot be sent as written: a name that is not a token of letters,
/// digits and `-`, or a value with a line break.
fn bad_header(name: &str, value: &str) -> bool {
    let name_ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    !name_ok || value.contains(['\r', '\n', '\0'])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> Result<McpConfig, (String, String)> {
        let config: McpConfig = toml::from_str(toml).unwrap();
        config.check().map(|()| config)
    }

    #[test]
    fn stdio_and_http_servers_parse_with_defaults() {
        let config = parse(
            "[servers.files]\ncommand = \"mcp-server-filesystem\"\nargs = [\"/srv\"]\n\
             [servers.docs]\nurl = \"https://docs.example/mcp\"\nheaders = { Authorization = \"Bearer x\" }\napprovals = \"ask\"\n",
        )
        .unwrap();
        let files = &config.servers["files"];
        assert!(files.is_stdio() && files.enabled && files.coding_agents);
        assert_eq!(files.approvals, ExecApprovals::Off);
        let docs = &config.servers["docs"];
        assert!(!docs.is_stdio());
        assert_eq!(docs.approvals, ExecApprovals::Ask);
        assert_eq!(config.startup_timeout_s, 10);
    }

    #[test]
    fn agents_choose_servers_and_every_name_must_be_configured() {
        let load = |toml: &str| {
            let config = crate::config::Config::from_toml_str(toml, "c.toml", &|_| None).unwrap();
            check_references(&config).map(|()| config)
        };
        let servers = "[mcp.servers.a]\ncommand = \"a\"\n[mcp.servers.b]\ncommand = \"b\"\n";
        let config = load(&format!(
            "{servers}[agent]\nmcp = [\"a\"]\n[[agents]]\nid = \"x\"\nmcp = [\"b\"]\n[[agents]]\nid = \"y\"\n"
        ))
        .unwrap();
        assert_eq!(config.agent.mcp, Some(vec!["a".to_owned()]));
        assert_eq!(
            config.for_agent("x").unwrap().agent.mcp,
            Some(vec!["b".to_owned()])
        );
        // An entry without its own choice takes the default agent's.
        assert_eq!(
            config.for_agent("y").unwrap().agent.mcp,
            Some(vec!["a".to_owned()])
        );
        let key = |toml: String| load(&toml).unwrap_err().0;
        assert_eq!(
            key(format!("{servers}[agent]\nmcp = [\"c\"]\n")),
            "agent.mcp"
        );
        assert_eq!(
            key(format!("{servers}[[agents]]\nid = \"x\"\nmcp = [\"c\"]\n")),
            "agents[0].mcp"
        );
        assert_eq!(
            key(format!("{servers}[tools]\ndeny = [\"c__x\"]\n")),
            "tools.deny"
        );
        assert_eq!(
            key(format!(
                "{servers}[tools.channels.telegram]\nallow = [\"mcp:c\"]\n"
            )),
            "tools.channels.telegram.allow"
        );
        assert!(
            load(format!("{servers}[tools]\nallow = [\"mcp:*\", \"a__x\"]\n").as_str()).is_ok()
        );
    }

    #[test]
    fn a_bad_server_names_its_key() {
        let key = |toml: &str| parse(toml).unwrap_err().0;
        assert_eq!(
            key("[servers.Files]\ncommand = \"x\"\n"),
            "mcp.servers.Files"
        );
        assert_eq!(key("[servers.a__b]\ncommand = \"x\"\n"), "mcp.servers.a__b");
        assert_eq!(key("[servers.x]\n"), "mcp.servers.x.command");
        assert_eq!(
            key("[servers.x]\ncommand = \"x\"\nurl = \"http://h/mcp\"\n"),
            "mcp.servers.x.url"
        );
        assert_eq!(key("[servers.x]\nurl = \"h:1/mcp\"\n"), "mcp.servers.x.url");
        assert_eq!(
            key("[servers.x]\nurl = \"http://h/mcp\"\nargs = [\"a\"]\n"),
            "mcp.servers.x.args"
        );
        assert_eq!(
            key("[servers.x]\ncommand = \"x\"\nheaders = { A = \"b\" }\n"),
            "mcp.servers.x.headers"
        );
        assert_eq!(key("call_timeout_s = 0\n"), "mcp.call_timeout_s");
        assert_eq!(
            key("[servers.x]\nurl = \"http://h/mcp\"\nheaders = { \"A B\" = \"c\" }\n"),
            "mcp.servers.x.headers"
        );
    }
}
