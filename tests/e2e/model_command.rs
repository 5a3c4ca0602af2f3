//! End-to-end `/model` through `chela chat`: show, refuse a name outside `model.models`, switch
//! this conversation's model (the next calls and the transcript use it), and go back.

use crate::common;

use common::{KEY, Provider, Setup, messages};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_switches_this_conversation_and_back() {
    let setup = Setup::start(
        Provider::OpenAi,
        "steer",
        200,
        "model = \"base-model\"\nmodels = [\"base-model\", \"other-model\"]",
    )
    .await;
    let mut chat = setup.chat();
    chat.send("/model").await;
    chat.wait_for("Model: openai/base-model\nChoices: base-model, other-model")
        .await;
    chat.send("/model made-up").await;
    chat.wait_for("Unknown model made-up.").await;
    chat.send("/model other-model").await;
    chat.wait_for("Model: openai/other-model (this conversation's; default base-model)")
        .await;
    chat.send("first").await;
    chat.wait_for("ok: first").await;
    chat.send("/model default").await;
    chat.wait_for("Model: openai/base-model\n").await;
    chat.send("second").await;
    chat.wait_for("ok: second").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);

    let calls = setup.model_calls();
    let models: Vec<&str> = calls.iter().map(|b| b["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["other-model", "base-model"]);
    let entries = setup.export(KEY).await;
    let answered: Vec<&str> = messages(&entries)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ["other-model", "base-model"]);
    let changes: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "model_change")
        .map(|e| e["modelId"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["other-model", "base-model"]);
}
