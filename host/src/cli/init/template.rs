//! The text of the `rojos.toml` that `rojos init` writes: the repository's layout (server,
//! token comment, plugins, one provider, the `default` and `reader` rojos) for one provider
//! kind, every key commented. What the user chose is written as keys; what the kind fills in
//! is shown as commented-out keys to override.

use std::fmt::Write;

use rojos_llm::ProviderKind;

use super::answers::Answers;

/// Comments start after this many columns, as in the repository's `rojos.toml`.
const CODE_WIDTH: usize = 36;

/// `code` with `comment` aligned after it (and at least one space away).
fn line(code: &str, comment: &str) -> String {
    format!("{code:<CODE_WIDTH$} # {comment}\n")
}

/// `text` as a TOML basic string, quotes and escapes included.
pub(super) fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The whole file for `answers`, loading the plugin libraries at `plugins` (as written:
/// relative to the file's folder or absolute), each with its tool name.
pub(super) fn render(answers: &Answers, plugins: &[(String, &str)]) -> String {
    let kind = answers.kind;
    let mut text = format!(
        "# Rojos configuration, written by `rojos init` for {label}. Relative paths resolve against\n\
         # this file's folder; docs/configuration.md describes every key.\n\
         # Check it with `rojos check`, and the provider with `rojos probe {name}`.\n\n",
        label = kind.label(),
        name = kind.name()
    );
    text.push_str(&server());
    text.push_str(&plugins_table(plugins));
    text.push_str(&provider(answers));
    text.push_str(&rojos(kind.name()));
    text
}

fn server() -> String {
    let mut text = String::from("[server]\n");
    text.push_str(&line(r#"bind = "127.0.0.1:8080""#, "the panel and API"));
    text.push_str(&line(
        r#"storage = "storage""#,
        "project files: storage/<projectId>/root/",
    ));
    text.push_str(
        "\n# No [[auth.tokens]]: the server makes a token at start and prints it. To fix one:\n\
         # [[auth.tokens]]\n\
         # token_env = \"ROJOS_TOKEN\"\n\
         # projects = [\"*\"]\n\n",
    );
    text
}

fn plugins_table(plugins: &[(String, &str)]) -> String {
    let mut text = String::from("[plugins]\nload = [\n");
    for (path, tool) in plugins {
        let entry = format!("  {},", quoted(path));
        if super::plugins::DESTRUCTIVE.contains(tool) {
            text.push_str(&line(&entry, "destructive"));
        } else {
            text.push_str(&entry);
            text.push('\n');
        }
    }
    text.push_str("]\n");
    text.push_str(&line(
        r#"dir = "plugins.d""#,
        "drop-in folder for your own tools (docs/plugins.md)",
    ));
    text.push_str(&line(
        "call_timeout_secs = 10",
        "one tool call, then it is abandoned with an error result",
    ));
    text.push_str(&line("max_concurrent_calls = 8", "per plugin"));
    text.push('\n');
    text
}

fn provider(answers: &Answers) -> String {
    let kind = answers.kind;
    let mut text = format!("# {}: {}.\n", kind.label(), setup(kind));
    let _ = writeln!(text, "[providers.{}]", kind.name());
    text.push_str(&line(
        &format!("kind = {}", quoted(kind.name())),
        "fills in base_url, api_key_env, a model and quirks",
    ));
    text.push_str(&model(answers));
    match &answers.base_url {
        Some(url) => text.push_str(&line(&format!("base_url = {}", quoted(url)), "chosen")),
        None => text.push_str(&line(
            &format!("# base_url = {}", quoted(kind.base_url())),
            "the kind's; set it for another host or port",
        )),
    }
    match (&answers.api_key_env, kind.api_key_env()) {
        (Some(var), _) => text.push_str(&line(
            &format!("api_key_env = {}", quoted(var)),
            "the API key is read from it at start, never logged",
        )),
        (None, Some(var)) => text.push_str(&line(
            &format!("# api_key_env = {}", quoted(var)),
            "the kind's: the API key is read from it at start",
        )),
        (None, None) => text.push_str(&line(
            "# api_key_env = \"MY_SERVER_KEY\"",
            "if the server wants an API key",
        )),
    }
    text.push('\n');
    text
}

/// How to make `kind` available, as a sentence for the file's comment.
fn setup(kind: ProviderKind) -> String {
    match kind.api_key_env() {
        Some(var) => format!("{}, and set {var} where rojos runs", kind.setup_hint()),
        None => kind.setup_hint().to_owned(),
    }
}

fn model(answers: &Answers) -> String {
    match answers.model.as_deref().or(answers.kind.default_model()) {
        Some(model) => line(
            &format!("model = {}", quoted(model)),
            "a chat model with tool support",
        ),
        None => line(
            "# model = \"NAME\"",
            "not set: the first model the server lists is used",
        ),
    }
}

fn rojos(provider: &str) -> String {
    let provider = quoted(provider);
    let mut text = String::from("[rojos.default]\n");
    text.push_str(&line(
        &format!("provider = {provider}"),
        "or a list in order of preference",
    ));
    text.push_str(
        "system_prompt = \"You are Rojo, an assistant that works on the user's project files with the tools you are given. Paths are relative to the project root.\"\n",
    );
    text.push_str(&line(
        r#"tools = "*""#,
        "every loaded tool, the destructive ones and drop-ins too",
    ));
    text.push_str("max_steps = 12\n\n");
    text.push_str(&line(
        "[rojos.reader]",
        "a rojo that can look but not touch",
    ));
    let _ = writeln!(text, "provider = {provider}");
    text.push_str("tools = [\"read_path_meta\", \"get_text_content\", \"list_files\"]\n");
    text.push_str("max_steps = 8\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(kind: ProviderKind) -> Answers {
        Answers {
            kind,
            model: None,
            base_url: None,
            api_key_env: None,
        }
    }

    fn parse(text: &str) -> crate::config::ConfigFile {
        crate::config::ConfigFile::parse(
            text,
            std::path::Path::new("/srv/rojos.toml"),
            std::path::Path::new("/srv"),
            &|_| None,
        )
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_hosted_kind_gets_its_model_written_and_its_url_and_key_shown_as_comments() {
        let text = render(&answers(ProviderKind::OpenAi), &[]);
        assert!(text.contains("model = \"gpt-4.1-mini\""), "{text}");
        assert!(
            text.contains("# base_url = \"https://api.openai.com/v1\""),
            "{text}"
        );
        assert!(
            text.contains("# api_key_env = \"OPENAI_API_KEY\""),
            "{text}"
        );
        let live = parse(&text).live;
        let provider = &live.providers["openai"];
        assert_eq!(provider.provider.model, "gpt-4.1-mini");
        assert!(provider.missing_key);
        assert_eq!(live.rojos["default"].providers, ["openai"]);
        assert_eq!(live.rojos["reader"].providers, ["openai"]);
    }

    #[test]
    fn a_local_kind_without_a_model_takes_the_first_listed_one() {
        let text = render(&answers(ProviderKind::Ollama), &[]);
        assert!(
            text.contains(
                "# model = \"NAME\"                     # not set: the first model the server lists is used"
            ),
            "{text}"
        );
        assert!(parse(&text).live.providers["ollama"].model_from_list);
    }

    #[test]
    fn chosen_values_are_written_as_keys_and_quoted() {
        let chosen = Answers {
            kind: ProviderKind::Vllm,
            model: Some("org/model \"q\"".to_owned()),
            base_url: Some("http://gpu.lan:8000/v1".to_owned()),
            api_key_env: Some("VLLM_KEY".to_owned()),
        };
        let live = parse(&render(&chosen, &[])).live;
        let provider = &live.providers["vllm"];
        assert_eq!(provider.provider.model, "org/model \"q\"");
        assert_eq!(provider.provider.base_url, "http://gpu.lan:8000/v1");
        assert_eq!(provider.key_env.as_deref(), Some("VLLM_KEY"));
    }

    #[test]
    fn plugin_paths_are_listed_and_the_destructive_ones_marked() {
        let plugins = [
            ("a/libx.so".to_owned(), "list_files"),
            ("/abs/liby.so".to_owned(), "delete_path"),
        ];
        let text = render(&answers(ProviderKind::Groq), &plugins);
        assert!(text.contains("  \"a/libx.so\",\n"), "{text}");
        assert!(
            text.contains("  \"/abs/liby.so\",                    # destructive\n"),
            "{text}"
        );
        let file = parse(&text);
        assert_eq!(
            file.config.plugins.load,
            [
                std::path::PathBuf::from("/srv/a/libx.so"),
                std::path::PathBuf::from("/abs/liby.so")
            ]
        );
    }
}
