//! The network side: the accept loop and one task per connection.

mod connection;
mod listener;
pub mod tls;

pub use listener::run;
pub use tls::Tls;
