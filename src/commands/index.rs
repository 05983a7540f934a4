//! Index commands: `createIndexes`, `listIndexes`, `dropIndexes`, and `collMod` for index
//! options. TTL indexes (on `_ts` for Cosmos DB's model, on date fields for MongoDB's) are
//! fully live. Every index but the `_ts` TTL policy has entries, built over the existing
//! documents by `createIndexes` (under the collection's write lock, so no write is missed) and
//! kept exact by every write, expiry and drop (see `docs/storage.md`); `unique`, `sparse`,
//! `partialFilterExpression` and `hidden` are honoured. Specs are validated as mongod validates
//! them (`index::spec`); special index types (text, geo, hashed, wildcard) and index
//! collations are refused with `NotImplemented`. At most 64 indexes per collection.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{WriteConcern, collection_name, field, wrong_type};
use crate::catalog::{IndexSpec, validate_namespace, validate_writable};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::index::spec;
use crate::query::display;
use crate::state::ServerState;
use crate::ttl::is_ts_key;

/// MongoDB's `InvalidIndexSpecificationOption` (197).
const INVALID_INDEX_OPTION: ErrorCode = ErrorCode::InvalidIndexSpecificationOption;

fn show(doc: &RawDocument) -> String {
    display::value(RawBsonRef::Document(doc))
}

fn cannot_create(msg: String) -> CommandError {
    CommandError::new(ErrorCode::CannotCreateIndex, msg)
}

/// Validates `expireAfterSeconds` for an index on `key`; returns the seconds Ebb applies.
/// The `_ts` index takes Cosmos DB's values (`-1`, or 1 to 2147483647, whole numbers only);
/// date-field TTL indexes take MongoDB's (0 to 2147483647; a fraction is truncated).
pub(crate) fn check_expire_after_seconds(
    key: &RawDocument,
    value: RawBsonRef<'_>,
    spec: &RawDocument,
) -> CommandResult<i64> {
    let fields = key.iter().count();
    let first = key
        .iter()
        .next()
        .and_then(Result::ok)
        .map(|(k, _)| k.as_str().to_owned());
    if first.as_deref() == Some("_id") && fields == 1 {
        return Err(CommandError::new(
            INVALID_INDEX_OPTION,
            format!(
                "The field 'expireAfterSeconds' is not valid for an _id index specification. \
                 Specification: {}",
                show(spec)
            ),
        ));
    }
    if fields != 1 {
        return Err(cannot_create(format!(
            "Error in specification {} :: caused by :: TTL indexes are single-field indexes, \
             compound indexes do not support TTL",
            show(spec)
        )));
    }
    let number = match value {
        RawBsonRef::Int32(n) => f64::from(n),
        #[expect(clippy::cast_precision_loss, reason = "range-checked right below")]
        RawBsonRef::Int64(n) => n as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().unwrap_or(f64::NAN),
        other => {
            return Err(cannot_create(format!(
                "Error in specification {} :: caused by :: TTL index 'expireAfterSeconds' option \
                 must be numeric, but received a type of '{}'",
                show(spec),
                display::type_name(other.element_type())
            )));
        }
    };
    if number.is_nan() {
        return Err(cannot_create(format!(
            "Error in specification {} :: caused by :: TTL index 'expireAfterSeconds' option \
             must not be NaN",
            show(spec)
        )));
    }
    let max = f64::from(i32::MAX);
    if is_ts_key(key) {
        // Cosmos DB's DefaultTimeToLive: an int32, int64 or whole double (not a decimal): -1,
        // or a number of seconds from 1 to 2^31-1.
        let decimal = matches!(value, RawBsonRef::Decimal128(_));
        if decimal || number.fract() != 0.0 || !(number == -1.0 || (1.0..=max).contains(&number)) {
            return Err(cannot_create(format!(
                "Error in specification {} :: caused by :: the 'expireAfterSeconds' of a TTL \
                 index on '_ts' must be -1 (documents live until their own 'ttl' says \
                 otherwise) or a whole number of seconds from 1 to 2147483647",
                show(spec)
            )));
        }
    } else if !(0.0..=max).contains(&number.trunc()) {
        return Err(cannot_create(format!(
            "Error in specification {} :: caused by :: TTL index 'expireAfterSeconds' option \
             must be within an acceptable range, try a lower number",
            show(spec)
        )));
    }
    #[expect(clippy::cast_possible_truncation, reason = "range-checked above")]
    Ok(number.trunc() as i64)
}

/// Validates the `indexes` entries as mongod does, in its order: every spec's fields, types and
/// key pattern ([`spec::validate`]), then every TTL option, then what each index kind allows
/// ([`spec::check_creatable`]). Returns the specs the catalog keeps.
fn parse_specs(list: &[&RawDocument]) -> CommandResult<Vec<IndexSpec>> {
    let validated = list
        .iter()
        .map(|raw| spec::validate(raw))
        .collect::<CommandResult<Vec<_>>>()?;
    let mut expiries = Vec::with_capacity(validated.len());
    for v in &validated {
        expiries.push(match v.raw.get("expireAfterSeconds").ok().flatten() {
            Some(value) => Some(check_expire_after_seconds(&v.key, value, &v.raw)?),
            None => None,
        });
    }
    validated
        .iter()
        .zip(expiries)
        .map(|(v, expire_after_seconds)| {
            let kept = spec::check_creatable(v)?;
            let partial_filter = match kept.get("partialFilterExpression").ok().flatten() {
                Some(RawBsonRef::Document(f)) => Some(f.to_owned()),
                _ => None,
            };
            Ok(IndexSpec {
                id: 0,
                multikey: std::sync::Arc::default(),
                accesses: std::sync::Arc::default(),
                name: v.name.clone(),
                key: v.key.clone(),
                expire_after_seconds,
                partial_filter,
                spec: kept,
            })
        })
        .collect()
}

/// The options of a spec that tell two indexes on one key apart, as mongod's
/// `IndexDescriptor::compareIndexOptions` compares them: not the name, `v`, the text and
/// 2dsphere versions, `background` (a creation-time option) or `hidden`; `unique` and `sparse`
/// by truth value.
fn options_of(spec: &RawDocumentBuf) -> Vec<(String, bson::RawBson)> {
    let mut out: Vec<(String, bson::RawBson)> = spec
        .iter()
        .map_while(Result::ok)
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "v" | "name"
                    | "textIndexVersion"
                    | "2dsphereIndexVersion"
                    | "background"
                    | "hidden"
            )
        })
        .filter_map(|(k, v)| match k.as_str() {
            "unique" | "sparse" => crate::query::true_value(v)
                .then(|| (k.as_str().to_owned(), bson::RawBson::Boolean(true))),
            _ => Some((k.as_str().to_owned(), bson::RawBson::from(v))),
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Whether two specs have the same options, comparing values as MongoDB does (so
/// `expireAfterSeconds: NumberLong(10)` and `10` are the same).
fn same_options(a: &RawDocumentBuf, b: &RawDocumentBuf) -> bool {
    let (a, b) = (options_of(a), options_of(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|((ka, va), (kb, vb))| {
            ka == kb
                && crate::query::compare::compare(va.as_raw_bson_ref(), vb.as_raw_bson_ref())
                    .is_eq()
        })
}

pub(super) async fn create_indexes(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let concern = WriteConcern::parse(req)?;
    let list = match field(req, "indexes")? {
        Some(RawBsonRef::Array(a)) => a,
        Some(other) => return Err(wrong_type("createIndexes.indexes", other, " 'array'")),
        None => {
            return Err(CommandError::missing_field("createIndexes.indexes"));
        }
    };
    super::oplog_collection::refuse_indexes(state, req.db, name)?;
    let mut raw_specs = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        match item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
            RawBsonRef::Document(d) => raw_specs.push(d),
            other => {
                return Err(wrong_type(
                    &format!("createIndexes.indexes.{i}"),
                    other,
                    " 'object'",
                ));
            }
        }
    }
    let requested = parse_specs(&raw_specs)?;
    if requested.is_empty() {
        return Err(CommandError::bad_value(
            "Must specify at least one index to create",
        ));
    }
    if let Some(txn) = crate::txn::current() {
        return create_in_transaction(state, &txn, req.db, name, requested);
    }
    let catalog = std::sync::Arc::clone(&state.catalog);
    let (db, coll, now_ms) = (req.db.to_owned(), name.to_owned(), state.now_ms());
    // Building over existing documents takes a while: off the runtime's workers.
    // Not carried into `--profile cosmos`'s request charge: Cosmos DB builds indexes in the
    // background, on throughput requests leave unused, and charges no request for it.
    let built = tokio::task::spawn_blocking(move || {
        catalog.change_indexes(&db, &coll, true, now_ms, move |c, indexes| {
            add_requested(c, indexes, requested)
        })
    })
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?;
    if built.is_err() {
        // A failed build leaves entries to remove.
        state.purge_wake.notify_one();
    }
    let ((before, after), ticket, created) = built?;
    concern.wait(state, ticket).await?;
    Ok(created_reply(before, after, created))
}

/// `createIndexes`' reply: the index counts before and after, and whether the collection was
/// created for them.
fn created_reply(before: usize, after: usize, created: bool) -> RawDocumentBuf {
    let mut reply = rawdoc! {
        "numIndexesBefore": i32::try_from(before).unwrap_or(i32::MAX),
        "numIndexesAfter": i32::try_from(after).unwrap_or(i32::MAX),
    };
    if before == after {
        reply.append(cstr!("note"), "all indexes already exist");
    } else {
        reply.append(cstr!("createdCollectionAutomatically"), created);
    }
    reply.append(cstr!("ok"), 1.0);
    reply
}

/// Adds the `requested` indexes to `indexes` (those of `c`), refusing conflicts as mongod does.
/// Returns the number of indexes before and after, the `_id` index counted.
fn add_requested(
    c: &crate::catalog::Collection,
    indexes: &mut Vec<crate::catalog::IndexSpec>,
    requested: Vec<crate::catalog::IndexSpec>,
) -> CommandResult<(usize, usize)> {
    let before = indexes.len() + 1;
    for new in requested {
        // The `_id` index always exists: mongod names every spec of its key pattern
        // `_id_` (`_fixIndexSpec`), and `spec::validate` allowed it no other options.
        if spec::is_id_pattern(&new.key) {
            continue;
        }
        let same_name = indexes.iter().find(|i| i.name == new.name);
        let same_key = indexes.iter().find(|i| i.key == new.key);
        match (same_name, same_key) {
            (Some(existing), _) if existing.key != new.key => {
                return Err(CommandError::new(
                    ErrorCode::IndexKeySpecsConflict,
                    format!(
                        "An existing index has the same name as the requested index. When \
                         index names are not specified, they are auto generated and can \
                         cause conflicts. Please refer to our documentation. Requested \
                         index: {}, existing index: {}",
                        show(&new.spec),
                        show(&existing.spec)
                    ),
                ));
            }
            (Some(existing), _) if !same_options(&existing.spec, &new.spec) => {
                return Err(CommandError::new(
                    ErrorCode::IndexOptionsConflict,
                    format!(
                        "An equivalent index already exists with the same name but \
                         different options. Requested index: {}, existing index: {}",
                        show(&new.spec),
                        show(&existing.spec)
                    ),
                ));
            }
            (Some(_), _) => {}
            (None, Some(existing)) => {
                return Err(CommandError::new(
                    ErrorCode::IndexOptionsConflict,
                    format!(
                        "Index already exists with a different name: {}",
                        existing.name
                    ),
                ));
            }
            (None, None) => {
                // One collection, one default TTL: a second `_ts` TTL index (say
                // `{_ts: -1}` beside `{_ts: 1}`) would make two.
                if new.expire_after_seconds.is_some()
                    && is_ts_key(&new.key)
                    && let Some(existing) = indexes
                        .iter()
                        .find(|i| i.expire_after_seconds.is_some() && is_ts_key(&i.key))
                {
                    {
                        return Err(CommandError::new(
                            ErrorCode::IndexOptionsConflict,
                            format!(
                                "the collection already has a TTL index on '_ts' ({}); \
                                 change its expireAfterSeconds with collMod",
                                existing.name
                            ),
                        ));
                    }
                }
                // The `_id` index counts.
                if indexes.len() + 1 >= spec::MAX_INDEXES {
                    return Err(CommandError::new(
                        ErrorCode::CannotCreateIndex,
                        format!(
                            "add index fails, too many indexes for {} key:{}",
                            c.namespace(),
                            show(&new.key)
                        ),
                    ));
                }
                indexes.push(new);
            }
        }
    }
    Ok((before, indexes.len() + 1))
}

/// `createIndexes` in a transaction (MongoDB 4.4+): on a collection the transaction created
/// and has not written to yet (created now if missing), where there is nothing to build. An
/// existing collection's indexes cannot change in a transaction.
fn create_in_transaction(
    state: &ServerState,
    txn: &crate::txn::Transaction,
    db: &str,
    name: &str,
    requested: Vec<crate::catalog::IndexSpec>,
) -> CommandResult {
    let ns = format!("{db}.{name}");
    let (pending, created) = match txn.created(db, name) {
        Some(c) => (c, false),
        None if state.catalog.get(db, name).is_some() || state.catalog.is_view(db, name) => {
            return Err(CommandError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                format!(
                    "Cannot create new indexes on existing collection {ns} in a multi-document \
                     transaction."
                ),
            ));
        }
        None => {
            let c = std::sync::Arc::new(state.catalog.prepare_create(
                db,
                name,
                RawDocumentBuf::new(),
            )?);
            txn.keep_created(std::sync::Arc::clone(&c))?;
            (c, true)
        }
    };
    if txn.has_written(pending.id) {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!(
                "Cannot create new indexes on non-empty collection {ns} in a multi-document \
                 transaction."
            ),
        ));
    }
    let ((before, after), changed) = state
        .catalog
        .change_pending_indexes(&pending, |c, indexes| add_requested(c, indexes, requested))?;
    txn.keep_created(std::sync::Arc::new(changed))?;
    Ok(created_reply(before, after, created))
}

fn id_index() -> RawDocumentBuf {
    rawdoc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }
}

pub(super) fn list_indexes(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_namespace(req.db, name)?;
    let Some(collection) = state.collection(req.db, name) else {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {}.{name}", req.db),
        ));
    };
    let mut batch = RawArrayBuf::new();
    batch.push(id_index());
    for i in &collection.indexes {
        batch.push(spec::listed(&i.spec));
    }
    Ok(rawdoc! {
        "cursor": { "id": 0_i64, "ns": format!("{}.{name}", req.db), "firstBatch": batch },
        "ok": 1.0,
    })
}

pub(super) async fn drop_indexes(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let concern = WriteConcern::parse(req)?;
    let target = field(req, "index")?.map(bson::RawBson::from);
    if state.collection(req.db, name).is_none() {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            format!("ns not found {}.{name}", req.db),
        ));
    }
    let (was, ticket, _) =
        state
            .catalog
            .change_indexes(req.db, name, false, state.now_ms(), |_, indexes| {
                let was = indexes.len() + 1;
                let cannot_drop_id =
                    || CommandError::new(ErrorCode::InvalidOptions, "cannot drop _id index");
                match target.as_ref().map(bson::RawBson::as_raw_bson_ref) {
                    Some(RawBsonRef::String("*")) => indexes.clear(),
                    Some(RawBsonRef::String("_id_")) => return Err(cannot_drop_id()),
                    Some(RawBsonRef::String(n)) => {
                        let Some(at) = indexes.iter().position(|i| i.name == n) else {
                            return Err(CommandError::new(
                                ErrorCode::IndexNotFound,
                                format!("index not found with name [{n}]"),
                            ));
                        };
                        indexes.remove(at);
                    }
                    Some(RawBsonRef::Array(names)) => {
                        let mut wanted = Vec::new();
                        for n in names {
                            match n.map_err(|e| {
                                CommandError::new(ErrorCode::InvalidBSON, e.to_string())
                            })? {
                                RawBsonRef::String("_id_") => return Err(cannot_drop_id()),
                                RawBsonRef::String(n) => wanted.push(n.to_owned()),
                                other => {
                                    return Err(wrong_type(
                                        "dropIndexes.index.0",
                                        other,
                                        " 'string'",
                                    ));
                                }
                            }
                        }
                        if let Some(missing) = wanted
                            .iter()
                            .find(|n| !indexes.iter().any(|i| &i.name == *n))
                        {
                            return Err(CommandError::new(
                                ErrorCode::IndexNotFound,
                                format!("index not found with name [{missing}]"),
                            ));
                        }
                        indexes.retain(|i| !wanted.contains(&i.name));
                    }
                    Some(RawBsonRef::Document(key)) => {
                        if key.as_bytes() == rawdoc! { "_id": 1 }.as_bytes() {
                            return Err(cannot_drop_id());
                        }
                        let Some(at) = indexes
                            .iter()
                            .position(|i| i.key.as_bytes() == key.as_bytes())
                        else {
                            return Err(CommandError::new(
                                ErrorCode::IndexNotFound,
                                format!("can't find index with key: {}", show(key)),
                            ));
                        };
                        indexes.remove(at);
                    }
                    Some(other) => {
                        return Err(wrong_type(
                            "dropIndexes.index",
                            other,
                            "s '[string, object, array]'",
                        ));
                    }
                    None => {
                        return Err(CommandError::missing_field("dropIndexes.index"));
                    }
                }
                Ok(was)
            })?;
    // The dropped indexes' entries are removed in the background.
    state.purge_wake.notify_one();
    concern.wait(state, ticket).await?;
    let mut reply = rawdoc! { "nIndexesWas": i32::try_from(was).unwrap_or(i32::MAX) };
    if matches!(target, Some(bson::RawBson::String(ref s)) if s == "*") {
        reply.append(cstr!("msg"), "non-_id indexes dropped for collection");
    }
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

pub(super) async fn coll_mod(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    if state.catalog.is_view(req.db, name) {
        return super::views::coll_mod(req, state, name).await;
    }
    let concern = WriteConcern::parse(req)?;
    let mut index = None;
    let mut images = None;
    for entry in req.body {
        let (k, v) = entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            (k, _) if k == req.name || super::spec::is_generic(k) => {}
            ("index", RawBsonRef::Document(d)) => index = Some(d),
            ("index", other) => return Err(wrong_type("collMod.index", other, " 'object'")),
            ("changeStreamPreAndPostImages", v) => {
                images = Some(super::collection::pre_and_post_images("collMod", v)?);
            }
            ("viewOn" | "pipeline", _) => return Err(super::views::only_on_a_view(req)),
            (
                "validator" | "validationLevel" | "validationAction" | "expireAfterSeconds"
                | "timeseries" | "clusteredIndex" | "cappedSize" | "cappedMax",
                _,
            ) => {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    format!(
                        "collMod option '{}' is not supported by Ebb yet",
                        k.as_str()
                    ),
                ));
            }
            (other, _) => {
                return Err(CommandError::unknown_field(&format!("collMod.{other}")));
            }
        }
    }
    if state.collection(req.db, name).is_none() {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {}.{name}", req.db),
        ));
    }
    let mut images_ticket = None;
    if let Some(enabled) = images {
        images_ticket = state.catalog.set_option(
            req.db,
            name,
            "changeStreamPreAndPostImages",
            &rawdoc! { "enabled": enabled },
        )?;
    }
    let Some(index) = index else {
        if images.is_none() {
            images_ticket = state.catalog.log_empty_coll_mod(req.db, name)?;
        }
        concern.wait(state, images_ticket).await?;
        return Ok(rawdoc! { "ok": 1.0 });
    };
    let mut by_key = None;
    let mut by_name = None;
    let mut new_expire = None;
    let mut new_hidden = None;
    for entry in index {
        let (k, v) = entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("keyPattern", RawBsonRef::Document(d)) => by_key = Some(d),
            ("name", RawBsonRef::String(s)) => by_name = Some(s),
            ("expireAfterSeconds", v) => new_expire = Some(v),
            ("hidden", RawBsonRef::Boolean(b)) => new_hidden = Some(b),
            (field @ ("keyPattern" | "name" | "hidden"), other) => {
                let expected = match field {
                    "keyPattern" => " 'object'",
                    "name" => " 'string'",
                    _ => " 'bool'",
                };
                return Err(wrong_type(
                    &format!("collMod.index.{field}"),
                    other,
                    expected,
                ));
            }
            (other, _) => {
                return Err(CommandError::unknown_field(&format!(
                    "collMod.index.{other}"
                )));
            }
        }
    }
    if by_key.is_some() == by_name.is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "must specify either index name or key pattern",
        ));
    }
    if new_expire.is_none() && new_hidden.is_none() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "no expireAfterSeconds or hidden field",
        ));
    }
    let (reply, ticket, _) =
        state
            .catalog
            .change_indexes(req.db, name, false, state.now_ms(), |c, indexes| {
                let found = indexes.iter_mut().find(|i| match (by_key, by_name) {
                    (Some(k), _) => i.key.as_bytes() == k.as_bytes(),
                    (_, Some(n)) => i.name == n,
                    _ => false,
                });
                let Some(found) = found else {
                    let what =
                        by_name.map_or_else(|| by_key.map(show).unwrap_or_default(), str::to_owned);
                    return Err(CommandError::new(
                        ErrorCode::IndexNotFound,
                        format!("cannot find index {what} for ns {}", c.namespace()),
                    ));
                };
                let mut reply = RawDocumentBuf::new();
                let mut spec = RawDocumentBuf::new();
                let old_expire = found
                    .spec
                    .get("expireAfterSeconds")
                    .ok()
                    .flatten()
                    .map(bson::RawBson::from);
                let old_hidden = matches!(
                    found.spec.get("hidden").ok().flatten(),
                    Some(RawBsonRef::Boolean(true))
                );
                if let Some(v) = new_expire {
                    // mongod reports an invalid value given to collMod as InvalidOptions,
                    // naming the requested change.
                    let mut requested = rawdoc! { "keyPattern": found.key.clone() };
                    requested.append(cstr!("expireAfterSeconds"), v);
                    let seconds = check_expire_after_seconds(&found.key, v, &requested)
                        .map_err(|e| CommandError::new(ErrorCode::InvalidOptions, e.errmsg))?;
                    found.expire_after_seconds = Some(seconds);
                    if let Some(old) = &old_expire {
                        reply.append(cstr!("expireAfterSeconds_old"), old.clone());
                    }
                    reply.append(cstr!("expireAfterSeconds_new"), v);
                }
                if let Some(h) = new_hidden {
                    reply.append(cstr!("hidden_old"), old_hidden);
                    reply.append(cstr!("hidden_new"), h);
                }
                for (k, v) in found.spec.iter().map_while(Result::ok) {
                    match k.as_str() {
                        "expireAfterSeconds" if new_expire.is_some() => {}
                        "hidden" if new_hidden.is_some() => {}
                        _ => spec.append(k, v),
                    }
                }
                if let Some(v) = new_expire {
                    spec.append(cstr!("expireAfterSeconds"), v);
                }
                if new_hidden == Some(true) {
                    spec.append(cstr!("hidden"), true);
                }
                found.spec = spec;
                Ok(reply)
            })?;
    concern.wait(state, ticket).await?;
    let mut reply = reply;
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}
