//! `$graphLookup`: a recursive search of another collection of the same database, breadth
//! first from the values of `startWith`, following `connectFromField` to `connectToField`.
//! Each level is one read through the command's [`Reader`] with
//! `{connectToField: {$in: [frontier]}}` (and `restrictSearchWithMatch`), so the planner uses
//! an index on `connectToField` and expired documents stay invisible. Documents are visited
//! once each, by `_id`, so cycles end; the found documents come in discovery order (mongod's
//! order is unspecified).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::unwind::field_path;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Reader, Stage, Stream, aggregation_error, doc};
use crate::query::compare::compare;
use crate::query::display::type_name;
use crate::query::expr::Expression;
use crate::query::filter::{Filter, FilterContext};
use crate::query::{Collation, Variables};

/// mongod's `internalDocumentSourceGraphLookupMaxMemoryBytes` (100 MiB): the visited documents
/// and the frontier together must stay below it.
const MAX_MEMORY_BYTES: usize = 100 * 1024 * 1024;

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn failed(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

/// A BSON value ordered (and so deduplicated) by the BSON comparison order.
#[derive(Debug, Clone)]
struct Key(RawBson);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.0.as_raw_bson_ref(), other.0.as_raw_bson_ref())
    }
}

/// `$graphLookup: {from, startWith, connectFromField, connectToField, as, maxDepth?,
/// depthField?, restrictSearchWithMatch?}`.
pub struct GraphLookup {
    from: String,
    start_with: Expression,
    connect_from: Vec<String>,
    connect_to: String,
    as_path: Vec<String>,
    depth_field: Option<Vec<String>>,
    max_depth: Option<i64>,
    restrict: Option<RawDocumentBuf>,
    vars: Arc<Variables>,
    collation: Option<Arc<Collation>>,
    max_memory: usize,
}

impl GraphLookup {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<GraphLookup> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(failed(format!(
                "the $graphLookup stage specification must be an object, but found {}",
                type_name(arg.element_type())
            )));
        };
        // mongod's lite parse checks `from` before the rest.
        match spec.get("from") {
            Ok(Some(RawBsonRef::String(_))) => {}
            Ok(Some(RawBsonRef::Document(ns))) => {
                // Only mongod's internal `local.system.tenantMigration.oplogView` takes this
                // form.
                let part = |k: &str| match ns.get(k) {
                    Ok(Some(RawBsonRef::String(s))) => s.to_owned(),
                    _ => String::new(),
                };
                return Err(failed(format!(
                    "$graphLookup with syntax {{from: {{db:<>, coll:<>}},..}} is not supported \
                     for db: {} and coll: {}",
                    part("db"),
                    part("coll")
                )));
            }
            Ok(Some(other)) => {
                return Err(failed(format!(
                    "$graphLookup 'from' field must be a string, but found {}",
                    type_name(other.element_type())
                )));
            }
            _ => {
                return Err(failed(format!(
                    "missing 'from' option to $graphLookup stage specification: {}",
                    crate::query::display::value(RawBsonRef::Document(spec))
                )));
            }
        }
        let (mut from, mut as_field, mut connect_from, mut connect_to) = (None, None, None, None);
        let (mut start_with, mut depth_field, mut max_depth, mut restrict) =
            (None, None, None, None);
        for item in spec {
            let (name, value) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match name.as_str() {
                "startWith" => start_with = Some(Expression::parse_in(value, vars)?),
                "maxDepth" => max_depth = Some(parse_max_depth(value)?),
                "restrictSearchWithMatch" => {
                    let RawBsonRef::Document(d) = value else {
                        return Err(loc(
                            40185,
                            format!(
                                "restrictSearchWithMatch must be an object, found {}",
                                type_name(value.element_type())
                            ),
                        ));
                    };
                    Filter::compile_in(d, FilterContext::Pipeline, vars).map_err(|mut e| {
                        e.errmsg = format!(
                            "Failed to parse 'restrictSearchWithMatch' option to $graphLookup \
                             :: caused by :: {}",
                            e.errmsg
                        );
                        e
                    })?;
                    restrict = Some(d.to_owned());
                }
                field @ ("from" | "as" | "connectFromField" | "connectToField" | "depthField") => {
                    let s = match value {
                        RawBsonRef::String(s) => s.to_owned(),
                        RawBsonRef::Document(_) if field == "from" => {
                            return Err(failed(
                                "$graphLookup with syntax {from: {db:<>, coll:<>},..} is not \
                                 supported for this namespace",
                            ));
                        }
                        RawBsonRef::Document(_) => {
                            return Err(loc(
                                13111,
                                format!("wrong type for field ({field}) 3 != 2"),
                            ));
                        }
                        other => {
                            return Err(loc(
                                40103,
                                format!(
                                    "expected string as argument for {field}, found: {}",
                                    type_name(other.element_type())
                                ),
                            ));
                        }
                    };
                    match field {
                        "from" => {
                            if s.is_empty() {
                                return Err(CommandError::new(
                                    ErrorCode::InvalidNamespace,
                                    "invalid $graphLookup namespace: ''",
                                ));
                            }
                            from = Some(s);
                        }
                        "as" => as_field = Some(s),
                        "connectFromField" => connect_from = Some(s),
                        "connectToField" => connect_to = Some(s),
                        _ => depth_field = Some(field_path(&s)?),
                    }
                }
                other => {
                    return Err(loc(
                        40104,
                        format!("Unknown argument to $graphLookup: {other}"),
                    ));
                }
            }
        }
        let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
        let (Some(from), Some(as_field), Some(start_with), Some(connect_from), Some(connect_to)) = (
            nonempty(from),
            nonempty(as_field),
            start_with,
            nonempty(connect_from),
            nonempty(connect_to),
        ) else {
            return Err(loc(
                40105,
                "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and \
                 'connectToField' to be specified.",
            ));
        };
        // mongod keeps these as FieldPaths, with their checks.
        field_path(&connect_to)?;
        Ok(GraphLookup {
            from,
            start_with,
            connect_from: field_path(&connect_from)?,
            connect_to,
            as_path: field_path(&as_field)?,
            depth_field,
            max_depth,
            restrict,
            vars: Arc::clone(vars),
            collation: None,
            max_memory: MAX_MEMORY_BYTES,
        })
    }

    /// The filter of one level's read: `{$and: [restrict?, {to: {$in: frontier}}, …]}`.
    fn level_filter(&self, frontier: &BTreeSet<Key>) -> CommandResult<Option<Filter>> {
        let mut values = RawArrayBuf::new();
        let (mut null, mut undefined) = (false, false);
        for Key(v) in frontier {
            match v {
                RawBson::Null => null = true,
                RawBson::Undefined => undefined = true,
                _ => {}
            }
            values.push(v.clone());
        }
        if frontier.is_empty() {
            return Ok(None);
        }
        let to = bson::raw::CString::try_from(self.connect_to.as_str())
            .map_err(|e| failed(e.to_string()))?;
        let mut clauses = RawArrayBuf::new();
        if let Some(r) = &self.restrict {
            clauses.push(r.clone());
        }
        let mut cond = RawDocumentBuf::new();
        cond.append(to.clone(), rawdoc! {"$in": values});
        clauses.push(cond);
        if null || undefined {
            // `$in: [null]` also matches a missing field and undefined: mongod excludes both
            // unless asked for.
            let mut exists = RawDocumentBuf::new();
            exists.append(to.clone(), rawdoc! {"$exists": true});
            clauses.push(exists);
            let excluded = match (null, undefined) {
                (true, false) => Some("undefined"),
                (false, true) => Some("null"),
                _ => None,
            };
            if let Some(t) = excluded {
                let mut not = RawDocumentBuf::new();
                not.append(to, rawdoc! {"$not": {"$type": t}});
                clauses.push(not);
            }
        }
        let query = rawdoc! {"$and": clauses};
        Ok(Some(
            Filter::compile_in(&query, FilterContext::Pipeline, &self.vars)?
                .with_collation(self.collation.clone()),
        ))
    }

    /// The documents `input` reaches, each once, with their depth field when asked for.
    fn search(&self, input: &RawDocument, reader: &dyn Reader) -> CommandResult<RawArrayBuf> {
        let mut frontier = BTreeSet::new();
        match self.start_with.evaluate(input)? {
            Some(RawBson::Array(a)) => {
                for v in a.into_iter().map_while(Result::ok) {
                    frontier.insert(Key(v.into()));
                }
            }
            Some(v) => {
                frontier.insert(Key(v));
            }
            // A missing value matches nothing.
            None => {}
        }
        let mut visited: BTreeSet<Key> = BTreeSet::new();
        let mut visited_bytes = 0_usize;
        let mut found = RawArrayBuf::new();
        let mut depth: i64 = 0;
        loop {
            let Some(filter) = self.level_filter(&frontier)? else {
                break;
            };
            let mut next = BTreeSet::new();
            // The next level's values count from here, as mongod counts them.
            let mut frontier_bytes = 0_usize;
            let mut added = false;
            for d in reader.read(&self.from, Some(&filter))? {
                let Ok(Some(id)) = d.get("_id") else {
                    return Err(loc(
                        40271,
                        format!(
                            "Documents in the '{}' namespace must contain an _id for \
                             de-duplication in $graphLookup",
                            self.from
                        ),
                    ));
                };
                let id = Key(id.into());
                if visited.contains(&id) {
                    continue;
                }
                added = true;
                let mut from_values = Vec::new();
                doc::query_values(&d, &self.connect_from, &mut from_values);
                for v in from_values {
                    frontier_bytes = frontier_bytes.saturating_add(value_size(v.as_raw_bson_ref()));
                    next.insert(Key(v));
                }
                let d = match &self.depth_field {
                    Some(path) => doc::set(&d, path, Some(RawBson::Int64(depth))),
                    None => d,
                };
                visited_bytes = visited_bytes
                    .saturating_add(value_size(id.0.as_raw_bson_ref()))
                    .saturating_add(d.as_bytes().len());
                visited.insert(id);
                found.push(d);
                if visited_bytes.saturating_add(frontier_bytes) >= self.max_memory {
                    return Err(loc(
                        40099,
                        "$graphLookup reached maximum memory consumption",
                    ));
                }
            }
            depth = depth.saturating_add(1);
            if !added || self.max_depth.is_some_and(|m| depth > m) {
                break;
            }
            frontier = next;
        }
        Ok(found)
    }

    fn apply(&self, input: &RawDocument, ctx: &Context) -> CommandResult<RawDocumentBuf> {
        let Some(reader) = ctx.reader.as_deref() else {
            return Err(CommandError::internal(
                "$graphLookup has no collection reader",
            ));
        };
        let found = self.search(input, reader).map_err(aggregation_error)?;
        Ok(doc::set(input, &self.as_path, Some(RawBson::Array(found))))
    }
}

/// `maxDepth`: a nonnegative whole number (40100, 40101, 40102).
fn parse_max_depth(value: RawBsonRef<'_>) -> CommandResult<i64> {
    let (n, exact) = match value {
        RawBsonRef::Int32(i) => (i64::from(i), true),
        RawBsonRef::Int64(i) => (i, true),
        RawBsonRef::Double(f) => saturate(f),
        RawBsonRef::Decimal128(d) => {
            let f = d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            saturate(f)
        }
        other => {
            return Err(loc(
                40100,
                format!(
                    "maxDepth must be numeric, found type: {}",
                    type_name(other.element_type())
                ),
            ));
        }
    };
    if n < 0 {
        return Err(loc(
            40101,
            format!("maxDepth requires a nonnegative argument, found: {n}"),
        ));
    }
    if !exact {
        return Err(loc(
            40102,
            format!("maxDepth could not be represented as a long long: {n}"),
        ));
    }
    Ok(n)
}

/// A double as mongod's `safeNumberLong` converts it (NaN is 0, out of range saturates), and
/// whether that is exact.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    reason = "range checked first; exactness is compared after"
)]
fn saturate(f: f64) -> (i64, bool) {
    if f.is_nan() {
        return (0, false);
    }
    if f >= 9_223_372_036_854_775_807.0 {
        return (i64::MAX, false);
    }
    if f < -9_223_372_036_854_775_808.0 {
        return (i64::MIN, false);
    }
    let n = f as i64;
    (n, n as f64 == f)
}

/// Approximately the bytes a value holds (mongod's `getApproximateSize`).
fn value_size(v: RawBsonRef<'_>) -> usize {
    match v {
        RawBsonRef::Document(d) => d.as_bytes().len(),
        RawBsonRef::Array(a) => a.as_bytes().len(),
        RawBsonRef::String(s) => s.len().saturating_add(16),
        _ => 16,
    }
}

impl Stage for GraphLookup {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        Box::new(input.map(move |r| r.and_then(|(d, e)| Ok((self.apply(&d, ctx)?, e)))))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(Arc::clone(collation));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bson::{Document, doc};

    use super::*;
    use crate::pipeline::stages::tests::{aggregate_in, code, ctx};

    /// A collection in memory, counting the reads.
    struct Fake {
        docs: Vec<RawDocumentBuf>,
        reads: Mutex<usize>,
    }

    impl Reader for Fake {
        fn read(&self, coll: &str, filter: Option<&Filter>) -> CommandResult<Vec<RawDocumentBuf>> {
            assert_eq!(coll, "employees");
            if let Ok(mut n) = self.reads.lock() {
                *n += 1;
            }
            Ok(self
                .docs
                .iter()
                .filter(|d| filter.is_none_or(|f| f.matches(d)))
                .cloned()
                .collect())
        }
    }

    fn employees() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "name": "Dev"},
            doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
            doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
            doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
            doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
            doc! {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
        ]
    }

    fn run_over(
        foreign: &[Document],
        stage: Document,
        docs: &[Document],
    ) -> (CommandResult<Vec<Document>>, usize) {
        let fake = Arc::new(Fake {
            docs: foreign
                .iter()
                .map(|d| RawDocumentBuf::try_from(d).unwrap())
                .collect(),
            reads: Mutex::new(0),
        });
        let mut c = ctx(true, crate::sorter::DEFAULT_MAX_SORT_BYTES);
        c.reader = Some(fake.clone());
        let out = aggregate_in(&c, &[stage], docs);
        let reads = *fake.reads.lock().unwrap();
        (out, reads)
    }

    fn ids(d: &Document, field: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = d
            .get_array(field)
            .unwrap()
            .iter()
            .map(|e| e.as_document().unwrap().get_i32("_id").unwrap())
            .collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn reporting_hierarchy() {
        let stage = doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
        "connectFromField": "reportsTo", "connectToField": "name",
        "as": "reportingHierarchy"}};
        let (out, reads) = run_over(&employees(), stage, &employees());
        let out = out.unwrap();
        let got: Vec<Vec<i32>> = out.iter().map(|d| ids(d, "reportingHierarchy")).collect();
        assert_eq!(
            got,
            vec![
                vec![],
                vec![1],
                vec![1, 2],
                vec![1, 2],
                vec![1, 2, 3],
                vec![1, 2, 4]
            ]
        );
        // Asya: Ron, Eliot, Dev, then a read finding nothing new… or nothing to read. One read
        // per level at most.
        assert!(reads <= 4 + 4 + 3 + 3 + 2, "{reads}");
        assert_eq!(
            out[2].get_array("reportingHierarchy").unwrap()[0],
            bson::Bson::Document(doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"})
        );
    }

    #[test]
    fn max_depth_depth_field_and_restrict() {
        let stage = doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
        "connectFromField": "reportsTo", "connectToField": "name", "as": "h",
        "maxDepth": 1, "depthField": "lvl"}};
        let asya = [doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"}];
        let out = run_over(&employees(), stage, &asya).0.unwrap();
        let mut h: Vec<(i32, i64)> = out[0]
            .get_array("h")
            .unwrap()
            .iter()
            .map(|e| {
                let d = e.as_document().unwrap();
                (d.get_i32("_id").unwrap(), d.get_i64("lvl").unwrap())
            })
            .collect();
        h.sort_unstable();
        assert_eq!(h, vec![(2, 1), (3, 0)]);
        let stage = doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
        "connectFromField": "reportsTo", "connectToField": "name", "as": "h",
        "restrictSearchWithMatch": {"_id": {"$ne": 2}}}};
        let out = run_over(&employees(), stage, &asya).0.unwrap();
        assert_eq!(ids(&out[0], "h"), vec![3]);
    }

    #[test]
    fn cycles_arrays_and_nulls() {
        let ring = vec![
            doc! {"_id": 1, "next": [2, 3]},
            doc! {"_id": 2, "next": 3},
            doc! {"_id": 3, "next": 1},
            doc! {"_id": 4},
            doc! {"_id": 5, "next": null},
        ];
        let stage = doc! {"$graphLookup": {"from": "employees", "startWith": "$start",
        "connectFromField": "next", "connectToField": "_id", "as": "r"}};
        let (out, reads) = run_over(&ring, stage, &[doc! {"start": [1]}]);
        assert_eq!(ids(&out.unwrap()[0], "r"), vec![1, 2, 3]);
        assert!(reads <= 3, "{reads}");
        // null connects only to documents holding null, never to missing fields.
        let stage = doc! {"$graphLookup": {"from": "employees", "startWith": null,
        "connectFromField": "x", "connectToField": "next", "as": "r"}};
        let out = run_over(&ring, stage, &[doc! {}]).0.unwrap();
        assert_eq!(ids(&out[0], "r"), vec![5]);
    }

    #[test]
    fn memory_limit_and_missing_id() {
        let mut g = GraphLookup::parse(
            RawBsonRef::Document(&rawdoc! {"from": "employees", "startWith": "$reportsTo",
            "connectFromField": "reportsTo", "connectToField": "name", "as": "h"}),
            &Arc::new(Variables::system_clock()),
        )
        .unwrap();
        g.max_memory = 64;
        let fake = Fake {
            docs: employees()
                .iter()
                .map(|d| RawDocumentBuf::try_from(d).unwrap())
                .collect(),
            reads: Mutex::new(0),
        };
        let err = g.search(&rawdoc! {"reportsTo": "Ron"}, &fake).unwrap_err();
        assert_eq!(err.code.code(), 40099);
        let no_id = Fake {
            docs: vec![rawdoc! {"name": "x"}],
            reads: Mutex::new(0),
        };
        g.max_memory = MAX_MEMORY_BYTES;
        let err = g.search(&rawdoc! {"reportsTo": "x"}, &no_id).unwrap_err();
        assert_eq!(err.code.code(), 40271);
    }

    #[test]
    fn errors() {
        let base = doc! {"from": "e", "startWith": "$a", "connectFromField": "a",
        "connectToField": "b", "as": "c"};
        let with = |k: &str, v: bson::Bson| {
            let mut d = base.clone();
            d.insert(k, v);
            doc! {"$graphLookup": d}
        };
        assert_eq!(code(doc! {"$graphLookup": 1}, &[]), 9);
        assert_eq!(code(doc! {"$graphLookup": {"as": "x"}}, &[]), 9);
        assert_eq!(code(with("from", 1.into()), &[]), 9);
        let err = crate::pipeline::stages::tests::aggregate(
            &[with("from", doc! {"db": "a", "coll": "b"}.into())],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            (err.code.code(), err.errmsg.as_str()),
            (
                9,
                "$graphLookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: \
                 a and coll: b"
            )
        );
        assert_eq!(
            code(doc! {"$graphLookup": {"from": "x", "as": "y"}}, &[]),
            40105
        );
        assert_eq!(code(with("as", 1.into()), &[]), 40103);
        assert_eq!(code(with("as", "".into()), &[]), 40105);
        assert_eq!(code(with("as", "$x".into()), &[]), 16410);
        assert_eq!(code(with("depthField", "".into()), &[]), 40352);
        assert_eq!(code(with("maxDepth", "1".into()), &[]), 40100);
        assert_eq!(code(with("maxDepth", (-1).into()), &[]), 40101);
        assert_eq!(code(with("maxDepth", 1.5.into()), &[]), 40102);
        assert_eq!(code(with("restrictSearchWithMatch", 1.into()), &[]), 40185);
        assert_eq!(
            code(
                with("restrictSearchWithMatch", doc! {"$bad": 1}.into()),
                &[]
            ),
            2
        );
        assert_eq!(code(with("other", 1.into()), &[]), 40104);
    }
}
