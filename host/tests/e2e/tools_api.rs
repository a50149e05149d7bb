//! `GET /tools` and `GET /healthz` on a running host: the OpenAI definitions each rojo offers,
//! authorisation, and a plugin left out of `[plugins].load` being absent.

use serde_json::Value;

use crate::support::{
    host::{client, HostConfig, TestHost},
    plugin_lib, BUILTIN_TOOLS,
};

fn names(tools: &[Value]) -> Vec<&str> {
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn tools_lists_the_openai_definitions_of_the_five_plugins() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let response = host.get("/tools?rojo=default").await;
    assert_eq!(response.status(), 200);
    let tools: Vec<Value> = response.json().await.unwrap();
    let mut expected = BUILTIN_TOOLS.to_vec();
    expected.sort();
    assert_eq!(names(&tools), expected);
    for tool in &tools {
        assert_eq!(tool["type"], "function");
        let parameters = &tool["function"]["parameters"];
        assert_eq!(parameters["type"], "object");
        assert!(
            parameters["properties"]["path"]["type"] == "string",
            "{tool}"
        );
        assert!(
            parameters.get("additionalProperties").is_none(),
            "providers reject it: {tool}"
        );
        assert!(tool["function"]["description"].as_str().unwrap().len() > 10);
    }
}

#[tokio::test]
async fn a_plugin_left_out_of_the_load_list_is_not_offered() {
    let mut config = HostConfig::builtins();
    config
        .load
        .retain(|p| !p.ends_with("librojos_tool_write_text_content.so"));
    let host = TestHost::start(config).await;
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    assert_eq!(
        names(&tools),
        [
            "create_directory",
            "get_text_content",
            "list_files",
            "read_path_meta"
        ]
    );
}

#[tokio::test]
async fn a_rojo_offers_only_the_tools_it_enables() {
    let config = HostConfig::builtins().with(
        "[rojos.reader]\nprovider = \"scripted\"\ntools = [\"list_files\", \"get_text_content\"]\n",
    );
    let host = TestHost::start(config).await;
    let tools: Vec<Value> = host.get("/tools?rojo=reader").await.json().await.unwrap();
    assert_eq!(names(&tools), ["get_text_content", "list_files"]);
}

#[tokio::test]
async fn tools_requires_a_valid_token_and_a_known_rojo() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let url = format!("{}/tools?rojo=default", host.url);
    assert_eq!(client().get(&url).send().await.unwrap().status(), 401);
    let wrong = client().get(&url).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["error"], "missing or invalid bearer token");

    let unknown = host.get("/tools?rojo=nobody").await;
    assert_eq!(unknown.status(), 400);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(
        body["error"],
        "unknown rojo \"nobody\" (this server has: default)"
    );
}

#[tokio::test]
async fn healthz_answers_without_a_token() {
    let mut config = HostConfig::builtins();
    config.load = vec![plugin_lib("rojos_tool_list_files")];
    let host = TestHost::start(config).await;
    let response = client()
        .get(format!("{}/healthz", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn destructive_tools_say_so_in_their_definition() {
    let mut config = HostConfig::builtins();
    config.load.push(plugin_lib("rojos_tool_move_path"));
    config.load.push(plugin_lib("rojos_tool_delete_path"));
    let host = TestHost::start(config).await;
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    for tool in &tools {
        let name = tool["function"]["name"].as_str().unwrap();
        let description = tool["function"]["description"].as_str().unwrap();
        let destructive = description.starts_with(rojos::plugins::DESTRUCTIVE_MARK);
        assert_eq!(
            destructive,
            matches!(name, "move_path" | "delete_path"),
            "{name}: {description}"
        );
    }
    assert_eq!(tools.len(), 7);
}
