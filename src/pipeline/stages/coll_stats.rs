//! `$collStats` (`{latencyStats?: {histograms?}, storageStats?: {scale?, …}, count?: {},
//! queryExecStats?: {}}`) and `$indexStats` (`{}`): first stages that read no documents but
//! the server's own figures about the pipeline's collection, through
//! [`crate::pipeline::Reader::server_state`]. Parsed as mongod 7.0 parses them
//! (`document_source_coll_stats.idl`, `storage_stats_spec.idl`,
//! `document_source_index_stats.cpp`).

use bson::{RawBsonRef, RawDocument};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, ServerRead, Stage, Stream, blocking, computed};
use crate::query::display::{self, type_name};

/// What `$collStats` asks for, section by section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollStatsSpec {
    /// `latencyStats`, with its `histograms` flag.
    pub latency_stats: Option<bool>,
    /// `storageStats`, with its `scale` (1 when absent).
    pub storage_stats: Option<i32>,
    /// `count: {}`.
    pub count: bool,
    /// `queryExecStats: {}`.
    pub query_exec_stats: bool,
}

const STAGE: &str = "$collStats";

fn wrong_type(path: &str, v: RawBsonRef<'_>, expected: &str) -> CommandError {
    CommandError::type_mismatch(format!(
        "BSON field '{path}' is the wrong type '{}', expected {expected}",
        type_name(v.element_type())
    ))
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// An IDL `optionalBool`: a bool or a number.
fn optional_bool(path: &str, v: RawBsonRef<'_>) -> CommandResult<bool> {
    match v {
        RawBsonRef::Boolean(b) => Ok(b),
        RawBsonRef::Int32(i) => Ok(i != 0),
        RawBsonRef::Int64(i) => Ok(i != 0),
        RawBsonRef::Double(d) => Ok(d != 0.0),
        other => Err(wrong_type(
            path,
            other,
            "types '[bool, long, int, decimal, double]'",
        )),
    }
}

/// `count` and `queryExecStats`: an empty object (mongod's `validateObjectIsEmpty`, 31170).
fn empty_object(path: &str, v: RawBsonRef<'_>) -> CommandResult<bool> {
    match v {
        RawBsonRef::Document(d) if d.is_empty() => Ok(true),
        RawBsonRef::Document(d) => Err(CommandError::new(
            ErrorCode::Location(31170),
            format!(
                "expected an empty object, but got {}",
                display::value(RawBsonRef::Document(d))
            ),
        )),
        other => Err(wrong_type(path, other, "type 'object'")),
    }
}

/// `storageStats.scale`: an IDL `safeInt`, at least 1.
fn scale(v: RawBsonRef<'_>) -> CommandResult<i32> {
    const PATH: &str = "$collStats.storageStats.scale";
    #[expect(
        clippy::cast_possible_truncation,
        reason = "clamped to i32's range first, as mongod's safeNumberInt does"
    )]
    let n = match v {
        RawBsonRef::Int32(i) => i,
        RawBsonRef::Int64(i) => i32::try_from(i).unwrap_or(if i < 0 { i32::MIN } else { i32::MAX }),
        RawBsonRef::Double(d) if d.is_nan() => 0,
        RawBsonRef::Double(d) => d.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32,
        RawBsonRef::Decimal128(d) => {
            let f = crate::query::compare::decimal_to_f64(d);
            if f.is_nan() {
                0
            } else {
                f.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
            }
        }
        other => {
            return Err(wrong_type(
                PATH,
                other,
                "types '[long, int, decimal, double]'",
            ));
        }
    };
    if n < 1 {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field '{PATH}' value must be >= 1, actual value '{n}'"),
        ));
    }
    Ok(n)
}

impl CollStatsSpec {
    /// Parses the stage's argument.
    pub fn parse(arg: RawBsonRef<'_>) -> CommandResult<CollStatsSpec> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(CommandError::new(
                ErrorCode::Location(5_447_000),
                format!(
                    "$collStats must take a nested object but found: {}",
                    display::element(STAGE, arg)
                ),
            ));
        };
        let mut out = CollStatsSpec::default();
        for elem in spec {
            let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
            match k.as_str() {
                "latencyStats" => {
                    let RawBsonRef::Document(l) = v else {
                        return Err(wrong_type("$collStats.latencyStats", v, "type 'object'"));
                    };
                    out.latency_stats = Some(latency_spec(l)?);
                }
                "storageStats" => {
                    let RawBsonRef::Document(s) = v else {
                        return Err(wrong_type("$collStats.storageStats", v, "type 'object'"));
                    };
                    out.storage_stats = Some(storage_spec(s)?);
                }
                "count" => out.count = empty_object("$collStats.count", v)?,
                "queryExecStats" => {
                    out.query_exec_stats = empty_object("$collStats.queryExecStats", v)?;
                }
                "$_requestOnTimeseriesView" => {
                    optional_bool("$collStats.$_requestOnTimeseriesView", v)?;
                }
                other => {
                    return Err(CommandError::unknown_field(&format!("{STAGE}.{other}")));
                }
            }
        }
        Ok(out)
    }
}

/// `latencyStats: {histograms?}` (strict).
fn latency_spec(l: &RawDocument) -> CommandResult<bool> {
    let mut histograms = false;
    for elem in l {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        match k.as_str() {
            "histograms" => histograms = optional_bool("$collStats.latencyStats.histograms", v)?,
            other => {
                return Err(CommandError::unknown_field(&format!(
                    "{STAGE}.latencyStats.{other}"
                )));
            }
        }
    }
    Ok(histograms)
}

/// `storageStats: {scale?, verbose?, waitForLock?, numericOnly?}` (not strict: other fields
/// are ignored, as mongod ignores them).
fn storage_spec(s: &RawDocument) -> CommandResult<i32> {
    let mut out = 1;
    for elem in s {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        match k.as_str() {
            "scale" => out = scale(v)?,
            name @ ("verbose" | "waitForLock" | "numericOnly") => {
                optional_bool(&format!("{STAGE}.storageStats.{name}"), v)?;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// `$collStats`: one document with the requested sections.
pub struct CollStats(CollStatsSpec);

impl CollStats {
    /// Parses `$collStats: {…}`.
    pub fn parse(arg: RawBsonRef<'_>) -> CommandResult<CollStats> {
        CollStatsSpec::parse(arg).map(CollStats)
    }
}

/// `$indexStats: {}`: one document per index of the collection.
pub struct IndexStats;

impl IndexStats {
    /// Parses `$indexStats: {}` (anything else is mongod's 28803).
    pub fn parse(arg: RawBsonRef<'_>) -> CommandResult<IndexStats> {
        match arg {
            RawBsonRef::Document(d) if d.is_empty() => Ok(IndexStats),
            _ => Err(CommandError::new(
                ErrorCode::Location(28803),
                "The $indexStats stage specification must be an empty object",
            )),
        }
    }
}

/// The documents the command layer answers for `what`; a stage run without a reader (a
/// pipeline outside any command) has none to ask.
fn server_state<'a>(ctx: &'a Context, what: ServerRead<'a>) -> Stream<'a> {
    blocking(move || {
        let reader = ctx.reader.as_deref().ok_or_else(|| {
            CommandError::internal("this stage reads the server's state, and has no reader")
        })?;
        Ok(reader
            .server_state(&what)?
            .into_iter()
            .map(computed)
            .collect())
    })
}

impl Stage for CollStats {
    fn run<'a>(&'a self, _input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        server_state(ctx, ServerRead::CollStats(&self.0))
    }

    fn initial_source(&self) -> bool {
        true
    }
}

impl Stage for IndexStats {
    fn run<'a>(&'a self, _input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        server_state(ctx, ServerRead::IndexStats)
    }

    fn initial_source(&self) -> bool {
        true
    }
}

/// `$geoNear`: parsed only as far as mongod checks its argument's form; Ebb builds no geo
/// index, so running it answers what mongod answers for a collection without one.
pub struct GeoNear;

impl GeoNear {
    /// Parses `$geoNear: {…}` (an object, mongod's 10065 otherwise).
    pub fn parse(arg: RawBsonRef<'_>) -> CommandResult<GeoNear> {
        match arg {
            RawBsonRef::Document(_) => Ok(GeoNear),
            other => Err(CommandError::new(
                ErrorCode::Location(10065),
                format!(
                    "invalid parameter: expected an object ({})",
                    display::element("$geoNear", other)
                ),
            )),
        }
    }
}

impl Stage for GeoNear {
    fn run<'a>(&'a self, _input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        server_state(ctx, ServerRead::GeoNear)
    }

    fn initial_source(&self) -> bool {
        true
    }
}

/// The Atlas Search stages (`$search`, `$searchMeta`, `$vectorSearch`): a server without a
/// `mongot` refuses them with `SearchNotEnabled` (31082), as mongod 7.0 community does.
pub fn search_not_enabled() -> CommandError {
    CommandError::new(
        ErrorCode::SearchNotEnabled,
        "Using $search and $vectorSearch aggregation stages requires additional configuration. \
         Please connect to Atlas or an AtlasCLI local deployment to enable.For more information \
         on how to connect, see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.",
    )
}

#[cfg(test)]
mod tests {
    use bson::{rawbson, rawdoc};

    use super::*;

    fn parse(d: &bson::RawDocumentBuf) -> CommandResult<CollStatsSpec> {
        CollStatsSpec::parse(RawBsonRef::Document(d))
    }

    #[test]
    fn coll_stats_spec_sections() {
        assert_eq!(parse(&rawdoc! {}).unwrap(), CollStatsSpec::default());
        let spec = parse(&rawdoc! {
            "latencyStats": { "histograms": true },
            "storageStats": { "scale": 1024, "verbose": false, "other": 1 },
            "count": {},
            "queryExecStats": {},
        })
        .unwrap();
        assert_eq!(
            spec,
            CollStatsSpec {
                latency_stats: Some(true),
                storage_stats: Some(1024),
                count: true,
                query_exec_stats: true,
            }
        );
        assert_eq!(
            parse(&rawdoc! { "latencyStats": {}, "storageStats": {} }).unwrap(),
            CollStatsSpec {
                latency_stats: Some(false),
                storage_stats: Some(1),
                ..CollStatsSpec::default()
            }
        );
        assert_eq!(
            parse(&rawdoc! { "storageStats": { "scale": 2.9 } })
                .unwrap()
                .storage_stats,
            Some(2)
        );
    }

    #[test]
    fn coll_stats_spec_errors() {
        let code = |d: bson::RawDocumentBuf| parse(&d).unwrap_err().code;
        assert_eq!(code(rawdoc! { "x": 1 }), ErrorCode::IDLUnknownField);
        assert_eq!(
            code(rawdoc! { "latencyStats": { "x": 1 } }),
            ErrorCode::IDLUnknownField
        );
        assert_eq!(code(rawdoc! { "count": 1 }), ErrorCode::TypeMismatch);
        assert_eq!(
            code(rawdoc! { "latencyStats": true }),
            ErrorCode::TypeMismatch
        );
        assert_eq!(
            code(rawdoc! { "latencyStats": { "histograms": "x" } }),
            ErrorCode::TypeMismatch
        );
        let e = parse(&rawdoc! { "count": { "a": 1 } }).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location(31170));
        assert_eq!(e.errmsg, "expected an empty object, but got { a: 1 }");
        let e = parse(&rawdoc! { "storageStats": { "scale": 0 } }).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location(51024));
        assert_eq!(
            e.errmsg,
            "BSON field '$collStats.storageStats.scale' value must be >= 1, actual value '0'"
        );
        assert_eq!(
            code(rawdoc! { "storageStats": { "scale": "x" } }),
            ErrorCode::TypeMismatch
        );
        let e = CollStatsSpec::parse(rawbson!(1).as_raw_bson_ref()).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location(5_447_000));
        assert_eq!(
            e.errmsg,
            "$collStats must take a nested object but found: $collStats: 1"
        );
    }

    #[test]
    fn index_stats_and_geo_near_forms() {
        assert!(IndexStats::parse(rawbson!({}).as_raw_bson_ref()).is_ok());
        for bad in [rawbson!({ "a": 1 }), rawbson!(1)] {
            let e = IndexStats::parse(bad.as_raw_bson_ref()).err().unwrap();
            assert_eq!(e.code, ErrorCode::Location(28803));
        }
        assert!(GeoNear::parse(rawbson!({ "near": [0, 0] }).as_raw_bson_ref()).is_ok());
        let e = GeoNear::parse(rawbson!(1).as_raw_bson_ref()).err().unwrap();
        assert_eq!(e.code, ErrorCode::Location(10065));
    }
}
