//! The `rojos` binary: parse the command line, set up the log, then serve, or run a
//! subcommand (`check`, `tools`, `probe`, `init`, `mcp`), or become a plugin worker — everything else lives in the library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use rojos::{
    cli::{Cli, Command, Next},
    state::AppState,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve);
    if matches!(command, Command::PluginWorker) {
        // Before anything else starts a thread or opens a file: the worker sandboxes itself.
        return rojos_plugin_worker::worker::main();
    }
    if matches!(command, Command::PluginZygote) {
        // Likewise: the zygote confines itself, and must stay single-threaded to fork.
        return rojos_plugin_worker::zygote::main();
    }
    let log = rojos::logging::init(cli.log_format, command.verbosity());
    let outcome = rojos::cli::run(command, &cli.config)
        .map_err(anyhow::Error::from)
        .and_then(|next| match next {
            Next::Serve(state) => serve(state).map(|()| ExitCode::SUCCESS),
            Next::McpStdio(state, target) => serve_mcp(state, target).map(|()| ExitCode::SUCCESS),
            Next::Exit(code) => Ok(code),
        });
    // The log's last lines before the closing error, in order.
    drop(log);
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rojos: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn serve(state: AppState) -> anyhow::Result<()> {
    state
        .metrics
        .read_log_drops_from(rojos::logging::dropped_lines);
    if let Err(e) = rojos::raise_open_files_limit() {
        tracing::warn!(error = %e, "cannot raise the open files limit");
    }
    let runtime = rojos::runtime::runtime(state.config.worker_threads)?;
    runtime.block_on(async move {
        let listener = rojos::listen(state.config.bind)
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

/// `rojos mcp`: the MCP server on stdin and stdout until the client closes stdin. Nothing else
/// is printed on stdout, which carries the protocol; the log goes to stderr.
fn serve_mcp(state: AppState, target: rojos::mcp::McpTarget) -> anyhow::Result<()> {
    let runtime = rojos::runtime::runtime(state.config.worker_threads)?;
    runtime.block_on(rojos::mcp::serve_stdio(
        std::sync::Arc::clone(&state.agent),
        state.live.clone(),
        target,
    ))?;
    Ok(())
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
