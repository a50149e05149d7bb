//! `rojos tools`, `rojos check`, `rojos probe`, `rojos migrate` and the checks of `rojos mcp`, and loading the config file with a message
//! that says how to get one when it is missing. `init` reuses the check and the probe.

use std::{
    io::ErrorKind,
    path::{Path, PathBuf},
    process::ExitCode,
};

use crate::{
    config::{ConfigError, ConfigFile, LiveConfig},
    live::ProviderError,
    mcp::McpTarget,
    names,
    providers::{self, advice},
    state::{AppState, StartError},
    storage::ProjectId,
};

use super::CliError;

/// Reads and validates the config at `path`. A missing or unreadable file is one message with
/// the path and the fix (`rojos init`).
///
/// # Errors
///
/// [`CliError::NoConfig`], [`CliError::UnreadableConfig`] or the [`ConfigError`] naming the
/// key at fault.
pub fn load_config(path: &Path) -> Result<ConfigFile, CliError> {
    ConfigFile::load(path).map_err(|e| match e {
        ConfigError::Read { error, .. } if error.kind() == ErrorKind::NotFound => {
            CliError::NoConfig { path: shown(path) }
        }
        ConfigError::Read { error, .. } => CliError::UnreadableConfig {
            path: shown(path),
            error,
        },
        other => CliError::Config(other),
    })
}

/// `path` as messages show it: absolute, so the user sees where it was looked for.
fn shown(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// `rojos tools --rojo NAME`: the rojo's OpenAI `tools` array, as `GET /tools` serves it.
pub(super) fn tools(file: ConfigFile, rojo: &str) -> Result<ExitCode, CliError> {
    let state = AppState::start(file)?;
    let settings = state.live.settings();
    let selection = &settings.rojo(rojo)?.tools;
    let definitions = state.registry.snapshot().definitions(selection);
    println!("{}", serde_json::to_string_pretty(&definitions)?);
    Ok(ExitCode::SUCCESS)
}

/// `rojos mcp --project ID --rojo NAME`: the server's state and the checked target, before
/// anything is read from stdin.
pub(super) fn mcp(
    file: ConfigFile,
    project: &str,
    rojo: String,
) -> Result<(AppState, McpTarget), CliError> {
    let project = ProjectId::parse(project)?;
    let state = AppState::start(file)?;
    state.live.settings().rojo(&rojo)?;
    Ok((state, McpTarget { project, rojo }))
}

/// `rojos check`: every tool and the library (or `mcp:SERVER`) it came from, a line per MCP
/// server (its tool count, or why it did not start), then a summary line.
pub(super) fn check(file: ConfigFile) -> Result<ExitCode, CliError> {
    let state = AppState::start(file)?;
    for tool in state.registry.snapshot().tools() {
        println!("{:<24} {}", tool.name(), tool.source().display());
        if let Some(reason) = tool.quarantined() {
            println!(
                "{:<24} quarantined: {reason}; not offered to models. Lift it by replacing the \
                 file with a different build, or by deleting its record in {} and restarting",
                "",
                state
                    .config
                    .storage
                    .join(crate::state::QUARANTINE_RECORDS)
                    .display()
            );
        }
    }
    for report in &state.mcp.reports {
        println!("{report}");
    }
    println!("{}", summary(&state));
    Ok(ExitCode::SUCCESS)
}

/// `rojos migrate`: migrates the configured conversation store and says to which version.
pub(super) fn migrate(file: ConfigFile) -> Result<ExitCode, CliError> {
    let report = crate::store::migrate(&file.config.store).map_err(StartError::from)?;
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// `config ok: 7 tools, 3 rojos`.
pub(super) fn summary(state: &AppState) -> String {
    format!(
        "config ok: {} tools, {} rojos",
        state.registry.snapshot().tools().count(),
        state.live.settings().rojos.len()
    )
}

/// `rojos probe NAME`: the probe's report, and whether the provider passed.
pub(super) fn probe(live: &LiveConfig, name: &str) -> Result<ExitCode, CliError> {
    let client = probe_client(live, name)?;
    let passed = run_probe(&client)?;
    let runtime = tokio::runtime::Runtime::new().map_err(CliError::Runtime)?;
    for line in runtime.block_on(crate::probe::windows(&client, name, live)) {
        println!("{line}");
    }
    if passed {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::ProbeFailed {
            name: name.to_owned(),
        })
    }
}

/// The client to probe provider `name` with.
///
/// # Errors
///
/// The name is unknown (the message lists the configured ones), the provider's key variable is
/// not set, or it names no model.
pub(super) fn probe_client(live: &LiveConfig, name: &str) -> Result<rojos_llm::Client, CliError> {
    let Some(config) = live.providers.get(name) else {
        return Err(CliError::UnknownProvider {
            name: name.to_owned(),
            known: names::listed(live.providers.keys()),
        });
    };
    let provider = providers::named(name, config);
    if config.missing_key {
        return Err(CliError::MissingKey {
            name: name.to_owned(),
            advice: advice::missing_key(&provider),
        });
    }
    if config.model_from_list {
        return first_listed_model_client(name, config);
    }
    rojos_llm::Client::new(config.provider.clone()).map_err(|source| {
        CliError::Provider(ProviderError {
            name: name.to_owned(),
            source,
        })
    })
}

/// A client for the first chat model provider `name` lists, found by the same check the
/// server runs in the background (`providers::check`).
fn first_listed_model_client(
    name: &str,
    config: &crate::config::ProviderConfig,
) -> Result<rojos_llm::Client, CliError> {
    let live = crate::live::LiveProvider::new(config.clone(), None);
    let runtime = tokio::runtime::Runtime::new().map_err(CliError::Runtime)?;
    let checked = runtime.block_on(crate::providers::check::check(name, &live));
    match (checked.client, checked.status) {
        (Some(client), _) => {
            println!(
                "no `model` is set: using {}, the first chat model it lists",
                client.provider().model
            );
            Ok(client)
        }
        (None, crate::providers::status::Status::Unavailable { fix }) => Err(CliError::NoModel {
            name: name.to_owned(),
            fix,
        }),
        (None, _) => Err(CliError::NoModel {
            name: name.to_owned(),
            fix: "it did not list a model to use: set `model` for it in rojos.toml".to_owned(),
        }),
    }
}

/// Runs the probe with `client`, printing each check; whether all passed.
pub(super) fn run_probe(client: &rojos_llm::Client) -> Result<bool, CliError> {
    println!(
        "probing {} (model {})",
        rojos_llm::display_url(client.endpoint().as_str()),
        client.provider().model
    );
    let runtime = tokio::runtime::Runtime::new().map_err(CliError::Runtime)?;
    let checks = runtime.block_on(crate::probe::run(client));
    for check in &checks {
        println!("{check}");
    }
    let passed = checks.len() == 3 && checks.iter().all(|c| c.ok);
    if passed {
        println!("the provider works with rojos");
    }
    Ok(passed)
}
