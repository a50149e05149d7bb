//! The `rojos` binary: parse the command line, load the config and plugins, then serve (or
//! print the tools, or check) — everything else lives in the library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use rojos::{
    cli::{Cli, Command},
    config::{ConfigFile, LiveConfig},
    state::AppState,
};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("rojos=info,tower_http=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rojos: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let file = ConfigFile::load(&cli.config)?;
    let command = cli.command.unwrap_or(Command::Serve);
    if let Command::Probe { provider } = &command {
        return probe(&file.live, provider);
    }
    let state = AppState::start(file)?;
    match command {
        Command::Probe { .. } => unreachable!("handled above"),
        Command::Serve => serve(state),
        Command::Tools { rojo } => {
            let settings = state.live.settings();
            let selection = &settings.rojo(&rojo)?.tools;
            let definitions = state.registry.snapshot().definitions(selection);
            println!("{}", serde_json::to_string_pretty(&definitions)?);
            Ok(())
        }
        Command::Check => {
            let registry = state.registry.snapshot();
            for tool in registry.tools() {
                println!("{:<24} {}", tool.name(), tool.source.display());
            }
            println!(
                "config ok: {} tools, {} rojos",
                registry.tools().count(),
                state.live.settings().rojos.len()
            );
            Ok(())
        }
    }
}

fn probe(config: &LiveConfig, name: &str) -> anyhow::Result<()> {
    let provider = config
        .providers
        .get(name)
        .with_context(|| format!("no provider named {name:?} in the config"))?;
    let client = rojos_llm::Client::new(provider.provider.clone())?;
    println!(
        "probing {} (model {})",
        rojos_llm::display_url(client.endpoint().as_str()),
        provider.provider.model
    );
    let checks = tokio::runtime::Runtime::new()?.block_on(rojos::probe::run(&client));
    for check in &checks {
        println!("{check}");
    }
    if checks.len() == 3 && checks.iter().all(|c| c.ok) {
        println!("the provider works with rojos");
        Ok(())
    } else {
        anyhow::bail!("the provider failed the probe")
    }
}

fn serve(state: AppState) -> anyhow::Result<()> {
    if let Err(e) = rojos::raise_open_files_limit() {
        tracing::warn!(error = %e, "cannot raise the open files limit");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(state.config.bind)
            .await
            .with_context(|| format!("cannot listen on {}", state.config.bind))?;
        let address = listener.local_addr()?;
        println!("rojos listening on http://{address}/");
        if let Some(token) = &state.auth.generated {
            println!(
                "no token configured; use this one for this run:\n    http://{address}/#token={}",
                token.expose()
            );
        }
        rojos::serve(listener, state, shutdown_signal()).await?;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
