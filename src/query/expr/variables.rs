//! The variables of one command (mongod's `Variables`): `$$NOW`, fixed when the command starts
//! so that every expression of the command sees the same instant, the command's `let` values and
//! a pipeline update statement's constants (`c`).

use std::time::{SystemTime, UNIX_EPOCH};

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Env, Scope, Value, eval, loc, parse, reads_document};
use crate::error::CommandError;
use crate::query::invalid_bson;

/// `$$NOW` and the user variables of one command. Expressions hold it (shared) from parsing on.
#[derive(Debug, Clone)]
pub struct Variables {
    now: bson::DateTime,
    /// User variables in definition order; a later definition of a name hides an earlier one.
    user: Vec<(String, Value)>,
}

/// The builtin variables: `c` may not redefine them.
const BUILTIN: &[&str] = &[
    "ROOT",
    "REMOVE",
    "NOW",
    "CLUSTER_TIME",
    "JS_SCOPE",
    "IS_MR",
    "SEARCH_META",
    "USER_ROLES",
];

/// The builtins only mongod's internal clients may set through `let`.
const INTERNAL_CONSTANTS: &[&str] = &["NOW", "CLUSTER_TIME", "JS_SCOPE", "IS_MR", "USER_ROLES"];

impl Variables {
    /// No user variables; `$$NOW` is `now`.
    pub fn new(now: bson::DateTime) -> Variables {
        Variables {
            now,
            user: Vec::new(),
        }
    }

    /// No user variables; `$$NOW` is the system clock's current time.
    pub fn system_clock() -> Variables {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Variables::new(bson::DateTime::from_millis(ms))
    }

    /// The instant `$$NOW` gives.
    pub fn now(&self) -> bson::DateTime {
        self.now
    }

    /// Defines a command's `let` variables, in order, as mongod does: each name must be a user
    /// variable name, each value is an expression that may use `$$NOW` and the variables before
    /// it but not the document (4890500), evaluated once, here.
    pub fn with_let(mut self, spec: &RawDocument) -> Result<Variables, CommandError> {
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            if let Err(e) = check_write_name(name) {
                if INTERNAL_CONSTANTS.contains(&name) {
                    return Err(loc(
                        4_738_901,
                        format!("Attempt to set internal constant: {name}"),
                    ));
                }
                return Err(CommandError::new(
                    e.code,
                    format!("Invalid 'let' parameter :: caused by :: {}", e.errmsg),
                ));
            }
            let node = parse(value, &mut Scope::new(&self))?;
            if reads_document(&node) {
                // mongod's message, missing space included.
                return Err(loc(
                    4_890_500,
                    "Command let Expression tried to access a field, but this is not allowed \
                     becauseCommand let Expressions run before the query examines any documents.",
                ));
            }
            let empty = RawDocumentBuf::new();
            let env = Env {
                root: &empty,
                vars: &self,
                frame: None,
            };
            let v = eval(&node, env)?;
            self.user.push((name.to_owned(), v));
        }
        Ok(self)
    }

    /// Defines a pipeline update statement's constants (`c`): values as given, not expressions.
    pub fn with_constants(mut self, constants: &RawDocument) -> Result<Variables, CommandError> {
        for item in constants {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            check_read_name(name)?;
            if BUILTIN.contains(&name) {
                return Err(loc(17275, "Can't redefine a non-user-writable variable"));
            }
            self.user.push((name.to_owned(), Some(value.into())));
        }
        Ok(self)
    }

    /// Defines user variable `name` (already checked) as `value` (`None`: missing), as a stage
    /// that binds variables per document does (`$lookup`'s `let`).
    #[must_use]
    pub fn with_value(mut self, name: &str, value: Option<RawBson>) -> Variables {
        self.user.push((name.to_owned(), value));
        self
    }

    /// The index of the user variable `name` (its latest definition).
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.user.iter().rposition(|(n, _)| n == name)
    }

    /// The value of user variable `i` (`None`: missing).
    pub(super) fn value(&self, i: usize) -> Option<RawBsonRef<'_>> {
        self.user
            .get(i)
            .and_then(|(_, v)| v.as_ref())
            .map(RawBson::as_raw_bson_ref)
    }
}

/// mongod's check on a name a user defines (`let`, `$let`): a lowercase ASCII letter or a
/// non-ASCII character first, then letters, digits, `_` or non-ASCII. `CURRENT` may be rebound.
pub(super) fn check_write_name(name: &str) -> Result<(), CommandError> {
    if name == "CURRENT" {
        return Ok(());
    }
    check_name(name, (16866, 16867, 16868), |c| {
        c.is_ascii_lowercase() || !c.is_ascii()
    })
    .map_err(|(code, msg)| {
        if code == 16867 {
            loc(
                code,
                format!("'{name}' starts with an invalid character for a user variable name"),
            )
        } else {
            loc(code, msg)
        }
    })
}

/// mongod's check on a variable name an expression reads (`$$name`): as for user-defined names,
/// but uppercase first letters (the builtins) are allowed.
pub(super) fn check_read_name(name: &str) -> Result<(), CommandError> {
    check_name(name, (16869, 16870, 16871), |c| {
        c.is_ascii_alphabetic() || !c.is_ascii()
    })
    .map_err(|(code, msg)| loc(code, msg))
}

fn check_name(
    name: &str,
    (empty, bad_first, bad_char): (i32, i32, i32),
    first_ok: impl Fn(char) -> bool,
) -> Result<(), (i32, String)> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err((empty, "empty variable names are not allowed".to_owned()));
    };
    if !first_ok(first) {
        return Err((
            bad_first,
            format!("'{name}' starts with an invalid character for a variable name"),
        ));
    }
    if let Some(c) = chars.find(|&c| !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())) {
        return Err((
            bad_char,
            format!("'{name}' contains an invalid character for a variable name: '{c}'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bson::{RawBson, RawDocumentBuf, rawbson, rawdoc};

    use super::Variables;
    use crate::error::{CommandError, ErrorCode};
    use crate::query::{Expression, Filter, FilterContext, Projection};

    fn at(ms: i64) -> Variables {
        Variables::new(bson::DateTime::from_millis(ms))
    }

    fn value(vars: &Arc<Variables>, expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse_in(expr.as_raw_bson_ref(), vars)?.evaluate(&rawdoc! {"a": 10})
    }

    #[test]
    fn let_values_are_evaluated_once_in_order() -> Result<(), CommandError> {
        let vars = Arc::new(at(5_000).with_let(&rawdoc! {
            "a": 1,
            "b": {"$add": ["$$a", 1]},
            "lit": {"$literal": "$x"},
            "t": "$$NOW",
            "gone": "$$REMOVE",
            "r": {"$rand": {}},
            "o": {"k": ["$$a", "$$b"]},
            "é": "non-ASCII names are allowed",
            "a": "redefined",
        })?);
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            (rawbson!("$$b"), Some(rawbson!(2))),
            (rawbson!("$$lit"), Some(rawbson!("$x"))),
            (
                rawbson!("$$t"),
                Some(RawBson::DateTime(bson::DateTime::from_millis(5_000))),
            ),
            (rawbson!("$$gone"), None),
            (rawbson!({"$type": "$$r"}), Some(rawbson!("double"))),
            (rawbson!("$$o.k"), Some(rawbson!([1, 2]))),
            (
                rawbson!("$$é"),
                Some(rawbson!("non-ASCII names are allowed")),
            ),
            // The later definition wins, and the document is still `$$ROOT`.
            (rawbson!("$$a"), Some(rawbson!("redefined"))),
            (rawbson!({"$add": ["$a", "$$b"]}), Some(rawbson!(12))),
        ];
        for (expr, want) in cases {
            assert_eq!(value(&vars, &expr)?, want, "{expr:?}");
        }
        // `$rand` ran once, when the command started.
        assert_eq!(
            value(&vars, &rawbson!("$$r"))?,
            value(&vars, &rawbson!("$$r"))?
        );
        Ok(())
    }

    #[test]
    fn let_errors() {
        let invalid = |name: &str, code: i32, why: &str| {
            (
                name.to_owned(),
                code,
                format!("Invalid 'let' parameter :: caused by :: {why}"),
            )
        };
        let names = vec![
            invalid("", 16866, "empty variable names are not allowed"),
            invalid(
                "Ab",
                16867,
                "'Ab' starts with an invalid character for a user variable name",
            ),
            invalid(
                "_x",
                16867,
                "'_x' starts with an invalid character for a user variable name",
            ),
            invalid(
                "ROOT",
                16867,
                "'ROOT' starts with an invalid character for a user variable name",
            ),
            invalid(
                "a-b",
                16868,
                "'a-b' contains an invalid character for a variable name: '-'",
            ),
            (
                "NOW".to_owned(),
                4_738_901,
                "Attempt to set internal constant: NOW".to_owned(),
            ),
            (
                "CLUSTER_TIME".to_owned(),
                4_738_901,
                "Attempt to set internal constant: CLUSTER_TIME".to_owned(),
            ),
        ];
        for (name, code, msg) in names {
            let mut spec = RawDocumentBuf::new();
            spec.append(bson::raw::CString::try_from(name.as_str()).unwrap(), 1);
            let err = at(0).with_let(&spec).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg.as_str()),
                "{name:?}"
            );
        }
        let reads_document = "Command let Expression tried to access a field, but this is not \
                              allowed becauseCommand let Expressions run before the query \
                              examines any documents.";
        let values: Vec<(RawDocumentBuf, i32, &str)> = vec![
            (rawdoc! {"x": "$a"}, 4_890_500, reads_document),
            (rawdoc! {"x": "$$ROOT"}, 4_890_500, reads_document),
            (
                rawdoc! {"x": {"$getField": {"field": "a", "input": "$$CURRENT"}}},
                4_890_500,
                reads_document,
            ),
            (rawdoc! {"x": "$$y"}, 17276, "Use of undefined variable: y"),
            // A variable sees only the ones defined before it.
            (
                rawdoc! {"x": "$$y", "y": 1},
                17276,
                "Use of undefined variable: y",
            ),
            (
                rawdoc! {"x": {"$add": ["a"]}},
                16554,
                "$add only supports numeric or date types, not string",
            ),
        ];
        for (spec, code, msg) in values {
            let err = at(0).with_let(&spec).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn read_names_and_constants() -> Result<(), CommandError> {
        let vars = Arc::new(at(0));
        for (expr, code, msg) in [
            ("$$", 16869, "empty variable names are not allowed"),
            (
                "$$_x",
                16870,
                "'_x' starts with an invalid character for a variable name",
            ),
            (
                "$$a-b",
                16871,
                "'a-b' contains an invalid character for a variable name: '-'",
            ),
        ] {
            let err = value(&vars, &RawBson::String(expr.to_owned())).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr}"
            );
        }
        // A statement's constants come after the command's `let` and hide it.
        let vars = at(0)
            .with_let(&rawdoc! {"x": 1, "y": 2})?
            .with_constants(&rawdoc! {"x": {"$literal": "as given"}, "Big": 3})?;
        let vars = Arc::new(vars);
        assert_eq!(
            value(&vars, &rawbson!(["$$x", "$$y", "$$Big"]))?,
            Some(rawbson!([{"$literal": "as given"}, 2, 3]))
        );
        let err = at(0).with_constants(&rawdoc! {"NOW": 1}).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::Location(17275),
                "Can't redefine a non-user-writable variable"
            )
        );
        let err = at(0).with_constants(&rawdoc! {"_c": 1}).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(16870));
        Ok(())
    }

    #[test]
    fn current_can_be_rebound() -> Result<(), CommandError> {
        let vars = Arc::new(at(0).with_let(&rawdoc! {"CURRENT": {"a": 5}})?);
        assert_eq!(value(&vars, &rawbson!("$a"))?, Some(rawbson!(5)));
        assert_eq!(value(&vars, &rawbson!("$$ROOT.a"))?, Some(rawbson!(10)));
        Ok(())
    }

    /// Every expression compiled with one command's variables sees the same `$$NOW`, however
    /// long the command runs.
    #[test]
    fn now_is_one_instant_per_command() -> Result<(), CommandError> {
        let vars = Arc::new(Variables::system_clock().with_let(&rawdoc! {"t": "$$NOW"})?);
        let now = RawBson::DateTime(vars.now());
        let filter = Filter::compile_in(
            &rawdoc! {"$expr": {"$and": [{"$eq": ["$$NOW", "$$t"]}, {"$eq": ["$$NOW", "$when"]}]}},
            FilterContext::Query,
            &vars,
        )?;
        let projection = Projection::compile_in(&rawdoc! {"_id": 0, "now": "$$NOW"}, &vars)?;
        let expr = Expression::parse_in(rawbson!("$$NOW").as_raw_bson_ref(), &vars)?;
        let mut doc = RawDocumentBuf::new();
        doc.append(bson::raw::cstr!("when"), now.clone());
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert!(filter.try_matches(&doc)?);
            let projected = projection.try_apply(&doc)?;
            assert_eq!(
                projected.get("now").ok().flatten(),
                Some(now.as_raw_bson_ref())
            );
            assert_eq!(expr.evaluate(&doc)?, Some(now.clone()));
        }
        Ok(())
    }
}
