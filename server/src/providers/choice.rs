//! Which provider a rojo uses now: the first of its candidates that is ready. A candidate
//! still being checked counts as ready when it is a hosted (or kind-less) provider with its
//! key and model set; a local server counts only once it answered. A chat waits a moment for
//! checks still running, and re-checks the candidates (at most every few seconds) before it
//! is refused with the first candidate's fix. Each check's result is recorded here too
//! ([`StatusBoard::record`]), logging each rojo whose provider it changed.

use std::{sync::Arc, time::Duration};

use rojos_config::RojoConfig;
use rojos_llm::Client;

use super::{check, status::Status, status::StatusBoard, ProviderRef};
use crate::{live::LiveProvider, live::Settings};

/// How long a chat waits for checks still running.
const CHAT_WAIT: Duration = Duration::from_secs(3);

/// The shortest time between two checks of one provider that chats ask for.
const CHAT_RECHECK_GAP: Duration = Duration::from_secs(5);

/// The provider a rojo uses.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// As the user knows it (with the model it is asked for).
    pub provider: ProviderRef,
    /// Its client.
    pub client: Client,
    /// Ready, or still checking (a provider that counts as ready until a check says no).
    pub status: Status,
}

/// A rojo's provider as the checks know it now.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The provider to use, if any.
    pub chosen: Option<Chosen>,
    /// No check that could change the choice is still running.
    pub settled: bool,
    /// The fix of the first candidate known to be unavailable.
    pub first_fix: Option<String>,
    /// The key variables of the other unavailable candidates that only lack their key: setting
    /// any one of them is another way out.
    pub other_missing_keys: Vec<String>,
}

impl Selection {
    /// What to tell the user when nothing was chosen: the first candidate's fix, and the other
    /// candidates' key variables when setting one would do.
    pub fn fix(&self, rojo_name: &str) -> String {
        let Some(first) = &self.first_fix else {
            return super::advice::still_checking(rojo_name);
        };
        if self.other_missing_keys.is_empty() {
            return first.clone();
        }
        format!(
            "{first}; or export one of {} and restart the server",
            self.other_missing_keys.join(", ")
        )
    }
}

/// The provider `rojo` uses now.
pub fn select(board: &StatusBoard, settings: &Settings, rojo: &RojoConfig) -> Selection {
    let mut settled = true;
    let mut first_fix = None;
    let mut other_missing_keys = Vec::new();
    for name in &rojo.providers {
        let Some(provider) = settings.providers.get(name) else {
            continue; // the config check makes every candidate a configured provider
        };
        let known = board.known(name, provider);
        match &known.status {
            Status::Unavailable { fix } => match (&first_fix, &provider.config.key_env) {
                (None, _) => first_fix = Some(fix.clone()),
                (Some(_), Some(var)) if provider.config.missing_key => {
                    other_missing_keys.push(var.clone());
                }
                (Some(_), _) => {}
            },
            Status::Ready { model } => {
                let client = known.client.clone().or_else(|| provider.client.clone());
                if let Some(client) = client {
                    let mut reference = super::named_live(name, provider);
                    reference.model.clone_from(model);
                    let status = known.status.clone();
                    return Selection {
                        chosen: Some(Chosen {
                            provider: reference,
                            client,
                            status,
                        }),
                        settled,
                        first_fix,
                        other_missing_keys,
                    };
                }
            }
            Status::Checking => {
                settled = false;
                if let Some(client) = presumed_ready(provider) {
                    return Selection {
                        chosen: Some(Chosen {
                            provider: super::named_live(name, provider),
                            client: client.clone(),
                            status: Status::Checking,
                        }),
                        settled,
                        first_fix,
                        other_missing_keys,
                    };
                }
            }
        }
    }
    Selection {
        chosen: None,
        settled,
        first_fix,
        other_missing_keys,
    }
}

/// The client of a provider that counts as ready while it is being checked: a hosted or
/// kind-less one with its key and model set (a local server must answer first).
fn presumed_ready(provider: &LiveProvider) -> Option<&Client> {
    let local = provider.config.kind.is_some_and(|kind| kind.is_local());
    if local {
        return None;
    }
    provider.usable_client()
}

/// The provider a chat with `rojo` uses: it waits (a few seconds at most) for checks still
/// running, and when none is ready re-checks the candidates before giving up.
///
/// # Errors
///
/// The fix to show when no candidate can be used.
pub async fn for_chat(
    board: &Arc<StatusBoard>,
    settings: &Arc<Settings>,
    rojo_name: &str,
    rojo: &RojoConfig,
) -> Result<Chosen, String> {
    let selection = settle(board, settings, rojo).await;
    if let Some(chosen) = selection.chosen {
        return Ok(chosen);
    }
    let selection = if recheck(board, settings, rojo).await {
        settle(board, settings, rojo).await
    } else {
        selection
    };
    match selection.chosen {
        Some(chosen) => Ok(chosen),
        None => Err(selection.fix(rojo_name)),
    }
}

/// The selection once it is settled, or as it is after [`CHAT_WAIT`]; a provider still being
/// checked then is used if it counts as ready.
async fn settle(board: &StatusBoard, settings: &Settings, rojo: &RojoConfig) -> Selection {
    let mut changes = board.subscribe();
    let wait = async {
        loop {
            let selection = select(board, settings, rojo);
            if selection.settled {
                return selection;
            }
            if changes.changed().await.is_err() {
                return selection;
            }
        }
    };
    match tokio::time::timeout(CHAT_WAIT, wait).await {
        Ok(selection) => selection,
        Err(_) => select(board, settings, rojo),
    }
}

/// Checks again each candidate of `rojo` not checked in the last few seconds, all at once,
/// waiting for them a few seconds at most (each check records its result whenever it ends);
/// whether any was started.
async fn recheck(board: &Arc<StatusBoard>, settings: &Arc<Settings>, rojo: &RojoConfig) -> bool {
    let checks: Vec<_> = rojo
        .providers
        .iter()
        .filter(|name| {
            settings.providers.get(*name).is_some_and(|provider| {
                !provider.config.missing_key && board.begin(name, provider, CHAT_RECHECK_GAP)
            })
        })
        .map(|name| spawn_check(board, settings, name))
        .collect();
    let started = !checks.is_empty();
    let _ = tokio::time::timeout(CHAT_WAIT, futures_util::future::join_all(checks)).await;
    started
}

/// Checks provider `name` (claimed with [`StatusBoard::begin`]) on a task of its own, so it
/// records its result even if nobody waits for it.
pub fn spawn_check(
    board: &Arc<StatusBoard>,
    settings: &Arc<Settings>,
    name: &str,
) -> tokio::task::JoinHandle<()> {
    let (board, settings, name) = (Arc::clone(board), Arc::clone(settings), name.to_owned());
    tokio::spawn(async move {
        let Some(provider) = settings.providers.get(&name) else {
            return;
        };
        let checked = check::check(&name, provider).await;
        board.record(&settings, &name, provider, checked);
    })
}

impl StatusBoard {
    /// Records a check of provider `name` claimed with [`begin`](Self::begin) (dropped when
    /// its configuration changed meanwhile), logs what changed, and wakes the waiters.
    pub fn record(
        &self,
        settings: &Settings,
        name: &str,
        provider: &LiveProvider,
        checked: check::Checked,
    ) {
        if self.record_check(name, provider, checked) {
            self.log_rojos(settings);
        }
    }

    /// Logs each rojo whose provider changed, once the choice is settled.
    fn log_rojos(&self, settings: &Settings) {
        for (name, rojo) in &settings.rojos {
            let selection = select(self, settings, rojo);
            if !selection.settled {
                continue;
            }
            let line = match &selection.chosen {
                Some(chosen) => format!(
                    "{} ({}, model {})",
                    chosen.provider.name,
                    chosen.provider.label(),
                    chosen.provider.model
                ),
                None => selection.fix(name),
            };
            if !self.note_rojo_line(name, &line) {
                continue;
            }
            match &selection.chosen {
                Some(_) => tracing::info!(rojo = %name, "rojo {name} uses provider {line}"),
                None => {
                    tracing::warn!(rojo = %name, "rojo {name} has no provider available: {line}")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_config::ConfigFile;

    /// Settings where `nokey`'s variable is unset and `hosted`'s is set; `local` names its
    /// model, so it has a client before any check.
    fn settings() -> Settings {
        let text = r#"
[providers.local]
kind = "ollama"
model = "qwen2.5:7b"
[providers.hosted]
kind = "openai"
api_key_env = "SET_KEY"
[providers.nokey]
kind = "openai"
api_key_env = "UNSET_KEY"
[rojos.default]
provider = ["nokey", "local", "hosted"]
"#;
        let env = |name: &str| (name == "SET_KEY").then(|| "sk-test".to_owned());
        let path = std::path::Path::new("/x/rojos.toml");
        let file = ConfigFile::parse(text, path, std::path::Path::new("/x"), &env).unwrap();
        Settings::from_config(&file.live).unwrap()
    }

    #[test]
    fn while_checking_a_hosted_provider_with_its_key_counts_as_ready_and_a_local_one_does_not() {
        let (board, settings) = (StatusBoard::default(), settings());
        let selection = select(&board, &settings, settings.rojo("default").unwrap());
        let chosen = selection.chosen.unwrap();
        assert_eq!(chosen.provider.name, "hosted");
        assert_eq!(chosen.status, Status::Checking);
        assert!(!selection.settled, "the local one may still answer");
        let fix = selection.first_fix.unwrap();
        assert!(
            fix.starts_with("OpenAI has no API key: set UNSET_KEY"),
            "{fix}"
        );
    }

    #[test]
    fn a_ready_local_provider_before_a_hosted_one_is_chosen_with_its_listed_model() {
        let (board, settings) = (StatusBoard::default(), settings());
        let local = &settings.providers["local"];
        assert!(board.begin("local", local, Duration::ZERO));
        let mut config = local.config.provider.clone();
        config.model = "qwen2.5:7b".into();
        let checked = check::Checked {
            status: Status::Ready {
                model: "qwen2.5:7b".into(),
            },
            client: Some(Client::new(config).unwrap()),
            detail: None,
        };
        board.record(&settings, "local", local, checked);
        let selection = select(&board, &settings, settings.rojo("default").unwrap());
        let chosen = selection.chosen.unwrap();
        assert_eq!(chosen.provider.name, "local");
        assert_eq!(chosen.provider.model, "qwen2.5:7b");
        assert_eq!(chosen.client.provider().model, "qwen2.5:7b");
        assert!(selection.settled);
    }

    #[test]
    fn with_nothing_available_the_fix_also_names_the_other_keys_that_would_do() {
        let text = r#"
[providers.local]
kind = "ollama"
[providers.a]
kind = "openai"
[providers.b]
kind = "groq"
[rojos.default]
provider = ["local", "a", "b"]
"#;
        let env = |_: &str| None;
        let path = std::path::Path::new("/x/rojos.toml");
        let file = ConfigFile::parse(text, path, std::path::Path::new("/x"), &env).unwrap();
        let settings = Settings::from_config(&file.live).unwrap();
        let board = StatusBoard::default();
        for name in ["local", "a", "b"] {
            let provider = &settings.providers[name];
            assert!(board.begin(name, provider, Duration::ZERO));
            let fix = format!("{name} is out");
            let checked = check::Checked {
                status: Status::Unavailable { fix },
                client: None,
                detail: None,
            };
            board.record(&settings, name, provider, checked);
        }
        let selection = select(&board, &settings, settings.rojo("default").unwrap());
        assert!(selection.chosen.is_none());
        assert_eq!(
            selection.fix("default"),
            "local is out; or export one of OPENAI_API_KEY, GROQ_API_KEY and restart the server"
        );
    }
}
