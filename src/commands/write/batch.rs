//! Running writers under their collection's lock: one for a whole command ([`with_writer`]),
//! or one a turn for the statements of a batch ([`run_batch`]).

use super::super::args::WriteConcern;
use super::writer::Writer;
use super::{Fail, WriteError};
use crate::error::CommandResult;
use crate::state::ServerState;

/// Runs `f` with the collection `db.name` (created if missing) locked and a fresh snapshot,
/// then commits what it wrote and waits as the write concern asks. When `f` meets a key an
/// open transaction holds ([`Writer::blocked`]), what it wrote before is committed, and it
/// runs again (with a new writer) once a transaction lets go of its keys: `f` goes on where it
/// stopped.
pub(crate) async fn with_writer<T>(
    state: &ServerState,
    db: &str,
    name: &str,
    concern: WriteConcern,
    create: bool,
    mut f: impl FnMut(&mut Writer<'_>) -> T,
) -> CommandResult<Option<T>> {
    let mut last_ticket = None;
    loop {
        let Some((result, ticket, blocked)) = locked(state, db, name, create, &mut f)? else {
            return Ok(None);
        };
        last_ticket = ticket.or(last_ticket);
        if let Some(seen) = blocked {
            wait_for_release(state, seen).await?;
        } else {
            concern.wait(state, last_ticket).await?;
            return Ok(Some(result));
        }
    }
}

/// Waits until an open transaction lets go of its keys (after the lock table's release count
/// `seen`), within the command's `maxTimeMS` and until shutdown.
async fn wait_for_release(state: &ServerState, seen: u64) -> CommandResult<()> {
    let interrupt = state.interrupt();
    interrupt.check()?;
    let locks = std::sync::Arc::clone(state.catalog.locks());
    let deadline = interrupt.deadline();
    tokio::select! {
        () = locks.wait_release(seen) => Ok(()),
        () = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        } => Err(crate::interrupt::max_time_expired()),
        () = state.shutdown.cancelled() => Err(crate::CommandError::interrupted_at_shutdown()),
    }
}

/// What [`locked`] returns: `f`'s result, the ticket to wait for (of the last commit, or of the
/// collection's creation), and whether `f` met a key a transaction holds (the lock table's
/// release count it saw).
type Locked<T> = (T, Option<u64>, Option<u64>);

/// [`with_writer`] without the wait: runs `f` under the lock and commits.
fn locked<T>(
    state: &ServerState,
    db: &str,
    name: &str,
    create: bool,
    f: impl FnOnce(&mut Writer<'_>) -> T,
) -> CommandResult<Option<Locked<T>>> {
    let (result, ticket, created, blocked) = loop {
        let (collection, created) = match state.collection(db, name) {
            Some(c) => (c, None),
            None if !create => return Ok(None),
            None => match crate::txn::current() {
                // Created in the transaction: only it sees the collection until it commits.
                Some(txn) if !state.catalog.is_view(db, name) => {
                    let c = std::sync::Arc::new(state.catalog.prepare_create(
                        db,
                        name,
                        bson::RawDocumentBuf::new(),
                    )?);
                    txn.keep_created(std::sync::Arc::clone(&c))?;
                    (c, None)
                }
                _ => state.catalog.get_or_create(db, name)?,
            },
        };
        let Some(_guard) = collection.lock() else {
            continue;
        };
        let mut writer = Writer::new(&collection, &state.catalog, state.now_ms());
        writer.interrupt = Some(state.interrupt());
        writer.max_document = state
            .cosmos
            .as_ref()
            .map(|_| crate::cosmos::identity::MAX_DOCUMENT_BYTES);
        writer.owner = Some(std::sync::Arc::clone(&collection));
        let result = f(&mut writer);
        // What it wrote before it met a transaction's key is whole: committed as it is.
        writer.flush()?;
        break (result, writer.ticket, created, writer.blocked);
    };
    Ok(Some((result, ticket.or(created), blocked)))
}

/// How long one turn of a write batch may hold its collection's lock and its runtime worker
/// before it lets other clients run (mongod also yields between the statements of a batch).
const BATCH_TURN: std::time::Duration = std::time::Duration::from_millis(2);

/// Where a write batch goes and how it runs.
#[derive(Clone, Copy)]
pub(super) struct BatchTarget<'a> {
    pub(super) db: &'a str,
    pub(super) name: &'a str,
    pub(super) concern: WriteConcern,
    pub(super) ordered: bool,
}

/// Runs the statements of a write batch in turns of about [`BATCH_TURN`], each under the
/// collection's lock with a writer of its own, yielding to the runtime between turns; stops
/// at the first error when `ordered`, and with `InterruptedAtShutdown` once shutdown begins.
/// `run(w, i)` runs statement `i`. `None` if the collection does not exist (and none is
/// created) when the batch starts. Waits once, at the end, as `concern` asks.
pub(super) async fn run_batch<S, R>(
    state: &ServerState,
    target: BatchTarget<'_>,
    statements: &[S],
    creates: impl Fn(&S) -> bool,
    mut run: impl FnMut(&mut Writer<'_>, &S) -> Result<R, Fail>,
) -> CommandResult<Option<(Vec<(usize, R)>, Vec<WriteError>)>> {
    let BatchTarget {
        db,
        name,
        concern,
        ordered,
    } = target;
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    let mut next = 0;
    let mut last_ticket = None;
    // Whether a turn may create the collection: some statement from it on upserts (found once,
    // not per turn, which would cost O(N²) over a long batch).
    let last_creating = statements.iter().rposition(&creates);
    while next < statements.len() {
        // Shutdown or `maxTimeMS` stops the batch between statements; what ran is committed
        // (and durable before the process exits), and the command fails as a whole, as in
        // mongod.
        let interrupt = state.interrupt();
        interrupt.check()?;
        let rest = statements.get(next..).unwrap_or_default();
        let create = last_creating.is_some_and(|last| last >= next);
        let turn = locked(state, db, name, create, |w| {
            let started = std::time::Instant::now();
            let mut ran = 0;
            let mut stop = false;
            for (i, stmt) in rest.iter().enumerate() {
                if i > 0 && (started.elapsed() >= BATCH_TURN || interrupt.is_due()) {
                    break;
                }
                ran = i + 1;
                // Each statement sees the ones before it.
                match run(w, stmt).and_then(|r| w.flush().map(|()| r).map_err(|e| (e, None))) {
                    Ok(r) => done.push((next + i, r)),
                    // It met a key a transaction holds: it runs again once the transaction
                    // lets go (what it wrote so far is not committed).
                    Err(_) if w.blocked.is_some() => {
                        w.discard();
                        ran = i;
                        break;
                    }
                    Err((error, dup)) => {
                        errors.push(WriteError {
                            index: next + i,
                            error,
                            dup,
                        });
                        if ordered {
                            stop = true;
                            break;
                        }
                    }
                }
            }
            (ran, stop)
        })?;
        let Some(((ran, stop), ticket, blocked)) = turn else {
            if next == 0 {
                return Ok(None);
            }
            // Dropped in the middle of the batch: the rest matches nothing.
            break;
        };
        last_ticket = ticket.or(last_ticket);
        if let Some(seen) = blocked {
            next += ran;
            wait_for_release(state, seen).await?;
            continue;
        }
        next += ran.max(1);
        if stop {
            break;
        }
        tokio::task::yield_now().await;
    }
    concern.wait(state, last_ticket).await?;
    Ok(Some((done, errors)))
}
