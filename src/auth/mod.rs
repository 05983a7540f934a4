//! Authentication and authorization, as mongod does them (issue 14).
//!
//! - [`scram`]: the SASL mechanisms SCRAM-SHA-1 and SCRAM-SHA-256, pure and IO-free: stored
//!   credentials and the server side of the conversation.
//! - [`privileges`]: action types, resources and privileges, and the table of what each
//!   command needs ([`privileges::required`]).
//! - [`roles`]: mongod's built-in roles and user-defined role graphs.
//!
//! - [`store`]: users and user-defined roles, kept in the store.
//! - [`session`]: a connection's login and the check each command passes
//!   ([`session::authorize`]) when access control is on (`--auth`).

pub mod privileges;
pub mod roles;
pub mod scram;
pub mod session;
pub mod store;
