//! Authentication and authorization, as mongod does them (issue 14).
//!
//! - [`scram`]: the SASL mechanisms SCRAM-SHA-1 and SCRAM-SHA-256, pure and IO-free: stored
//!   credentials and the server side of the conversation.
//! - [`privileges`]: action types, resources and privileges, and the table of what each
//!   command needs ([`privileges::required`]).
//! - [`roles`]: mongod's built-in roles and user-defined role graphs.
//!
//! Still to come: users and roles in the store, the commands (`saslStart`, `saslContinue`,
//! speculative authentication in `hello`, user and role management), and enforcement in
//! dispatch. Nothing here is wired yet.

pub mod privileges;
pub mod roles;
pub mod scram;
