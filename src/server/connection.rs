//! One task per connection: read a frame, dispatch it, write the reply, in order.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use ebb_wire::{Frame, MAX_MESSAGE_SIZE};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span};

use crate::ServerState;
use crate::dispatch::{self, ConnCtx};

/// Why a connection ended other than by the client closing it cleanly.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("connection closed in the middle of a message ({0} bytes buffered)")]
    Truncated(usize),
    #[error("{0}")]
    Wire(#[from] ebb_wire::Error),
}

/// Serves one connection until the client leaves, a connection-fatal error, or shutdown.
/// `input` holds what was already read from `stream` (a TLS server reads a connection's first
/// bytes to tell TLS from plain text), and is the connection's input buffer from then on.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    input: BytesMut,
    peer: SocketAddr,
    state: ServerState,
    cancel: CancellationToken,
    permit: OwnedSemaphorePermit,
) {
    serve_tls(stream, input, peer, None, state, cancel, permit).await;
}

/// [`serve`] for a connection whose client presented a certificate over TLS, verified, with
/// `certificate_subject` (as mongod renders it), which `MONGODB-X509` logs in as.
pub(super) async fn serve_tls<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    input: BytesMut,
    peer: SocketAddr,
    certificate_subject: Option<String>,
    state: ServerState,
    cancel: CancellationToken,
    _permit: OwnedSemaphorePermit,
) {
    let id = state.next_connection_id();
    let metrics = &state.metrics;
    metrics.connections_total.fetch_add(1, Ordering::Relaxed);
    let open = metrics.connections_current.fetch_add(1, Ordering::Relaxed) + 1;
    let span = info_span!("conn", id);
    async {
        info!(remote = %peer, connections_now_open = open, "connection accepted");
        let mut ctx = ConnCtx::new(id, peer);
        ctx.auth.certificate_subject = certificate_subject;
        match run(stream, input, &mut ctx, &state, &cancel).await {
            Ok(()) => info!(remote = %peer, "connection ended"),
            Err(ConnError::Io(e)) => info!(remote = %peer, error = %e, "connection ended"),
            Err(e) => info!(remote = %peer, error = %e, "closing connection after bad input"),
        }
    }
    .instrument(span)
    .await;
    metrics.connections_current.fetch_sub(1, Ordering::Relaxed);
}

async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    mut input: BytesMut,
    ctx: &mut ConnCtx,
    state: &ServerState,
    cancel: &CancellationToken,
) -> Result<(), ConnError> {
    let mut output = BytesMut::with_capacity(16 * 1024);
    // One wait for shutdown per connection, not one per request (each is a registration on a
    // notifier every connection shares).
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        if ctx.exhaust.is_some() {
            // An exhaust stream (awaitable hello with moreToCome): the next reply comes without
            // a request. Its wait ends at shutdown, with a reply that ends the stream.
            let outcome = dispatch::continue_exhaust(ctx, state, &mut output).await;
            write_out(&mut stream, &mut output, state).await?;
            outcome?;
            continue;
        }
        // Shutdown is only observed between requests, so a request in flight always finishes.
        let frame = tokio::select! {
            biased;
            () = &mut cancelled => return Ok(()),
            frame = read_frame(&mut stream, &mut input) => frame?,
        };
        let Some(frame) = frame else { return Ok(()) };
        state
            .metrics
            .bytes_in
            .fetch_add(frame.bytes.len() as u64, Ordering::Relaxed);
        state.metrics.requests.fetch_add(1, Ordering::Relaxed);
        state
            .catalog
            .store()
            .note_client(u64::try_from(ctx.id).unwrap_or(u64::MAX));
        state
            .metrics
            .connections_active
            .fetch_add(1, Ordering::Relaxed);
        let outcome = dispatch::handle(&frame, ctx, state, &mut output).await;
        state
            .metrics
            .connections_active
            .fetch_sub(1, Ordering::Relaxed);
        write_out(&mut stream, &mut output, state).await?;
        if let Err(e) = outcome {
            return Err(e.into());
        }
        // The command asked for the connection to end without a reply (`shutdown`, or a
        // `failCommand` fail point with `closeConnection`).
        if ctx.closing {
            return Ok(());
        }
        // Keep an idle connection's buffers small after a large message went through.
        if input.capacity() > 1024 * 1024 && input.is_empty() {
            input = BytesMut::with_capacity(16 * 1024);
        }
        if output.capacity() > 1024 * 1024 {
            output = BytesMut::with_capacity(16 * 1024);
        }
    }
}

/// Writes what `output` holds, if anything, and empties it.
async fn write_out<S: AsyncWrite + Unpin>(
    stream: &mut S,
    output: &mut BytesMut,
    state: &ServerState,
) -> Result<(), ConnError> {
    if !output.is_empty() {
        stream.write_all(output).await?;
        // A TLS stream may keep encrypted bytes until flushed; a TcpStream's flush does nothing.
        stream.flush().await?;
        state
            .metrics
            .bytes_out
            .fetch_add(output.len() as u64, Ordering::Relaxed);
        output.clear();
    }
    Ok(())
}

/// Reads until one whole frame is buffered. `Ok(None)` is a clean end of stream between
/// messages. Cancel-safe: bytes already read stay in `input`.
async fn read_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    input: &mut BytesMut,
) -> Result<Option<Frame>, ConnError> {
    loop {
        if let Some(frame) = Frame::split(input, MAX_MESSAGE_SIZE)? {
            return Ok(Some(frame));
        }
        if stream.read_buf(input).await? == 0 {
            if input.is_empty() {
                return Ok(None);
            }
            debug!(buffered = input.len(), "peer closed mid-message");
            return Err(ConnError::Truncated(input.len()));
        }
    }
}
