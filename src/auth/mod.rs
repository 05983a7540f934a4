//! Authorization as mongod models it: action types, resources and privileges, the built-in and
//! user-defined roles, and the table of what each command needs ([`privileges::required`]).

pub mod privileges;
pub mod roles;
