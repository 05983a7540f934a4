//! The `ebb` binary: parse flags, set up logging, bind, serve until SIGINT/SIGTERM.

use clap::Parser;
use ebb::Config;
use ebb::config::LogFormat;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut config = Config::parse();
    config.argv = std::env::args().collect();

    let filter = EnvFilter::try_from_env("EBB_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }

    let addr = format!("{}:{}", config.bind, config.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    ebb::run(listener, config, signalled()?).await?;
    Ok(())
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
