//! The aggregation pipeline as a layer of its own: pure and IO-free like [`crate::query`].
//!
//! A pipeline is a list of [`Stage`]s, one module per stage in [`stages`], each a function from
//! a [`Stream`] of documents to a [`Stream`] of documents. Streaming stages (`$match`,
//! `$project`, `$unwind`…) map their input lazily; blocking stages (`$group`, `$sort`,
//! `$bucketAuto`, `$facet`…) read their whole input on the first pull, then yield what they
//! computed ([`blocking`]). `$group`'s accumulators live in [`accumulators`], where `$bucket`
//! and `$bucketAuto` find them too.
//!
//! Documents travel with the expiry instant of the stored document they show ([`Doc`]):
//! documents a stage computes (`$group`, `$count`, `$facet`…) never expire.
//!
//! The command layer (`commands::aggregate`) parses the command, answers the stages that need
//! the server (`$documents`, `$listLocalSessions`, `$out`, `$merge`), pushes the leading
//! stages down into the query planner, and runs the rest here. Stages that will read other
//! collections (`$lookup`, `$unionWith`) get them through [`Context::reader`], a [`Reader`]
//! the command injects, never through IO of their own.

pub mod accumulators;
pub mod doc;
pub mod optimize;
pub mod stages;

#[cfg(test)]
mod props;

use std::sync::Arc;

use bson::RawDocumentBuf;

use crate::error::CommandResult;
use crate::query::Collation;
use crate::query::filter::Filter;
use crate::query::sort::SortSpec;
use crate::sorter::SortLimits;

pub use self::stages::{parse_pipeline, parse_stage};

/// A document with the expiry instant (milliseconds; [`crate::storage::record::NEVER`] for
/// none) of the stored document it shows.
pub type Doc = (RawDocumentBuf, i64);

/// A stream of documents between two stages; the first error ends it.
pub type Stream<'a> = Box<dyn Iterator<Item = CommandResult<Doc>> + 'a>;

/// What a first stage that reads the server's own state about the pipeline's collection
/// (rather than its documents) asks the command layer for.
#[derive(Debug, Clone, Copy)]
pub enum ServerRead<'a> {
    /// `$collStats`: its one document.
    CollStats(&'a stages::CollStatsSpec),
    /// `$indexStats`: one document per index.
    IndexStats,
    /// `$geoNear`: the documents nearest a point, by a geo index.
    GeoNear,
}

/// Reads another collection's documents for a stage (`$lookup`, `$unionWith`), as of the
/// command's instant: the command layer implements it over the catalog and the planner.
pub trait Reader: Send + Sync {
    /// Every live document of `coll` (in the command's database) matching `filter` (`None`:
    /// all); none when the collection does not exist.
    fn read(&self, coll: &str, filter: Option<&Filter>) -> CommandResult<Vec<RawDocumentBuf>>;

    /// The documents a stage reading the server's state about the pipeline's own collection
    /// makes (`$collStats`, `$indexStats`, `$geoNear`).
    fn server_state(&self, what: &ServerRead<'_>) -> CommandResult<Vec<RawDocumentBuf>> {
        let _ = what;
        Err(crate::error::CommandError::internal(
            "this reader does not know the server's state",
        ))
    }
}

/// What every stage of one command's pipeline sees.
#[derive(Clone)]
pub struct Context {
    /// The memory blocking stages may hold, and whether they may spill (`allowDiskUse`).
    pub limits: SortLimits,
    /// Other collections, for the stages that read them (none yet).
    pub reader: Option<Arc<dyn Reader>>,
}

impl Context {
    /// A context with these limits and no reader.
    pub fn new(limits: SortLimits) -> Context {
        Context {
            limits,
            reader: None,
        }
    }
}

/// What the command layer may know of a stage: the stages the query layer can answer
/// (pushdown) and those that coalesce (`$sort` then `$limit`).
pub enum Kind<'a> {
    /// `$match`.
    Match(&'a Filter),
    /// `$sort`.
    Sort(&'a SortSpec),
    /// `$skip`.
    Skip(usize),
    /// `$limit`.
    Limit(usize),
    /// `$project`.
    Project,
    /// Anything else.
    Other,
}

/// One stage of a pipeline.
pub trait Stage: Send + Sync {
    /// Runs the stage over `input`.
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a>;

    /// What the command layer may know of this stage.
    fn kind(&self) -> Kind<'_> {
        Kind::Other
    }

    /// Compares strings under the command's collation from now on, where the stage compares.
    fn collate(&mut self, _collation: &Arc<Collation>) {}

    /// Whether the stage makes its documents from the server's state and reads no input, so
    /// that it must come first and the collection is not scanned for it (mongod's
    /// `PositionRequirement::kFirst` with no input source: `$collStats`, `$indexStats`,
    /// `$geoNear`).
    fn initial_source(&self) -> bool {
        false
    }
}

/// A parsed pipeline (the stages the pipeline layer runs).
pub type Stages = Vec<Box<dyn Stage>>;

/// Runs `stages` over `docs` (prepared by [`stages::coalesce`]).
pub fn run(stages: &[Box<dyn Stage>], docs: Vec<Doc>, ctx: &Context) -> CommandResult<Vec<Doc>> {
    let mut stream: Stream<'_> = Box::new(docs.into_iter().map(Ok));
    for stage in stages {
        stream = stage.run(stream, ctx);
    }
    stream.collect()
}

/// What one stage did in a run explain measures: the documents it returned and the time spent
/// in it and the stages before it (mongod's `nReturned`, `executionTimeMillisEstimate`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageStats {
    /// Documents the stage returned.
    pub returned: u64,
    /// Time spent pulling its documents, the stages before it included.
    pub micros: u64,
}

/// Runs `stages` over `docs` as [`run`] does, measuring each stage.
pub fn run_measured(
    stages: &[Box<dyn Stage>],
    docs: Vec<Doc>,
    ctx: &Context,
) -> (CommandResult<Vec<Doc>>, Vec<StageStats>) {
    use std::cell::Cell;
    use std::rc::Rc;

    /// A stage's output, counted and timed.
    struct Measured<'a> {
        inner: Stream<'a>,
        stats: Rc<Cell<StageStats>>,
    }

    impl Iterator for Measured<'_> {
        type Item = CommandResult<Doc>;

        fn next(&mut self) -> Option<Self::Item> {
            let started = std::time::Instant::now();
            let item = self.inner.next();
            let mut stats = self.stats.get();
            let spent = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            stats.micros = stats.micros.saturating_add(spent);
            if matches!(item, Some(Ok(_))) {
                stats.returned = stats.returned.saturating_add(1);
            }
            self.stats.set(stats);
            item
        }
    }

    let cells: Vec<Rc<Cell<StageStats>>> = stages.iter().map(|_| Rc::default()).collect();
    let mut stream: Stream<'_> = Box::new(docs.into_iter().map(Ok));
    for (stage, cell) in stages.iter().zip(&cells) {
        stream = Box::new(Measured {
            inner: stage.run(stream, ctx),
            stats: Rc::clone(cell),
        });
    }
    let out = stream.collect();
    (out, cells.iter().map(|c| c.get()).collect())
}

/// Runs `stages` over a stream (a `$facet`'s sub-pipeline).
pub fn run_stream<'a>(
    stages: &'a [Box<dyn Stage>],
    input: Stream<'a>,
    ctx: &'a Context,
) -> Stream<'a> {
    let mut stream = input;
    for stage in stages {
        stream = stage.run(stream, ctx);
    }
    stream
}

/// A blocking stage's output: `compute` runs at the first pull.
pub fn blocking<'a, F>(compute: F) -> Stream<'a>
where
    F: FnOnce() -> CommandResult<Vec<Doc>> + 'a,
{
    Box::new(std::iter::once_with(compute).flat_map(|r| -> Stream<'a> {
        match r {
            Ok(docs) => Box::new(docs.into_iter().map(Ok)),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }))
}

/// A document a stage computed: it never expires.
pub fn computed(doc: RawDocumentBuf) -> Doc {
    (doc, crate::storage::record::NEVER)
}

/// An error raised while the pipeline runs, as mongod's aggregation reports it.
pub fn aggregation_error(mut e: crate::error::CommandError) -> crate::error::CommandError {
    e.errmsg = format!(
        "PlanExecutor error during aggregation :: caused by :: {}",
        e.errmsg
    );
    e
}
