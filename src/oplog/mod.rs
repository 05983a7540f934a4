//! The pure engine of change events for updates: mongod's `$v: 2` oplog diff
//! ([`diff`]: compute and apply) and the `updateDescription` a change stream shows for it
//! ([`update_description`]). No IO here.

pub mod diff;
pub mod update_description;

pub use diff::{DiffError, apply_diff, compute_full_diff, compute_oplog_diff};
pub use update_description::{UpdateDescription, update_description};
