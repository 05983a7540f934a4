//! Authentication and authorization, as mongod does them (issue 14).
//!
//! The family will hold the SASL mechanisms (`scram`: SCRAM-SHA-1 and SCRAM-SHA-256, pure and
//! IO-free), the users and roles stored in `admin.system.users`/`admin.system.roles`, the
//! built-in roles' privileges and the table mapping each command to the actions it needs.
//! Commands (`saslStart`, `saslContinue`, speculative authentication in `hello`, user and role
//! management) live in `commands` and call into this module.

pub mod scram;
