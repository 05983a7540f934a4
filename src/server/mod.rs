//! The network side: the accept loop and one task per connection.

mod connection;
mod listener;

pub use listener::run;
