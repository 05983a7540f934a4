//! The pure engine of `$changeStream`: the stage's specification and scope ([`spec`]), resume
//! tokens ([`token`]), change events made from oplog entries in MongoDB 7.0's shape
//! ([`event`]), and `$changeStreamSplitLargeEvent` ([`split`]). No IO and no async here: the
//! oplog cursor feeds entries in, and looks documents up through [`event::Images`].

pub mod event;
pub mod reader;
pub mod resume;
pub mod spec;
pub mod split;
pub mod token;

pub use event::{Event, Images, events};
pub use spec::{FullDocument, FullDocumentBeforeChange, Scope, Spec, scope, validate_pipeline};
pub use split::{MAX_EVENT_SIZE, Splitter};
pub use token::{ResumeTokenData, TokenType};
