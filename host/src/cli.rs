//! The `rojos` command line: `--config` and the subcommands.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Rojos: a chat server whose assistants use tool plugins on your project files.
#[derive(Debug, Parser)]
#[command(name = "rojos", version)]
pub struct Cli {
    /// The configuration file.
    #[arg(
        long,
        env = "ROJOS_CONFIG",
        default_value = "rojos.toml",
        global = true
    )]
    pub config: PathBuf,

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
}
