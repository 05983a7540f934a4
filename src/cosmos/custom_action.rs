//! `customAction`: Cosmos DB's extension commands (`CreateDatabase`, `UpdateDatabase`,
//! `GetDatabase`, `CreateCollection`, `UpdateCollection`, `GetCollection`), as Microsoft's page
//! "Use MongoDB extension commands to manage data stored in Azure Cosmos DB for MongoDB"
//! (learn.microsoft.com/azure/cosmos-db/mongodb/custom-commands) documents their requests and
//! replies.
//!
//! Throughput rules, from Microsoft's throughput pages: manual throughput is 400 to 1,000,000
//! RU/s in steps of 100 (the service's message: "The offer should have valid throughput values
//! between 400 and 1000000 inclusive in increments of 100."); an autoscale maximum is 1,000 to
//! 1,000,000 in steps of 1,000 and scales down to 10% of itself; a decrease may not go below
//! 1% of the highest manual value ever provisioned, or 10% of the highest autoscale maximum; a
//! collection without a shard key holds at most 10,000 RU/s (the page); switching between
//! manual and autoscale "is only supported in the Azure portal" (the page).
//!
//! The page documents no error replies beyond their shape (`ok: 0`, `code`, `errMsg`): where a
//! code or message below is not quoted from Microsoft, it is this file's choice and says so.
//! Replies carry `ok` as an `int`, as the page's tables type it.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::offers::{Offer, Record, autoscale_settings};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

/// Highest throughput the service's messages name.
const MAX_RU: i64 = 1_000_000;
/// Most a collection without a shard key may have (manual, or autoscale maximum).
const UNSHARDED_MAX_RU: u32 = 10_000;
/// Least manual throughput.
const MIN_MANUAL_RU: u32 = 400;
/// Least autoscale maximum.
const MIN_AUTOSCALE_RU: u32 = 1_000;

/// The throughput a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requested {
    /// Neither `offerThroughput` nor `autoScaleSettings`.
    Nothing,
    /// `offerThroughput`.
    Manual(i64),
    /// `autoScaleSettings.maxThroughput`.
    Autoscale(i64),
}

/// Runs a `customAction` command. Returns the reply and the ticket of the commit it made, if
/// any, for the write concern to wait on.
pub fn run(req: &Request<'_>, state: &ServerState) -> CommandResult<(RawDocumentBuf, Option<u64>)> {
    let Some(cosmos) = &state.cosmos else {
        return Err(CommandError::command_not_found(req.name));
    };
    let Ok(Some(RawBsonRef::String(action))) = req.body.get("customAction") else {
        // (Not documented: this file's choice.)
        return Err(CommandError::new(
            ErrorCode::TypeMismatch,
            "customAction must be a string naming the custom command",
        ));
    };
    crate::catalog::validate_db_name(req.db)?;
    let offers = &cosmos.offers;
    match action {
        "CreateDatabase" => create_database(req, state),
        "UpdateDatabase" => update_database(req, state),
        "GetDatabase" => {
            let record = offers.record(req.db, None);
            if record.is_none() && !database_exists(state, req.db) {
                return Err(database_not_found(req.db));
            }
            let mut reply = rawdoc! { "database": req.db };
            append_offer(&mut reply, record.and_then(|r| r.offer).as_ref());
            reply.append(bson::raw::cstr!("ok"), 1_i32);
            Ok((reply, None))
        }
        "CreateCollection" => create_collection(req, state),
        "UpdateCollection" => update_collection(req, state),
        "GetCollection" => {
            let name = collection_name(req.body)?;
            if state.catalog.get(req.db, name).is_none() {
                return Err(collection_not_found(req.db, name));
            }
            let record = offers.record(req.db, Some(name)).unwrap_or_default();
            let shared = database_offer(state, req.db).is_some();
            let mut reply = rawdoc! { "database": req.db, "collection": name };
            if let Some(key) = &record.shard_key {
                // Cosmos DB shards by a hash of the key's value. (The page types the field
                // as an index specification and shows no example: `{path: "hashed"}` is
                // this file's reading.)
                let mut definition = RawDocumentBuf::new();
                if let Ok(path) = <&bson::raw::CStr>::try_from(key.as_str()) {
                    definition.append(path, "hashed");
                }
                reply.append(bson::raw::cstr!("shardKeyDefinition"), definition);
            }
            append_offer(&mut reply, own_offer(&record, shared).as_ref());
            reply.append(bson::raw::cstr!("ok"), 1_i32);
            Ok((reply, None))
        }
        "GetChangeStreamTokens" => Err(CommandError::new(
            ErrorCode::NotImplemented,
            "customAction GetChangeStreamTokens is not implemented by Ebb",
        )),
        // (Not documented: this file's choice.)
        other => Err(CommandError::new(
            ErrorCode::CommandNotFound,
            format!("Unknown custom action: {other}"),
        )),
    }
}

/// `CreateDatabase`: a database, with shared throughput when the request gives one.
fn create_database(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<(RawDocumentBuf, Option<u64>)> {
    let offer = match requested(req.body)? {
        Requested::Nothing => None,
        Requested::Manual(ru) => Some(manual(ru, 0)?),
        Requested::Autoscale(ru) => Some(autoscale(ru, 0)?),
    };
    let ticket = state.catalog.change_offer(req.db, None, |stored, exists| {
        if stored.is_some() || exists {
            // (Not documented: this file's choice, as `create` answers a collection that
            // exists.)
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("Database {} already exists.", req.db),
            ));
        }
        Ok(Some(
            Record {
                offer,
                shard_key: None,
            }
            .to_bytes(),
        ))
    })?;
    Ok((rawdoc! { "ok": 1_i32 }, ticket))
}

/// `UpdateDatabase`: a new shared throughput, of the same kind (manual or autoscale).
fn update_database(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<(RawDocumentBuf, Option<u64>)> {
    let asked = requested(req.body)?;
    let ticket = state.catalog.change_offer(req.db, None, |stored, exists| {
        let record = stored.and_then(Record::from_bytes);
        if record.is_none() && !exists {
            return Err(database_not_found(req.db));
        }
        let Some(current) = record.and_then(|r| r.offer) else {
            // (Not documented: this file's choice.)
            return Err(CommandError::bad_value(format!(
                "Database {} has no database-level throughput to update.",
                req.db
            )));
        };
        let offer = changed(current, asked, true)?;
        Ok(Some(
            Record {
                offer: Some(offer),
                shard_key: None,
            }
            .to_bytes(),
        ))
    })?;
    Ok((rawdoc! { "ok": 1_i32 }, ticket))
}

/// `CreateCollection`: creates the collection (as `create` does: in the oplog, in
/// `listCollections`) with its record in the same commit.
fn create_collection(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<(RawDocumentBuf, Option<u64>)> {
    let name = collection_name(req.body)?;
    refuse_indexes(req.body, "CreateCollection")?;
    let shard_key = shard_key(req.body)?;
    let offer = match requested(req.body)? {
        // The minimum configuration: 400 RU/s of its own, unless its database shares
        // throughput (which its collections then use, as the page describes).
        Requested::Nothing => {
            (database_offer(state, req.db).is_none()).then(|| Offer::new(MIN_MANUAL_RU, false))
        }
        Requested::Manual(ru) => Some(manual(ru, 0)?),
        Requested::Autoscale(ru) => Some(autoscale(ru, 0)?),
    };
    if let Some(offer) = &offer {
        check_unsharded(offer, shard_key.as_deref())?;
    }
    let record = Record { offer, shard_key };
    let stored = (record != Record::default()).then(|| record.to_bytes());
    let (_, ticket) = state
        .catalog
        .create_with(req.db, name, RawDocumentBuf::new(), stored)?;
    Ok((rawdoc! { "ok": 1_i32 }, Some(ticket)))
}

/// `UpdateCollection`: a new throughput of its own, of the same kind.
fn update_collection(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<(RawDocumentBuf, Option<u64>)> {
    let name = collection_name(req.body)?;
    refuse_indexes(req.body, "UpdateCollection")?;
    let asked = requested(req.body)?;
    let shared = database_offer(state, req.db).is_some();
    let ticket = state
        .catalog
        .change_offer(req.db, Some(name), |stored, exists| {
            if !exists {
                return Err(collection_not_found(req.db, name));
            }
            let record = stored.and_then(Record::from_bytes).unwrap_or_default();
            let Some(current) = own_offer(&record, shared) else {
                // A collection created without throughput in a database that shares its own
                // has none to change (and cannot be given one afterwards, in Cosmos DB).
                // (Message not documented: this file's choice.)
                return Err(CommandError::bad_value(format!(
                    "Collection {}.{name} shares its database's throughput and has none of \
                     its own to update.",
                    req.db
                )));
            };
            let offer = changed(current, asked, false)?;
            check_unsharded(&offer, record.shard_key.as_deref())?;
            Ok(Some(
                Record {
                    offer: Some(offer),
                    shard_key: record.shard_key,
                }
                .to_bytes(),
            ))
        })?;
    Ok((rawdoc! { "ok": 1_i32 }, ticket))
}

/// The throughput a collection has of its own: its record's, or the default 400 RU/s when it
/// has none and its database shares none (a collection created by an insert).
fn own_offer(record: &Record, database_shares: bool) -> Option<Offer> {
    record
        .offer
        .or_else(|| (!database_shares).then(|| Offer::new(MIN_MANUAL_RU, false)))
}

/// `current` changed as `asked`: of the same kind, within the bounds and above the floor its
/// history sets.
fn changed(current: Offer, asked: Requested, database: bool) -> CommandResult<Offer> {
    let what = if database { "database" } else { "collection" };
    let mut offer = match asked {
        Requested::Nothing => {
            // (Not documented: this file's choice.)
            return Err(CommandError::bad_value(
                "offerThroughput or autoScaleSettings.maxThroughput is required",
            ));
        }
        Requested::Manual(_) | Requested::Autoscale(_)
            if matches!(asked, Requested::Autoscale(_)) != current.autoscale =>
        {
            // The page: "Changing your collection from provisioned throughput to autoscale
            // and vice-versa is only supported in the Azure portal." (Code and message are
            // this file's choice.)
            return Err(CommandError::bad_value(format!(
                "Changing a {what} between provisioned (manual) and autoscale throughput is \
                 only supported in the Azure portal."
            )));
        }
        Requested::Manual(ru) => manual(ru, current.highest.div_ceil(100))?,
        Requested::Autoscale(ru) => autoscale(ru, current.highest.div_ceil(10))?,
    };
    offer.highest = offer.ru_per_second.max(current.highest);
    Ok(offer)
}

/// A manual offer of `ru`, at least `floor`.
fn manual(ru: i64, floor: u32) -> CommandResult<Offer> {
    let min = MIN_MANUAL_RU.max(floor.div_ceil(100).saturating_mul(100));
    match u32::try_from(ru) {
        Ok(value) if value >= min && ru <= MAX_RU && value % 100 == 0 => {
            Ok(Offer::new(value, false))
        }
        _ => Err(CommandError::bad_value(format!(
            "The offer should have valid throughput values between {min} and {MAX_RU} \
             inclusive in increments of 100."
        ))),
    }
}

/// An autoscale offer of maximum `ru`, at least `floor`.
fn autoscale(ru: i64, floor: u32) -> CommandResult<Offer> {
    let min = MIN_AUTOSCALE_RU.max(floor.div_ceil(1000).saturating_mul(1000));
    match u32::try_from(ru) {
        Ok(value) if value >= min && ru <= MAX_RU && value % 1000 == 0 => {
            Ok(Offer::new(value, true))
        }
        // (The wording of the Azure resource provider's description of
        // `autoscaleSettings.maxThroughput`.)
        _ => Err(CommandError::bad_value(format!(
            "The autoscale throughput should have valid throughput values between {min} and \
             {MAX_RU} inclusive in increments of 1000."
        ))),
    }
}

/// Refuses more than 10,000 RU/s for a collection without a shard key (the page: "To specify
/// throughput beyond 10,000 RU/s, the `shardKey` parameter is required.").
fn check_unsharded(offer: &Offer, shard_key: Option<&str>) -> CommandResult<()> {
    if shard_key.is_none() && offer.ru_per_second > UNSHARDED_MAX_RU {
        // (Message not documented: this file's choice.)
        return Err(CommandError::bad_value(format!(
            "A collection without a shard key can have at most {UNSHARDED_MAX_RU} RU/s: \
             shardKey is required for {} RU/s.",
            offer.ru_per_second
        )));
    }
    Ok(())
}

/// The throughput the request asks for.
fn requested(body: &RawDocument) -> CommandResult<Requested> {
    let manual = match body.get("offerThroughput") {
        Ok(None) => None,
        Ok(Some(v)) => Some(whole_number(v, "offerThroughput")?),
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    let autoscale = match body.get("autoScaleSettings") {
        Ok(None) => None,
        Ok(Some(RawBsonRef::Document(settings))) => match settings.get("maxThroughput") {
            Ok(Some(v)) => Some(whole_number(v, "autoScaleSettings.maxThroughput")?),
            // (Not documented: this file's choice.)
            _ => {
                return Err(CommandError::bad_value(
                    "autoScaleSettings requires maxThroughput",
                ));
            }
        },
        Ok(Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                "autoScaleSettings must be an object",
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    match (manual, autoscale) {
        (None, None) => Ok(Requested::Nothing),
        (Some(ru), None) => Ok(Requested::Manual(ru)),
        (None, Some(ru)) => Ok(Requested::Autoscale(ru)),
        // (Not documented: this file's choice.)
        (Some(_), Some(_)) => Err(CommandError::bad_value(
            "offerThroughput and autoScaleSettings cannot both be given",
        )),
    }
}

/// A throughput value: a whole number of any numeric type (a fraction reads as out of range).
fn whole_number(value: RawBsonRef<'_>, field: &str) -> CommandResult<i64> {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "checked whole and within the i64 range first"
    )]
    let whole = |d: f64| {
        if d.fract() == 0.0 && d.abs() < 9.0e18 {
            d as i64
        } else {
            -1
        }
    };
    match value {
        RawBsonRef::Int32(n) => Ok(i64::from(n)),
        RawBsonRef::Int64(n) => Ok(n),
        RawBsonRef::Double(d) => Ok(whole(d)),
        RawBsonRef::Decimal128(d) => Ok(d.to_string().parse::<f64>().map_or(-1, whole)),
        _ => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!("{field} must be a number"),
        )),
    }
}

/// The `collection` field, which the collection actions require.
fn collection_name(body: &RawDocument) -> CommandResult<&str> {
    match body.get("collection") {
        Ok(Some(RawBsonRef::String(name))) if !name.is_empty() => Ok(name),
        // (Not documented: this file's choice.)
        _ => Err(CommandError::bad_value(
            "collection is required and must be a non-empty string",
        )),
    }
}

/// The `shardKey` field: a path.
fn shard_key(body: &RawDocument) -> CommandResult<Option<String>> {
    match body.get("shardKey") {
        Ok(None) => Ok(None),
        Ok(Some(RawBsonRef::String(path))) if !path.is_empty() && !path.contains('\0') => {
            Ok(Some(path.to_owned()))
        }
        // (Not documented: this file's choice.)
        _ => Err(CommandError::bad_value(
            "shardKey must be a non-empty string: the path of the shard key",
        )),
    }
}

/// `indexes` (which replaces a collection's indexes) is not implemented.
fn refuse_indexes(body: &RawDocument, action: &str) -> CommandResult<()> {
    if matches!(body.get("indexes"), Ok(Some(_))) {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            format!("customAction {action} with indexes is not implemented by Ebb"),
        ));
    }
    Ok(())
}

/// The database's shared throughput, if it has one.
fn database_offer(state: &ServerState, db: &str) -> Option<Offer> {
    state
        .cosmos
        .as_ref()
        .and_then(|c| c.offers.record(db, None))
        .and_then(|r| r.offer)
}

/// Whether `db` exists without a record of its own: it holds a collection or a view (created
/// by a write or by `create`).
fn database_exists(state: &ServerState, db: &str) -> bool {
    !state.catalog.collections(db).is_empty() || !state.catalog.views(db).is_empty()
}

/// Adds `provisionedThroughput` (and `autoScaleSettings`) of `offer`, in the page's order.
fn append_offer(reply: &mut RawDocumentBuf, offer: Option<&Offer>) {
    if let Some(offer) = offer {
        reply.append(
            bson::raw::cstr!("provisionedThroughput"),
            i32::try_from(offer.provisioned()).unwrap_or(i32::MAX),
        );
        if offer.autoscale {
            reply.append(
                bson::raw::cstr!("autoScaleSettings"),
                autoscale_settings(offer),
            );
        }
    }
}

/// (Not documented: this file's choice, mongod's code for a missing namespace.)
fn database_not_found(db: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NamespaceNotFound,
        format!("Database {db} does not exist."),
    )
}

/// (Not documented: this file's choice, mongod's code and message for a missing namespace.)
fn collection_not_found(db: &str, name: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NamespaceNotFound,
        format!("ns does not exist: {db}.{name}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_bounds_and_steps() {
        assert_eq!(manual(400, 0).unwrap(), Offer::new(400, false));
        assert_eq!(manual(1_000_000, 0).unwrap().ru_per_second, 1_000_000);
        for bad in [300, 450, 1_000_100, -400, 0] {
            let err = manual(bad, 0).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadValue, "{bad}");
            assert_eq!(
                err.errmsg,
                "The offer should have valid throughput values between 400 and 1000000 \
                 inclusive in increments of 100."
            );
        }
        // 1% of the highest ever: 50,000 → at least 500.
        assert!(manual(400, 500).is_err());
        assert!(manual(500, 500).is_ok());
    }

    #[test]
    fn autoscale_bounds_and_floor() {
        assert!(autoscale(1000, 0).unwrap().autoscale);
        assert!(autoscale(1500, 0).is_err());
        assert!(autoscale(0, 0).is_err());
        let err = autoscale(1000, 2000).unwrap_err();
        assert!(
            err.errmsg.contains("between 2000 and 1000000"),
            "{}",
            err.errmsg
        );
    }

    #[test]
    fn changes_keep_the_kind_and_the_highest() {
        let current = Offer::new(20000, true);
        assert!(changed(current, Requested::Manual(1000), false).is_err());
        let down = changed(current, Requested::Autoscale(4000), false).unwrap();
        assert_eq!((down.ru_per_second, down.highest), (4000, 20000));
        // 10% of 20,000.
        assert!(changed(down, Requested::Autoscale(1000), false).is_err());
        assert!(changed(current, Requested::Nothing, true).is_err());
    }

    #[test]
    fn numbers_read_whole() {
        assert_eq!(whole_number(RawBsonRef::Double(1000.0), "x").unwrap(), 1000);
        assert_eq!(whole_number(RawBsonRef::Double(1000.5), "x").unwrap(), -1);
        assert_eq!(whole_number(RawBsonRef::Int64(7), "x").unwrap(), 7);
        assert!(whole_number(RawBsonRef::String("1000"), "x").is_err());
    }
}
