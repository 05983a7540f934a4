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
pub mod custom_action;
pub mod features;
pub mod identity;
pub mod offers;
pub mod profile;
pub mod ru;
pub mod stats;
pub mod throttle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{RawBsonRef, RawDocumentBuf, rawdoc};

use crate::catalog::Catalog;
use crate::config::{Config, CosmosVersion, Profile, Switch};
use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, ErrorCode};
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
    /// The constants of the request-charge formula (`--cosmos-ru`).
    pub rates: ru::Rates,
    /// The budgets in force and what they were charged.
    pub throttler: throttle::Throttle,
    /// What the account reports about itself for [`Cosmos::version`].
    pub identity: identity::Identity,
}

impl Cosmos {
    /// The profile's state for `config` (its offers kept in `catalog`), or `None` outside the
    /// profile.
    pub fn from_config(config: &Config, catalog: &Arc<Catalog>) -> Option<Cosmos> {
        (config.profile == Profile::Cosmos).then(|| Cosmos {
            account: config.cosmos_account.clone(),
            version: config.cosmos_server_version,
            throttle: config.cosmos_throttle == Switch::On,
            server_retry_ms: config.cosmos_server_retries.saturating_mul(1000),
            offers: offers::Offers::new(Arc::clone(catalog)),
            // The flags were checked one by one as they were parsed.
            rates: ru::Rates::from_settings(&config.cosmos_ru).unwrap_or_default(),
            throttler: throttle::Throttle::default(),
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

/// Runs `req` as a Cosmos DB account does: a command on a collection waits for (or is refused
/// by) its budget of request units, runs counting its work, and is charged what that work
/// costs; every command's statistics are recorded on the connection.
pub async fn run(
    cosmos: &Cosmos,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<RawDocumentBuf, CommandError> {
    let started = Instant::now();
    // What the API version served does not support is refused before anything runs or is
    // charged (and is the connection's last request all the same) — to a client that may run
    // commands: one not logged in is answered by access control (13) first, as by an account.
    let logged_out = state.config.auth
        && ctx.auth.user_name().is_none()
        && crate::commands::lookup(req.name).is_some_and(|c| c.requires_auth);
    if !logged_out && let Err(e) = features::check(cosmos.version, req) {
        record(ctx, req, 0.0, started);
        return Err(e);
    }
    // Commands on a collection spend its budget; others (handshakes, listings, `create`…)
    // are charged what they did but spend none (Cosmos DB limits metadata requests apart).
    let target = crate::top::classify(req.name, req.body).map(|(_, coll)| coll);
    let budget = target.map(|coll| (cosmos.offers.budget(req.db, Some(coll)), coll));
    if cosmos.throttle
        && let Some((budget, coll)) = &budget
        && let Err(refused) = admit(cosmos, budget, req, coll).await
    {
        record(ctx, req, 0.0, started);
        return refused;
    }
    let tally = Arc::new(ru::Tally::default());
    let result = ru::run(Arc::clone(&tally), crate::commands::run(req, ctx, state)).await;
    let work = tally.work();
    let charge = match &budget {
        Some((budget, coll)) => {
            let charge = cosmos.rates.charge_on_collection(&work);
            cosmos.throttler.charge(budget, req.db, coll, charge);
            charge
        }
        None => cosmos.rates.charge(&work),
    };
    record(ctx, req, charge, started);
    result
}

/// Records `req`'s statistics on the connection (`getLastRequestStatistics` reports the
/// command before it, not itself).
fn record(ctx: &mut ConnCtx, req: &Request<'_>, request_charge: f64, started: Instant) {
    if req.name != "getLastRequestStatistics" {
        ctx.cosmos.last = Some(RequestStats {
            command_name: req.name.to_owned(),
            request_charge,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
}

/// Waits until `budget` admits `req` on `db.coll`, retrying inside the server for up to
/// `--cosmos-server-retries` seconds; `Err` with the reply when it does not.
async fn admit(
    cosmos: &Cosmos,
    budget: &offers::Budget,
    req: &Request<'_>,
    coll: &str,
) -> Result<(), Result<RawDocumentBuf, CommandError>> {
    let deadline = Instant::now() + Duration::from_millis(cosmos.server_retry_ms);
    loop {
        let Err(retry_after_ms) = cosmos.throttler.admit(budget) else {
            return Ok(());
        };
        cosmos.throttler.note_throttled(req.db, coll);
        if cosmos.server_retry_ms == 0 {
            return Err(throttled(req, retry_after_ms));
        }
        let now = Instant::now();
        if now >= deadline {
            // "If a 60-second timeout is reached, a client receives an ExceededTimeLimit
            // exception (50)" (Prevent rate-limiting errors for Azure Cosmos DB for MongoDB
            // operations). Code 50 is mongod's MaxTimeMSExpired; the message is what users
            // report Cosmos DB sends (the page gives none).
            return Err(Err(CommandError::new(
                ErrorCode::MaxTimeMSExpired,
                "Request timed out. Retries due to rate limiting: True.",
            )));
        }
        let wait = Duration::from_millis(retry_after_ms).min(deadline - now);
        tokio::time::sleep(wait).await;
    }
}

/// Cosmos DB's rate-limiting error: `16500` with `RetryAfterMs` in the message, its shape as
/// Cosmos DB for MongoDB sends it (the documentation names the code only). A write command's
/// statements each fail with it in `writeErrors` (the first alone when ordered), as drivers
/// see a throttled write (a write error, not a command error); nothing was written.
fn throttled(req: &Request<'_>, retry_after_ms: u64) -> Result<RawDocumentBuf, CommandError> {
    let error = CommandError::new(
        ErrorCode::RequestRateTooLarge,
        format!(
            "Error=16500, RetryAfterMs={retry_after_ms}, Details='Response status code does not \
             indicate success: TooManyRequests (429); Substatus: 3200; ActivityId: {}; Reason: \
             (\r\nErrors : [\r\n  \"Request rate is large. More Request Units may be needed, \
             so no changes were made. Please retry this request later. Learn more: \
             http://aka.ms/cosmosdb-error-429\"\r\n]\r\n)",
            bson::Uuid::new()
        ),
    );
    let array = match req.name {
        "insert" => "documents",
        "update" => "updates",
        "delete" => "deletes",
        _ => return Err(error),
    };
    let mut statements = match req.body.get(array) {
        Ok(Some(RawBsonRef::Array(a))) => a.into_iter().count(),
        _ => 0,
    };
    statements += req
        .sequences
        .iter()
        .filter(|s| s.identifier == array)
        .map(|s| s.documents.len())
        .sum::<usize>();
    if statements == 0 {
        return Err(error);
    }
    let ordered = !matches!(
        req.body.get("ordered"),
        Ok(Some(RawBsonRef::Boolean(false)))
    );
    Ok(crate::commands::every_statement_refused(
        &error,
        statements,
        ordered,
        array == "updates",
    ))
}

/// `serverStatus.cosmos` (only with the profile): the request units charged and the requests
/// throttled, in all and by database and collection, with each collection's budget.
pub fn server_status(cosmos: &Cosmos) -> RawDocumentBuf {
    let mut total = 0.0;
    let mut throttled = 0_u64;
    let mut databases = RawDocumentBuf::new();
    let usage = cosmos.throttler.usage_by_collection();
    let mut rest = usage.as_slice();
    while let Some(((db, _), _)) = rest.first() {
        let n = rest.iter().take_while(|((d, _), _)| d == db).count();
        let (of_db, after) = rest.split_at(n);
        rest = after;
        let mut db_charge = 0.0;
        let mut db_requests = 0_u64;
        let mut db_throttled = 0_u64;
        let mut collections = RawDocumentBuf::new();
        for ((_, coll), u) in of_db {
            db_charge += u.request_units;
            db_requests += u.requests;
            db_throttled += u.throttled;
            let budget = cosmos.offers.budget(db, Some(coll));
            let Ok(key) = bson::raw::CString::try_from(coll.as_str()) else {
                continue;
            };
            collections.append(
                key,
                rawdoc! {
                    "requestCharge": round(u.request_units),
                    "requests": count(u.requests),
                    "throttledRequests": count(u.throttled),
                    "provisionedThroughput": i64::from(budget.ru_per_second),
                    "autoscale": budget.autoscale,
                    "currentThroughput": round(cosmos.throttler.current_throughput(&budget)),
                },
            );
        }
        total += db_charge;
        throttled += db_throttled;
        let Ok(key) = bson::raw::CString::try_from(db.as_str()) else {
            continue;
        };
        databases.append(
            key,
            rawdoc! {
                "requestCharge": round(db_charge),
                "requests": count(db_requests),
                "throttledRequests": count(db_throttled),
                "collections": collections,
            },
        );
    }
    rawdoc! {
        "throttle": cosmos.throttle,
        "serverRetryMs": count(cosmos.server_retry_ms),
        "requestUnits": {
            "requestCharge": round(total),
            "throttledRequests": count(throttled),
            "databases": databases,
        },
    }
}

/// Request units to hundredths, as Cosmos DB reports them.
fn round(ru: f64) -> f64 {
    (ru * 100.0).round() / 100.0
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
