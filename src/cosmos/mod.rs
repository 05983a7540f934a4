//! `--profile cosmos`: a local Azure Cosmos DB for MongoDB (RU) account (issue #16).
//!
//! Outside the profile nothing here runs: [`crate::ServerState::cosmos`] is `None` and Ebb is a
//! MongoDB server. Inside it, every command goes through [`run`], the profile's one hook
//! between dispatch and the command handlers. What the profile changes, and where:
//!
//! - connection: a replica set named `globaldb`, TLS, the account user, port 10255 (resolved
//!   from the configuration before the server starts);
//! - what Cosmos DB answers differently: version fields, the 2 MB document limit, features it
//!   refuses for the API version served;
//! - extension commands (`customAction`, `getLastRequestStatistics`);
//! - request units and throttling.

pub mod cert;
pub mod identity;
pub mod offers;
pub mod profile;

use std::time::Instant;

use bson::RawDocumentBuf;

use crate::config::{Config, CosmosVersion, Profile, Switch};
use crate::dispatch::{ConnCtx, Request};
use crate::error::CommandError;
use crate::state::ServerState;

/// The profile's settings and shared state, one per server.
#[derive(Debug)]
pub struct Cosmos {
    /// The account: the one user's name.
    pub account: String,
    /// The API version served.
    pub version: CosmosVersion,
    /// Whether a budget of request units is enforced.
    pub throttle: bool,
    /// How long a throttled request is retried inside the server, in milliseconds.
    pub server_retry_ms: u64,
    /// Provisioned throughput of databases and collections.
    pub offers: offers::Offers,
    /// What the account reports about itself for [`Cosmos::version`].
    pub identity: identity::Identity,
}

impl Cosmos {
    /// The profile's state for `config`, or `None` outside the profile.
    pub fn from_config(config: &Config) -> Option<Cosmos> {
        (config.profile == Profile::Cosmos).then(|| Cosmos {
            account: config.cosmos_account.clone(),
            version: config.cosmos_server_version,
            throttle: config.cosmos_throttle == Switch::On,
            server_retry_ms: config.cosmos_server_retries.saturating_mul(1000),
            offers: offers::Offers::default(),
            identity: identity::of(config.cosmos_server_version),
        })
    }
}

/// What one connection keeps for the profile.
#[derive(Debug, Default)]
pub struct ConnState {
    /// The last command's statistics (`getLastRequestStatistics`).
    pub last: Option<RequestStats>,
}

/// What `getLastRequestStatistics` reports of one command.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestStats {
    /// The command's name (`CommandName`).
    pub command_name: String,
    /// Request units charged (`RequestCharge`).
    pub request_charge: f64,
    /// Time taken, in milliseconds (`RequestDurationInMilliSeconds`).
    pub duration_ms: f64,
}

/// Runs `req` as a Cosmos DB account does: the profile's checks, then the command, then its
/// statistics recorded on the connection.
pub async fn run(
    cosmos: &Cosmos,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<RawDocumentBuf, CommandError> {
    let _ = cosmos;
    let started = Instant::now();
    let result = crate::commands::run(req, ctx, state).await;
    if req.name != "getLastRequestStatistics" {
        ctx.cosmos.last = Some(RequestStats {
            command_name: req.name.to_owned(),
            request_charge: 0.0,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    result
}
