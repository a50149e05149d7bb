//! `rojos init`'s short interactive mode (stdin and stdout a terminal, no `--kind`): a
//! numbered list of kinds, then the model and the base URL, each with its default in brackets
//! that Enter accepts. The default kind is the first hosted one whose API key is set, else
//! Ollama.

use std::io::{BufRead, Write};

use rojos_llm::ProviderKind;

use super::{answers::Answers, error::InitError};
use crate::config::EnvLookup;

/// Asks for the answers on `output`, reading them from `input`; `env` tells which API keys
/// are set.
///
/// # Errors
///
/// [`InitError::Cancelled`] at the end of the input; [`InitError::Ask`] when the terminal
/// cannot be read or written.
pub(super) fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    env: EnvLookup<'_>,
) -> Result<Answers, InitError> {
    let kind = ask_kind(input, output, env)?;
    let model_default = kind
        .default_model()
        .unwrap_or("the first one the server lists");
    let model = answer(input, output, &format!("Model [{model_default}]: "))?;
    let base_url = answer(input, output, &format!("Base URL [{}]: ", kind.base_url()))?;
    Ok(Answers {
        kind,
        model: model.filter(|m| Some(m.as_str()) != kind.default_model()),
        base_url: base_url.filter(|u| u != kind.base_url()),
        api_key_env: None,
    })
}

fn ask_kind(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    env: EnvLookup<'_>,
) -> Result<ProviderKind, InitError> {
    let default = default_kind(env);
    writeln!(output, "Which provider should rojos use?").map_err(InitError::Ask)?;
    for (number, kind) in (1..).zip(ProviderKind::ALL) {
        writeln!(
            output,
            "  {number:>2}. {:<11} {}",
            kind.label(),
            where_(kind, env)
        )
        .map_err(InitError::Ask)?;
    }
    let prompt = format!("Provider [{}]: ", number_of(default));
    loop {
        let Some(text) = answer(input, output, &prompt)? else {
            return Ok(default);
        };
        match pick(&text) {
            Some(kind) => return Ok(kind),
            None => writeln!(
                output,
                "  choose a number from 1 to {}, or a kind's name (openai, ollama, ...)",
                ProviderKind::ALL.len()
            )
            .map_err(InitError::Ask)?,
        }
    }
}

/// What the list says about `kind`: where it runs, and whether its key is set.
fn where_(kind: ProviderKind, env: EnvLookup<'_>) -> String {
    match kind.api_key_env() {
        Some(var) if key_set(var, env) => format!("hosted, key in {var} (set)"),
        Some(var) => format!("hosted, key in {var}"),
        None => format!("on this machine, {}", kind.base_url()),
    }
}

fn key_set(var: &str, env: EnvLookup<'_>) -> bool {
    env(var).is_some_and(|value| !value.trim().is_empty())
}

/// The first hosted kind whose key is set, else Ollama.
fn default_kind(env: EnvLookup<'_>) -> ProviderKind {
    ProviderKind::ALL
        .into_iter()
        .find(|kind| kind.api_key_env().is_some_and(|var| key_set(var, env)))
        .unwrap_or(ProviderKind::Ollama)
}

fn number_of(kind: ProviderKind) -> usize {
    ProviderKind::ALL
        .iter()
        .position(|k| *k == kind)
        .map_or(1, |i| i + 1)
}

/// The kind an answer names: its number in the list, its name or its label.
fn pick(text: &str) -> Option<ProviderKind> {
    if let Ok(number) = text.parse::<usize>() {
        return number
            .checked_sub(1)
            .and_then(|i| ProviderKind::ALL.get(i).copied());
    }
    ProviderKind::ALL.into_iter().find(|kind| {
        kind.name().eq_ignore_ascii_case(text) || kind.label().eq_ignore_ascii_case(text)
    })
}

/// Prints `prompt` and reads one line: `None` for an empty answer (take the default).
fn answer(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    prompt: &str,
) -> Result<Option<String>, InitError> {
    output
        .write_all(prompt.as_bytes())
        .and_then(|()| output.flush())
        .map_err(InitError::Ask)?;
    let mut line = String::new();
    if input.read_line(&mut line).map_err(InitError::Ask)? == 0 {
        return Err(InitError::Cancelled);
    }
    let line = line.trim();
    Ok((!line.is_empty()).then(|| line.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str, env: EnvLookup<'_>) -> (Result<Answers, InitError>, String) {
        let mut output = Vec::new();
        let result = ask(&mut input.as_bytes(), &mut output, env);
        (result, String::from_utf8(output).unwrap())
    }

    #[test]
    fn enter_accepts_every_default_and_the_default_kind_is_ollama_without_keys() {
        let (answers, shown) = run("\n\n\n", &|_| None);
        let answers = answers.unwrap();
        assert_eq!(answers.kind, ProviderKind::Ollama);
        assert_eq!((answers.model, answers.base_url), (None, None));
        assert!(
            shown.contains("   8. Ollama      on this machine, http://127.0.0.1:11434/v1\n"),
            "{shown}"
        );
        assert!(shown.contains("Provider [8]: "), "{shown}");
        assert!(
            shown.contains("Model [the first one the server lists]: "),
            "{shown}"
        );
    }

    #[test]
    fn a_set_key_makes_its_kind_the_default() {
        let env = |var: &str| (var == "GROQ_API_KEY").then(|| "gsk-1".to_owned());
        let (answers, shown) = run("\nmy-model\n\n", &env);
        let answers = answers.unwrap();
        assert_eq!(answers.kind, ProviderKind::Groq);
        assert_eq!(answers.model.as_deref(), Some("my-model"));
        assert!(
            shown.contains("Groq        hosted, key in GROQ_API_KEY (set)"),
            "{shown}"
        );
        assert!(
            shown.contains("Model [llama-3.3-70b-versatile]: "),
            "{shown}"
        );
    }

    #[test]
    fn a_kind_is_picked_by_number_or_name_and_a_wrong_answer_is_asked_again() {
        let (answers, shown) = run("12\nnope\nLM Studio\n\nhttp://127.0.0.1:4321/v1\n", &|_| {
            None
        });
        let answers = answers.unwrap();
        assert_eq!(answers.kind, ProviderKind::LmStudio);
        assert_eq!(
            answers.base_url.as_deref(),
            Some("http://127.0.0.1:4321/v1")
        );
        assert_eq!(
            shown.matches("choose a number from 1 to 11").count(),
            2,
            "{shown}"
        );
        assert_eq!(
            run("2\n\n\n", &|_| None).0.unwrap().kind,
            ProviderKind::Anthropic
        );
        assert_eq!(
            run("deepseek\n\n\n", &|_| None).0.unwrap().kind,
            ProviderKind::DeepSeek
        );
    }

    #[test]
    fn the_end_of_the_input_cancels() {
        assert!(matches!(run("1\n", &|_| None).0, Err(InitError::Cancelled)));
    }
}
