//! `rojos init`: writes a commented `rojos.toml` for one provider kind (from flags, or asked
//! on a terminal), never over an existing file without `--force`, then checks it as
//! `rojos check` does and probes the provider as `rojos probe` does. A hosted kind whose key
//! variable is unset is not probed: init says how to set it. A failed probe keeps the file.

mod answers;
mod ask;
mod error;
mod plugins;
mod template;

use std::{
    io::{IsTerminal, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use rojos_llm::ProviderKind;

use answers::Answers;
pub use error::InitError;

use super::{commands, CliError};
use crate::{
    config::{ConfigFile, LiveConfig},
    state::AppState,
};

/// `rojos init`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The provider's kind; without it, on a terminal, init asks.
    #[arg(long, value_parser = kind_parser())]
    pub kind: Option<ProviderKind>,
    /// The model (default: the kind's; for a local server, the first one it lists).
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL (default: the kind's).
    #[arg(long)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default: the kind's).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Where to write the file (default: the --config path, ./rojos.toml).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Do not probe the provider after writing the file.
    #[arg(long)]
    pub no_probe: bool,
    /// The folder holding the built tool plugins (`librojos_tool_*.so`; default: the rojos
    /// binary's own folder).
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<PathBuf>,
}

/// `--kind`'s values are the kinds' names; a wrong one is answered with the list.
fn kind_parser() -> impl TypedValueParser<Value = ProviderKind> {
    PossibleValuesParser::new(ProviderKind::ALL.map(ProviderKind::name)).map(|name| {
        ProviderKind::from_name(&name).expect("the parser accepts only the kinds' names")
    })
}

/// Runs `rojos init`, writing to `-o`, else to the `--config` path `config`.
///
/// Exit code 0: written and checked, and the probe passed or was not run (`--no-probe`, a
/// missing key, no model to probe); 1: written and checked, but the probe failed.
///
/// # Errors
///
/// [`InitError`] when nothing was written, or the file written does not load.
pub(super) fn run(args: &InitArgs, config: &Path) -> Result<ExitCode, CliError> {
    let path = std::path::absolute(args.output.as_deref().unwrap_or(config))
        .map_err(|error| write_error(config, error))?;
    if path.exists() && !args.force {
        return Err(InitError::Exists(path).into());
    }
    let answers = answers(args)?;
    let folder = folder_of(&path)?;
    let plugin_dir = plugins::folder(args.plugins.as_deref())?;
    let plugins = plugins::paths(&plugin_dir, &folder)?;
    let text = template::render(&answers, &plugins);
    let env = |name: &str| std::env::var(name).ok();
    ConfigFile::parse(&text, &path, &folder, &env).map_err(InitError::Invalid)?;
    write(&path, &text, args.force)?;
    println!("wrote {} for {}", path.display(), answers.kind.label());
    let file = commands::load_config(&path)?;
    let live = file.live.clone();
    let state = AppState::start(file).map_err(|error| InitError::Check {
        path: path.clone(),
        error: Box::new(error),
    })?;
    println!("{}", commands::summary(&state));
    drop(state);
    let steps = Steps { config: path };
    if args.no_probe {
        println!("{}", steps.start());
        return Ok(ExitCode::SUCCESS);
    }
    probe(&live, answers.kind, &steps)
}

/// The answers from the flags, or asked on the terminal when `--kind` is not given.
fn answers(args: &InitArgs) -> Result<Answers, InitError> {
    if let Some(kind) = args.kind {
        return Ok(Answers {
            kind,
            model: args.model.clone(),
            base_url: args.base_url.clone(),
            api_key_env: args.api_key_env.clone(),
        });
    }
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(InitError::NoKind);
    }
    let env = |name: &str| std::env::var(name).ok();
    let mut asked = ask::ask(&mut std::io::stdin().lock(), &mut std::io::stdout(), &env)?;
    // Flags given beside the questions still apply.
    asked.model = args.model.clone().or(asked.model);
    asked.base_url = args.base_url.clone().or(asked.base_url);
    asked.api_key_env = args.api_key_env.clone();
    Ok(asked)
}

/// The config's folder, created if needed, canonical (plugin paths are made relative to it).
fn folder_of(path: &Path) -> Result<PathBuf, InitError> {
    let folder = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(folder)
        .and_then(|()| folder.canonicalize())
        .map_err(|error| write_error(path, error))
}

/// Writes `text` to `path` whole (a server watching the file never reads half of it); without
/// `force`, never over a file, even one that appeared since the check.
fn write(path: &Path, text: &str, force: bool) -> Result<(), InitError> {
    let folder = path.parent().unwrap_or(Path::new("/"));
    let mut file = tempfile::NamedTempFile::new_in(folder).map_err(|e| write_error(path, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| write_error(path, e))?;
    let persisted = if force {
        file.persist(path)
    } else {
        file.persist_noclobber(path)
    };
    match persisted {
        Ok(_) => Ok(()),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(InitError::Exists(path.to_owned()))
        }
        Err(e) => Err(write_error(path, e.error)),
    }
}

fn write_error(path: &Path, error: std::io::Error) -> InitError {
    InitError::Write {
        path: path.to_owned(),
        error,
    }
}

/// The command lines init suggests next, for the file it wrote.
struct Steps {
    config: PathBuf,
}

impl Steps {
    /// `rojos --config PATH SUBCOMMAND`, with the binary as it was started
    /// (`./target/release/rojos`).
    fn command(&self, subcommand: &str) -> String {
        let binary = std::env::args()
            .next()
            .unwrap_or_else(|| "rojos".to_owned());
        let line = format!("{binary} --config {} {subcommand}", self.config.display());
        line.trim_end().to_owned()
    }

    /// The last line: how to start the server with the file.
    fn start(&self) -> String {
        format!("start the server with `{}`", self.command(""))
    }
}

/// Probes the provider of `kind` in the written file, printing the report and what to do.
fn probe(live: &LiveConfig, kind: ProviderKind, steps: &Steps) -> Result<ExitCode, CliError> {
    let name = kind.name();
    let probe_again = steps.command(&format!("probe {name}"));
    let client = match commands::probe_client(live, name) {
        Ok(client) => client,
        Err(CliError::MissingKey { .. }) => {
            let var = live.providers[name]
                .key_env
                .as_deref()
                .unwrap_or("its key variable");
            println!(
                "not probed: {var} is not set. {}, `export {var}=...`, then check it with `{probe_again}`",
                capitalised(kind.setup_hint()),
            );
            println!("{}", steps.start());
            return Ok(ExitCode::SUCCESS);
        }
        Err(CliError::NoModel { fix, .. }) => {
            println!(
                "{} failed the probe (the file is kept): {fix}; then check it again with `{probe_again}`",
                kind.label()
            );
            return Ok(ExitCode::from(1));
        }
        Err(other) => return Err(other),
    };
    if commands::run_probe(&client)? {
        println!("{}", steps.start());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} failed the probe (the file is kept). {}, then check it again with `{probe_again}`",
        kind.label(),
        capitalised(&fix(kind)),
    );
    Ok(ExitCode::from(1))
}

/// What to try when `kind` failed the probe.
fn fix(kind: ProviderKind) -> String {
    if kind.is_local() {
        format!("{}, or set base_url to where it listens", kind.setup_hint())
    } else {
        "check the key, the model and base_url in the file".to_owned()
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
