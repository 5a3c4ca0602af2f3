//! What each tool does when called (`tools/call`).

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::tools::{BIG_MAX, IMAGE_BASE64, offered};

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Called {
    /// A `CallToolResult` to answer with.
    Result(Value),
    /// `crash`: the process is to exit with status 3 without answering.
    Crash,
    /// Cancelled by `notifications/cancelled`: no answer.
    Cancelled,
}

use super::jsonrpc::Args;

/// Runs tool `name`; `cancel` ends a `sleep` early.
pub(crate) async fn call(
    name: &str,
    args: &Args,
    crash_tool: bool,
    cancel: &CancellationToken,
) -> Called {
    if !offered(name, crash_tool) {
        return Called::Result(failure(&format!("unknown tool {name}")));
    }
    let done = match name {
        "echo" => string(args, "text").map(|text| success(&format!("echo: {text}"))),
        "add" => add(args),
        "env" => string(args, "name").map(env),
        "read" => match string(args, "path") {
            Ok(path) => Ok(read(path).await),
            Err(bad) => Err(bad),
        },
        "sleep" => match integer(args, "ms") {
            Ok(ms) => return sleep(ms, cancel).await,
            Err(bad) => Err(bad),
        },
        "fail" => Ok(failure("it failed")),
        "big" => integer(args, "chars").map(|n| success(&"x".repeat(clamp(n)))),
        "image" => Ok(image()),
        _ => return Called::Crash,
    };
    Called::Result(
        done.unwrap_or_else(|bad| failure(&format!("invalid arguments for {name}: {bad}"))),
    )
}

/// A successful result holding one text block.
pub(crate) fn success(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// A failed result (`isError: true`) holding one text block.
pub(crate) fn failure(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn add(args: &Args) -> Result<Value, String> {
    let (a, b) = (number(args, "a")?, number(args, "b")?);
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => a.checked_add(b).map(Value::from),
        _ => None,
    };
    let sum = match sum {
        Some(sum) => sum,
        None => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
    };
    let mut result = success(&sum.to_string());
    result["structuredContent"] = json!({ "sum": sum });
    Ok(result)
}

fn env(name: &str) -> Value {
    match std::env::var_os(name) {
        Some(value) => success(&value.to_string_lossy()),
        None => success("(unset)"),
    }
}

async fn read(path: &str) -> Value {
    match tokio::fs::read(path).await {
        Ok(bytes) => success(&String::from_utf8_lossy(&bytes)),
        Err(error) => failure(&error.to_string()),
    }
}

async fn sleep(ms: u64, cancel: &CancellationToken) -> Called {
    tokio::select! {
        () = cancel.cancelled() => Called::Cancelled,
        () = tokio::time::sleep(Duration::from_millis(ms)) => {
            Called::Result(success(&format!("slept {ms} ms")))
        }
    }
}

fn image() -> Value {
    json!({
        "content": [
            {"type": "text", "text": "here is a picture"},
            {"type": "image", "data": IMAGE_BASE64, "mimeType": "image/png"},
        ],
        "isError": false,
    })
}

fn clamp(chars: u64) -> usize {
    usize::try_from(chars).map_or(BIG_MAX, |n| n.min(BIG_MAX))
}

fn string<'a>(args: &'a Args, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` must be a string"))
}

fn number<'a>(args: &'a Args, key: &str) -> Result<&'a serde_json::Number, String> {
    match args.get(key) {
        Some(Value::Number(n)) => Ok(n),
        _ => Err(format!("`{key}` must be a number")),
    }
}

fn integer(args: &Args, key: &str) -> Result<u64, String> {
    args.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("`{key}` must be a non-negative integer"))
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    async fn run(name: &str, args: Value) -> Called {
        let args = args.as_object().cloned().unwrap_or_default();
        call(name, &args, true, &CancellationToken::new()).await
    }

    fn text(called: &Called) -> (String, bool) {
        let Called::Result(result) = called else {
            panic!("no result: {called:?}");
        };
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        (text, result["isError"] == json!(true))
    }

    #[tokio::test]
    async fn simple_tools_answer() {
        let echo = run("echo", json!({"text": "hi"})).await;
        assert_eq!(text(&echo), ("echo: hi".into(), false));
        let fail = run("fail", json!({})).await;
        assert_eq!(text(&fail), ("it failed".into(), true));
        let big = run("big", json!({"chars": 5})).await;
        assert_eq!(text(&big), ("xxxxx".into(), false));
        let env = run("env", json!({"name": "CHELA_SURELY_UNSET_VAR"})).await;
        assert_eq!(text(&env), ("(unset)".into(), false));
        assert_eq!(run("crash", json!({})).await, Called::Crash);
    }

    #[tokio::test]
    async fn add_answers_structured_content() {
        let Called::Result(sum) = run("add", json!({"a": 2, "b": 3})).await else {
            panic!("no result");
        };
        assert_eq!(sum["content"][0]["text"], "5");
        assert_eq!(sum["structuredContent"], json!({"sum": 5}));
        let Called::Result(half) = run("add", json!({"a": 0.5, "b": 1})).await else {
            panic!("no result");
        };
        assert_eq!(half["structuredContent"], json!({"sum": 1.5}));
    }

    #[tokio::test]
    async fn bad_input_is_a_tool_error() {
        let unknown = run("nope", json!({})).await;
        assert_eq!(text(&unknown), ("unknown tool nope".into(), true));
        let (message, is_error) = text(&run("add", json!({"a": "1", "b": 2})).await);
        assert!(
            is_error && message.contains("`a` must be a number"),
            "{message}"
        );
        let read = run("read", json!({"path": "/surely/not/here"})).await;
        let (message, is_error) = text(&read);
        assert!(is_error && message.contains("No such file"), "{message}");
        let crash = call("crash", &Map::new(), false, &CancellationToken::new()).await;
        assert_eq!(text(&crash), ("unknown tool crash".into(), true));
    }

    #[tokio::test]
    async fn image_has_two_blocks() {
        let Called::Result(result) = run("image", json!({})).await else {
            panic!("no result");
        };
        assert_eq!(result["content"][1]["mimeType"], "image/png");
        assert_eq!(result["content"][1]["data"], IMAGE_BASE64);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_ends_early_when_cancelled() {
        let slept = run("sleep", json!({"ms": 5000})).await;
        assert_eq!(text(&slept), ("slept 5000 ms".into(), false));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let args = json!({"ms": 60_000})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            call("sleep", &args, false, &cancel).await,
            Called::Cancelled
        );
    }
}
