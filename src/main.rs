//! The `ebb` binary: parse flags, set up logging, bind, serve until SIGINT/SIGTERM.

use clap::{CommandFactory, FromArgMatches};
use ebb::Config;
use ebb::config::{LogFormat, Profile};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let matches = Config::command().get_matches();
    let mut config = Config::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    config.argv = std::env::args().collect();
    // A Cosmos DB account listens on 10255, unless `--port` says otherwise.
    if config.profile == Profile::Cosmos
        && matches.value_source("port") != Some(clap::parser::ValueSource::CommandLine)
    {
        config.port = ebb::cosmos::profile::DEFAULT_PORT;
    }

    let filter = EnvFilter::try_from_env("EBB_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }

    let cosmos = config.resolve_profile()?;
    let addr = format!("{}:{}", config.bind, config.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    if let Some(resolved) = cosmos {
        print_cosmos_banner(&config, &resolved, listener.local_addr()?.port());
    }
    ebb::run(listener, config, signalled()?).await?;
    Ok(())
}

/// Tells a Cosmos DB user how to connect: the account, its key (the development key is no
/// secret), the certificate authority to trust, and the connection string.
fn print_cosmos_banner(config: &Config, resolved: &ebb::cosmos::profile::Resolved, port: u16) {
    let key = config.cosmos_key.as_deref().unwrap_or_default();
    println!(
        "Azure Cosmos DB for MongoDB (RU) profile, API {}",
        config.cosmos_server_version.name()
    );
    println!("  account:    {}", config.cosmos_account);
    if resolved.default_key {
        println!("  key:        {key}  (the development key; set another with --cosmos-key)");
    } else {
        println!("  key:        (the one given with --cosmos-key)");
    }
    println!(
        "  CA file:    {}{}",
        resolved.ca_file.display(),
        if resolved.cert_created {
            "  (created now)"
        } else {
            ""
        }
    );
    println!("  connection string (with tlsCAFile=<CA file> or tlsAllowInvalidCertificates=true):");
    let shown = if resolved.default_key {
        config.cosmos_connection_string(port)
    } else {
        // A key of the user's own is not printed: `KEY` stands for it (percent-encoded).
        let mut placeholder = config.clone();
        placeholder.cosmos_key = Some("KEY".into());
        placeholder.cosmos_connection_string(port)
    };
    println!("    {shown}");
}

/// Completes on the first SIGINT or SIGTERM. The signals are awaited on a thread of their own
/// with its own small runtime: the server's workers may all be busy in long synchronous work
/// (a write batch runs on its worker), and a signal must still be seen at once, so that those
/// commands are interrupted at their next safe point.
fn signalled() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("ebb-signals".into())
        .spawn(move || {
            runtime.block_on(shutdown_signal());
            let _ = tx.send(());
        })?;
    Ok(async move {
        // A dropped sender (the thread died) also means: stop.
        let _ = rx.await;
    })
}

/// Completes on the first SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received SIGINT"),
        () = term => tracing::info!("received SIGTERM"),
    }
}
