//! A release `chela gateway` against the fake model and the fake Telegram, for the benches
//! that drive it through Telegram (storm, waiting).

use std::path::Path;
use std::process::Stdio;

use chela_testkit::{FakeModel, FakeTelegram};
use tokio::process::{Child, Command};

use super::BenchResult;

/// Writes `<dir>/config.toml` for the fakes (open DMs, 1 s polls); `extra` goes at the end
/// of the `[agent]` table (keys of it, or whole tables after it).
pub fn write_config(dir: &Path, model: &FakeModel, tg: &FakeTelegram, extra: &str) -> BenchResult {
    let config = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"{}\"\napi_key = \"x\"\n\
         [store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\n{extra}\
         [channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
         poll_timeout_s = 1\n",
        model.openai_base_url(),
        tg.token(),
        tg.api_url()
    );
    std::fs::write(dir.join("config.toml"), config)?;
    Ok(())
}

/// `<bin> --config <dir>/config.toml gateway` with a clean environment (HOME is `dir`).
pub fn spawn(bin: &Path, dir: &Path) -> BenchResult<Child> {
    spawn_with(bin, dir, &[])
}

/// [`spawn`] with `env` added to the clean environment (`RUST_LOG` is `error` unless `env`
/// sets it).
pub fn spawn_with(bin: &Path, dir: &Path, env: &[(&str, &str)]) -> BenchResult<Child> {
    Ok(Command::new(bin)
        .env_clear()
        .env("RUST_LOG", "error")
        .envs(env.iter().copied())
        .env("HOME", dir)
        .env("USER", "bench")
        .env("CHELA_RPC_LISTEN", "")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir)
        .arg("--config")
        .arg(dir.join("config.toml"))
        .arg("gateway")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?)
}

/// Waits (30 s at most) until the gateway polls the fake.
pub async fn wait_polling(tg: &FakeTelegram) -> BenchResult {
    let polling = tg
        .wait_for(
            |t| t.calls().iter().any(|c| c.method == "getupdates"),
            std::time::Duration::from_secs(30),
        )
        .await;
    if polling {
        Ok(())
    } else {
        Err("the gateway never polled".into())
    }
}
