//! The `rojos` command line: `--config`, `--log-format` and the subcommands, and [`run`],
//! which carries out every subcommand but the servers themselves (HTTP, and MCP on stdio). The commands print their own
//! output on stdout; errors come back as [`CliError`], one line for the user.
//!
//! Exit codes: 0 success; 1 `rojos init` wrote a file that loads but its provider failed the
//! probe (the file is kept); 2 anything else that failed.

mod commands;
mod error;
pub mod init;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::{Parser, Subcommand};

pub use commands::load_config;
pub use error::CliError;
pub use init::InitArgs;

use crate::{
    logging::{LogFormat, Verbosity},
    mcp::McpTarget,
    state::AppState,
};

/// Rojos: a chat server whose assistants use tool plugins on your project files.
#[derive(Debug, Parser)]
#[command(name = "rojos", version)]
pub struct Cli {
    /// The configuration file (`rojos init` writes one).
    #[arg(
        long,
        env = "ROJOS_CONFIG",
        default_value = "rojos.toml",
        global = true
    )]
    pub config: PathBuf,

    /// How log lines are written to stderr: `text` (coloured on a terminal) or `json` (one
    /// object per line, for log pipelines). `RUST_LOG` sets what is logged.
    #[arg(
        long,
        env = "ROJOS_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub log_format: LogFormat,

    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the server (the default).
    Serve,
    /// Print the OpenAI `tools` array a rojo offers its model, as `GET /tools` does.
    Tools {
        /// The rojo.
        #[arg(long, default_value = "default")]
        rojo: String,
    },
    /// Check the configuration and load every plugin, then exit.
    Check,
    /// Send one small streaming tool-call exchange to a configured provider and report
    /// whether streaming, tool calls and the follow-up turn work.
    Probe {
        /// The provider's name in `[providers]`.
        provider: String,
    },
    /// Write a commented `rojos.toml` for one provider kind, check it and probe the provider.
    /// Without `--kind`, on a terminal, it asks.
    Init(InitArgs),
    /// Bring the conversation store's schema to this build's version, then exit (the server
    /// also does this at start; several hosts may do it at once).
    Migrate,
    /// Serve a rojo's tools on one project over MCP on stdin and stdout, for MCP clients that
    /// start a command (see docs/mcp.md); it ends when the client closes stdin.
    Mcp {
        /// The project the tools work on.
        #[arg(long)]
        project: String,
        /// The rojo whose enabled tools are offered.
        #[arg(long, default_value = "default")]
        rojo: String,
    },
    /// A sandboxed tool plugin worker: started by the server itself, on a socket it passes
    /// (docs/plugins.md, "Isolation"); never run by hand.
    #[command(name = "plugin-worker", hide = true)]
    PluginWorker,
    /// The plugin zygote, which forks sandboxed workers: started by the server itself
    /// (docs/plugins.md, "Isolation"); never run by hand.
    #[command(name = "plugin-zygote", hide = true)]
    PluginZygote,
}

impl Command {
    /// How much this command logs when `RUST_LOG` is not set: the server its start-up and
    /// requests, the other commands only their warnings.
    pub fn verbosity(&self) -> Verbosity {
        match self {
            Command::Serve => Verbosity::Server,
            _ => Verbosity::Command,
        }
    }
}

/// What the binary does once [`run`] returns.
#[derive(Debug)]
pub enum Next {
    /// Serve with this state (the config loaded, plugins and storage opened).
    Serve(AppState),
    /// Serve MCP on stdin and stdout with this state, for this project and rojo.
    McpStdio(AppState, McpTarget),
    /// The command has printed its output: exit with this code.
    Exit(ExitCode),
}

/// Carries out `command` against the config at `config`: a command other than
/// [`Command::Serve`] prints its output on stdout; `serve` gets the server's state ready.
///
/// # Errors
///
/// [`CliError`]: the config is missing or invalid, a name is unknown, a plugin did not load,
/// the probe failed, or `init` wrote nothing.
pub fn run(command: Command, config: &Path) -> Result<Next, CliError> {
    let code = match command {
        Command::Serve => return Ok(Next::Serve(AppState::start(load_config(config)?)?)),
        Command::Tools { rojo } => commands::tools(load_config(config)?, &rojo)?,
        Command::Check => commands::check(load_config(config)?)?,
        Command::Probe { provider } => commands::probe(&load_config(config)?.live, &provider)?,
        Command::Init(args) => init::run(&args, config)?,
        Command::Migrate => commands::migrate(load_config(config)?)?,
        Command::PluginWorker => rojos_plugin_worker::worker::main(),
        Command::PluginZygote => rojos_plugin_worker::zygote::main(),
        Command::Mcp { project, rojo } => {
            let (state, target) = commands::mcp(load_config(config)?, &project, rojo)?;
            return Ok(Next::McpStdio(state, target));
        }
    };
    Ok(Next::Exit(code))
}
