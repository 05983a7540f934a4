//! The oplog: the log of every change a replica set member keeps ([`log`]), and the pure
//! engine of update entries: mongod's `$v: 2` oplog diff ([`diff`]: compute and apply) and the
//! `updateDescription` a change stream shows for it ([`update_description`]).

pub mod diff;
pub mod log;
pub mod retention;
pub mod update_description;

pub use diff::{DiffError, apply_diff, compute_full_diff, compute_oplog_diff};
pub use log::Oplog;
pub use update_description::{UpdateDescription, update_description};
