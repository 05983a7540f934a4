//! What each command accepts, declared once, as mongod's IDL declares it: the command's own
//! fields with their types, whether unknown fields are refused, and which of the generic
//! arguments (`readConcern`, `writeConcern`, the Stable API parameters…) it takes.
//!
//! [`check`] reads a command document against its declaration in one pass, before the handler
//! runs, and gives mongod's answers uniformly: `IDLUnknownField` (40415) for a field the command
//! does not declare, `TypeMismatch` (14) naming the field's path and the expected types,
//! `IDLDuplicateField` (40413) for a field given twice, `IDLFailedToParse` (40414) for a
//! required field left out. Handlers then read the values they use; a field declared here that
//! Ebb does not implement is refused by its handler with `NotImplemented`, never ignored.

use bson::{RawBsonRef, RawDocument};

use crate::error::{CommandError, CommandResult, ErrorCode};

/// The BSON types a field accepts, as mongod's IDL types name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// Any value (IDL `IDLAnyType`, or a field its handler checks itself).
    Any,
    /// An embedded document (IDL `object`).
    Object,
    /// An array (IDL `array<…>`).
    Array,
    /// A string.
    String,
    /// A boolean only (IDL `bool`).
    Bool,
    /// A boolean or a number (IDL `safeBool`).
    SafeBool,
    /// A boolean, with the message of mongod's `OptionalBool` parser (IDL `optionalBool`).
    OptionalBool,
    /// A number (IDL `safeInt64`, `safeInt`, `exactInt64`…).
    Number,
    /// A document or a string (index hints, `$out` targets).
    ObjectOrString,
}

impl Ty {
    fn accepts(self, value: RawBsonRef<'_>) -> bool {
        use RawBsonRef as B;
        let number = matches!(
            value,
            B::Int32(_) | B::Int64(_) | B::Double(_) | B::Decimal128(_)
        );
        match self {
            Ty::Any => true,
            Ty::Object => matches!(value, B::Document(_)),
            Ty::Array => matches!(value, B::Array(_)),
            Ty::String => matches!(value, B::String(_)),
            Ty::Bool | Ty::OptionalBool => matches!(value, B::Boolean(_)),
            Ty::SafeBool => number || matches!(value, B::Boolean(_)),
            Ty::Number => number,
            Ty::ObjectOrString => matches!(value, B::Document(_) | B::String(_)),
        }
    }

    /// The end of the IDL's message after "expected type", as mongod words it.
    fn expected(self) -> &'static str {
        match self {
            Ty::Any => "",
            Ty::Object => " 'object'",
            Ty::Array => " 'array'",
            Ty::String => " 'string'",
            Ty::Bool | Ty::OptionalBool => " 'bool'",
            Ty::SafeBool => "s '[bool, long, int, decimal, double']",
            Ty::Number => "s '[long, int, decimal, double']",
            Ty::ObjectOrString => "s '[string, object']",
        }
    }
}

/// One declared field.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The field's name in the command document.
    pub name: &'static str,
    /// What it accepts.
    pub ty: Ty,
    /// Whether the command is refused without it (40414).
    pub required: bool,
    /// Whether Ebb implements it: a field it does not is refused with `NotImplemented` (238)
    /// whenever it is given a value other than `false`, never accepted and ignored.
    pub implemented: bool,
}

/// An optional field.
pub const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
        implemented: true,
    }
}

/// A required field.
pub const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
        implemented: true,
    }
}

/// An optional field mongod accepts and Ebb does not implement yet.
pub const fn not_yet(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
        implemented: false,
    }
}

/// A command's own fields.
#[derive(Debug)]
pub struct Args {
    /// The name error paths start with (`find` in `BSON field 'find.skip' …`).
    pub path: &'static str,
    /// Whether fields not declared (and not generic) are refused, as an IDL `strict` struct.
    pub strict: bool,
    /// The fields after the first (the command name and its value, which handlers read).
    pub fields: &'static [Field],
}

impl Args {
    /// A command whose fields mongod does not check (hand-parsed commands such as `ping`).
    pub const LOOSE: Args = Args {
        path: "",
        strict: false,
        fields: &[],
    };
}

/// The generic arguments every command accepts (mongod's `generic_argument.idl`). Their values
/// are read and checked in one place ([`super::generic`]), not by each command.
pub const GENERIC: &[&str] = &[
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$db",
    "maxTimeMS",
    "readConcern",
    "writeConcern",
    "lsid",
    "clientOperationKey",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "stmtId",
    "comment",
    "$readPreference",
    "$clusterTime",
    "$audit",
    "$client",
    "$configServerState",
    "allowImplicitCollectionCreation",
    "$oplogQueryData",
    "$queryOptions",
    "$replData",
    "databaseVersion",
    "shardVersion",
    "tracking_info",
    "coordinator",
    "maxTimeMSOpOnly",
    "$configTime",
    "$topologyTime",
    "txnRetryCounter",
    "mayBypassWriteBlocking",
    "$tenant",
    "expectPrefix",
];

/// Whether `name` is a generic argument.
pub fn is_generic(name: &str) -> bool {
    GENERIC.contains(&name)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// The IDL's error for a field of the wrong type.
pub fn wrong_type(path: &str, value: RawBsonRef<'_>, ty: Ty) -> CommandError {
    if ty == Ty::OptionalBool {
        let name = path.rsplit('.').next().unwrap_or(path);
        return CommandError::type_mismatch(format!(
            "Field '{name}' should be a boolean value, but found: {}",
            super::args::type_name(value.element_type())
        ));
    }
    super::args::wrong_type(path, value, ty.expected())
}

/// Whether a value of a field Ebb does not implement asks for nothing: `false`, or 0 where a
/// number stands for a boolean.
fn asks_nothing(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::Boolean(b) => !b,
        RawBsonRef::Int32(n) => n == 0,
        RawBsonRef::Int64(n) => n == 0,
        RawBsonRef::Double(d) => d == 0.0,
        _ => false,
    }
}

/// Whether mongod's parsers read `value` as if the field were absent: null and undefined in
/// a typed field.
fn reads_as_absent(ty: Ty, value: RawBsonRef<'_>) -> bool {
    ty != Ty::Any && matches!(value, RawBsonRef::Null | RawBsonRef::Undefined)
}

/// `body` without the typed fields whose value is null or undefined, which mongod reads as
/// absent (so `{distinct: "c", key: "k", query: null}` has no filter). Only built when
/// [`check`] says there are some.
pub fn without_nulls(args: &Args, body: &RawDocument) -> CommandResult<bson::RawDocumentBuf> {
    let mut out = bson::RawDocumentBuf::new();
    for (i, elem) in body.iter_elements().enumerate() {
        let elem = elem.map_err(|e| invalid_bson(&e))?;
        let value = elem.value().map_err(|e| invalid_bson(&e))?;
        let key = elem.key();
        if i > 0
            && let Some(field) = args.fields.iter().find(|f| f.name == key.as_str())
            && reads_as_absent(field.ty, value)
        {
            continue;
        }
        out.append(key, value);
    }
    Ok(out)
}

/// Checks `body` (a command document whose first field is the command name) against `args`:
/// every field after the first is generic or declared, of a declared type, at most once, and
/// every required field is there, in the body or as a document sequence named in `sequences`
/// (OP_MSG kind-1 sections stand for array fields). Fields arrive in document order and the
/// first problem is the answer, as in mongod's generated parsers.
///
/// `command` names the error paths of commands whose declaration names none. Returns whether
/// some typed field is null or undefined, which the handler must see as absent
/// ([`without_nulls`]).
pub fn check(
    args: &Args,
    command: &str,
    body: &RawDocument,
    sequences: &[&str],
) -> CommandResult<bool> {
    let path = if args.path.is_empty() {
        command
    } else {
        args.path
    };
    let mut seen: u64 = 0;
    let mut nulls = false;
    let mut iter = body.iter();
    // The command name's own field is the handler's to read.
    if let Some(first) = iter.next() {
        first.map_err(|e| invalid_bson(&e))?;
    }
    for elem in iter {
        let (key, value) = elem.map_err(|e| invalid_bson(&e))?;
        let key = key.as_str();
        let Some(i) = args.fields.iter().position(|f| f.name == key) else {
            if args.strict && !is_generic(key) {
                return Err(CommandError::unknown_field(&format!("{path}.{key}")));
            }
            continue;
        };
        let bit = 1_u64 << (i % 64);
        if seen & bit != 0 {
            return Err(CommandError::new(
                ErrorCode::IDLDuplicateField,
                format!("BSON field '{path}.{key}' is a duplicate field"),
            ));
        }
        let Some(field) = args.fields.get(i).copied() else {
            continue;
        };
        if reads_as_absent(field.ty, value) {
            nulls = true;
            continue;
        }
        seen |= bit;
        if !field.ty.accepts(value) {
            return Err(wrong_type(&format!("{path}.{key}"), value, field.ty));
        }
        if !field.implemented && !asks_nothing(value) {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                format!("{command} option '{key}' is not supported by Ebb yet"),
            ));
        }
    }
    for (i, field) in args.fields.iter().enumerate() {
        if field.required && seen & (1_u64 << (i % 64)) == 0 && !sequences.contains(&field.name) {
            return Err(CommandError::missing_field(&format!(
                "{path}.{}",
                field.name
            )));
        }
    }
    Ok(nulls)
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::{Args, Ty, check, not_yet, opt, req};
    use crate::error::ErrorCode;

    static FIND: Args = Args {
        path: "find",
        strict: true,
        fields: &[
            opt("filter", Ty::Object),
            opt("skip", Ty::Number),
            opt("singleBatch", Ty::SafeBool),
            opt("hint", Ty::ObjectOrString),
            not_yet("tailable", Ty::OptionalBool),
        ],
    };

    static INSERT: Args = Args {
        path: "insert",
        strict: true,
        fields: &[req("documents", Ty::Array), opt("ordered", Ty::Bool)],
    };

    #[test]
    fn declared_and_generic_fields_pass() {
        let body = rawdoc! {
            "find": "c", "filter": {"a": 1}, "skip": 2.0, "singleBatch": 1,
            "hint": "a_1", "lsid": {"id": 1}, "$db": "test", "comment": [1],
        };
        check(&FIND, "find", &body, &[]).unwrap();
    }

    #[test]
    fn unknown_field_is_40415_with_its_path() {
        let err = check(&FIND, "x", &rawdoc! { "find": "c", "query": {} }, &[]).unwrap_err();
        assert_eq!(err.code, ErrorCode::IDLUnknownField);
        assert_eq!(err.errmsg, "BSON field 'find.query' is an unknown field.");
        // Not strict: ignored.
        check(&Args::LOOSE, "x", &rawdoc! { "ping": 1, "query": {} }, &[]).unwrap();
    }

    #[test]
    fn wrong_type_names_the_expected_types() {
        let err = check(&FIND, "x", &rawdoc! { "find": "c", "skip": "2" }, &[]).unwrap_err();
        assert_eq!(err.code, ErrorCode::TypeMismatch);
        assert_eq!(
            err.errmsg,
            "BSON field 'find.skip' is the wrong type 'string', expected types '[long, int, decimal, double']"
        );
        let err = check(&FIND, "x", &rawdoc! { "find": "c", "filter": 1 }, &[]).unwrap_err();
        assert_eq!(
            err.errmsg,
            "BSON field 'find.filter' is the wrong type 'int', expected type 'object'"
        );
    }

    #[test]
    fn fields_not_implemented_are_refused_unless_false() {
        check(
            &FIND,
            "find",
            &rawdoc! { "find": "c", "tailable": false },
            &[],
        )
        .unwrap();
        let err = check(
            &FIND,
            "find",
            &rawdoc! { "find": "c", "tailable": true },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotImplemented);
        assert_eq!(
            err.errmsg,
            "find option 'tailable' is not supported by Ebb yet"
        );
        // The type is checked first.
        let err = check(&FIND, "find", &rawdoc! { "find": "c", "tailable": 1 }, &[]).unwrap_err();
        assert_eq!(err.code, ErrorCode::TypeMismatch);
    }

    #[test]
    fn first_problem_in_document_order_wins() {
        let err = check(
            &FIND,
            "x",
            &rawdoc! { "find": "c", "x": 1, "skip": "a" },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::IDLUnknownField);
        let err = check(
            &FIND,
            "x",
            &rawdoc! { "find": "c", "skip": "a", "x": 1 },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::TypeMismatch);
    }

    #[test]
    fn duplicates_and_required_fields() {
        let err = check(
            &FIND,
            "x",
            &rawdoc! { "find": "c", "skip": 1, "skip": 2 },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::IDLDuplicateField);
        let err = check(
            &INSERT,
            "x",
            &rawdoc! { "insert": "c", "ordered": true },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::IDLFailedToParse);
        assert_eq!(
            err.errmsg,
            "BSON field 'insert.documents' is missing but a required field"
        );
        // Null reads as absent: a required field given as null is missing.
        let err = check(
            &INSERT,
            "insert",
            &rawdoc! { "insert": "c", "documents": null },
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::IDLFailedToParse);
        let body = rawdoc! { "find": "c", "filter": null, "skip": 1 };
        assert!(check(&FIND, "find", &body, &[]).unwrap());
        let stripped = super::without_nulls(&FIND, &body).unwrap();
        assert_eq!(stripped, rawdoc! { "find": "c", "skip": 1 });
        assert!(!check(&FIND, "find", &stripped, &[]).unwrap());
        // A document sequence stands for the field.
        check(&INSERT, "x", &rawdoc! { "insert": "c" }, &["documents"]).unwrap();
    }
}
