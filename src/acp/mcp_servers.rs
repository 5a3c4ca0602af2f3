//! The `[mcp.servers]` a coding agent gets in `session/new` and `session/load`
//! (`mcpServers`): every enabled server with `coding_agents = true`, stdio ones always (every
//! agent takes them), HTTP ones only when the agent said in `initialize` that it takes them
//! (`mcpCapabilities.http`). A stdio server then runs as the agent's child, inside the agent's
//! sandbox. The agent calls them without chela in between, so a server whose calls need an
//! owner's approval (`approvals = "ask"`), or that `[tools] deny` takes away everywhere, is
//! never handed over.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    EnvVariable, HttpHeader, McpCapabilities, McpServer, McpServerHttp, McpServerStdio,
};

use crate::config::{Config, ExecApprovals, McpServerConfig};

/// The servers of `config` coding agents get (before their capabilities are known).
pub fn for_coding_agents(config: &Config) -> Vec<McpServer> {
    (config.mcp.enabled())
        .filter(|(_, server)| server.coding_agents && server.approvals == ExecApprovals::Off)
        .filter(|(name, _)| !denied_everywhere(config, name))
        .map(|(name, server)| entry(name, server))
        .collect()
}

/// Whether `[tools] deny` takes every tool of server `name` away (`mcp:NAME`, `mcp:*`, `*`).
fn denied_everywhere(config: &Config, name: &str) -> bool {
    let whole = [format!("mcp:{name}"), "mcp:*".to_owned(), "*".to_owned()];
    config.tools.deny.iter().any(|entry| whole.contains(entry))
}

/// Those of `servers` an agent with `capabilities` takes.
pub fn offered(servers: &[McpServer], capabilities: &McpCapabilities) -> Vec<McpServer> {
    (servers.iter())
        .filter(|server| match server {
            McpServer::Http(_) => capabilities.http,
            McpServer::Sse(_) => capabilities.sse,
            _ => true,
        })
        .cloned()
        .collect()
}

fn entry(name: &str, server: &McpServerConfig) -> McpServer {
    if !server.is_stdio() {
        let headers = (server.headers.iter())
            .map(|(name, value)| HttpHeader::new(name, value))
            .collect();
        return McpServer::Http(McpServerHttp::new(name, server.url.trim()).headers(headers));
    }
    // Variables named in `pass_env` carry chela's values, as for chela's own start of it,
    // where `env` wins.
    let passed = (server.pass_env.iter())
        .filter(|name| !server.env.contains_key(*name))
        .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?)));
    let env = (passed.chain(server.env.clone()))
        .map(|(name, value)| EnvVariable::new(name, value))
        .collect();
    McpServer::Stdio(
        McpServerStdio::new(name, absolute(server.command.trim()))
            .args(server.args.clone())
            .env(env),
    )
}

/// `program` as an absolute path (ACP asks for one): a bare name is looked up on `PATH`;
/// one that is not found is passed as written.
fn absolute(program: &str) -> PathBuf {
    let path = Path::new(program);
    if path.is_absolute() || program.contains('/') {
        return path.to_path_buf();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| path.to_path_buf())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Config {
        Config::from_toml_str(toml, "test", &|_: &str| None).unwrap()
    }

    #[test]
    fn stdio_servers_always_http_ones_when_the_agent_takes_them() {
        let config = config(
            "[mcp.servers.files]\ncommand = \"sh\"\nargs = [\"-c\", \"x\"]\nenv = { A = \"1\" }\n\
             [mcp.servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { X-Key = \"k\" }\n\
             [mcp.servers.own]\ncommand = \"/bin/true\"\ncoding_agents = false\n\
             [mcp.servers.asks]\ncommand = \"/bin/true\"\napprovals = \"ask\"\n\
             [mcp.servers.gone]\ncommand = \"/bin/true\"\n\
             [mcp.servers.off]\ncommand = \"/bin/true\"\nenabled = false\n\
             [tools]\ndeny = [\"mcp:gone\"]\n",
        );
        let all = for_coding_agents(&config);
        let json = serde_json::to_value(&all).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 2, "{json}");
        assert_eq!(json[0]["type"], "http");
        assert_eq!(json[0]["name"], "docs");
        assert_eq!(
            json[0]["headers"][0],
            serde_json::json!({"name": "X-Key", "value": "k"})
        );
        assert_eq!(json[1]["name"], "files");
        assert!(json[1].get("type").is_none());
        assert!(
            json[1]["command"].as_str().unwrap().ends_with("/sh"),
            "{json}"
        );
        assert_eq!(
            json[1]["env"][0],
            serde_json::json!({"name": "A", "value": "1"})
        );
        let none = McpCapabilities::default();
        assert_eq!(offered(&all, &none).len(), 1);
        assert_eq!(
            offered(&all, &McpCapabilities::default().http(true)).len(),
            2
        );
    }
}
