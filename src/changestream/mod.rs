//! The pure engine of `$changeStream`: the stage's specification and scope ([`spec`]), resume
//! tokens ([`token`]), change events made from oplog entries in MongoDB 7.0's shape
//! ([`event`]), and `$changeStreamSplitLargeEvent` ([`split`]). No IO and no async here: the
//! oplog cursor feeds entries in, and looks documents up through [`event::Images`].
//!
//! A stream, in mongod's stage order:
//!
//! 1. `Spec::parse(stage_value)`, then [`scope`] (after the caller's replica-set check 40573),
//!    then the other stages parsed by the pipeline code and [`validate_pipeline`];
//! 2. read the oplog from `start`: [`Resume::start_time`] (the token's time, inclusive) when
//!    resuming, else `startAtOperationTime`, else one tick after the last entry; the first
//!    `postBatchResumeToken` is [`ResumeTokenData::high_water_mark`] of that time;
//! 3. for each entry, [`events`]; for each event, [`Resume::check`] of its `token` (skip,
//!    deliver, or split); then [`Event::document`] with the caller's [`Images`]; then the user's
//!    stages; then, with the split stage, [`Splitter::process`]; an `invalidate` event ends the
//!    stream after its batch.

pub mod event;
pub mod reader;
pub mod resume;
pub mod spec;
pub mod split;
pub mod token;

pub use event::{Event, Images, events};
pub use resume::{Resume, ResumeStatus, Step, compare_against_client_token, history_lost};
pub use spec::{FullDocument, FullDocumentBeforeChange, Scope, Spec, scope, validate_pipeline};
pub use split::{MAX_EVENT_SIZE, Splitter};
pub use token::{ResumeTokenData, TokenType};
