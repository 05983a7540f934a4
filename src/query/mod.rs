//! The query engine: pure functions over raw BSON, no IO and no async.
//!
//! One comparison order ([`compare`]) serves filters, sorts and the order-preserving key
//! encoding ([`keystring`]).
