//! Aggregation expressions: `Expression::parse_in(value, &variables)?` once, then
//! `expr.evaluate(&doc)?` per document. The one evaluator of the engine: `$expr` filters,
//! computed projections, aggregation stages and pipeline-style updates all use it.
//!
//! An expression is a field path (`"$a.b"`), a variable (`"$$ROOT"`, `"$$CURRENT"`,
//! `"$$REMOVE"`, `"$$NOW"`, `"$$name.a"` for a user variable), a constant, an array or object of
//! expressions, or an operator document `{$op: args}`. Evaluation yields `Some(value)` or `None`
//! for "missing" (a path that reaches nothing).
//!
//! Variables are resolved when an expression is parsed, as in mongod: the command's variables
//! ([`Variables`]: `$$NOW`, fixed once per command, and the command's `let` values) and the
//! names of enclosing `$let`s (and of any operator that binds names) are in scope, anything else
//! is "Use of undefined variable" (17276). A `$let` (or a command `let`) that binds `CURRENT`
//! changes what `"$a"` reads.
//!
//! # Operator families
//!
//! Operators live in one file per family; this file holds only the shared machinery (`Node`,
//! `Scope`, `Env`, `Frame`, the helpers below) and the registration table `FAMILIES`.
//!
//! - `logic`: comparison `$eq $ne $gt $gte $lt $lte $cmp` (the BSON order of [`compare`], where
//!   missing equals undefined and sorts below null, as in mongod's `Value::compare`); boolean
//!   `$and $or $not` (mongod's truthiness).
//! - `arith`: `$add` (numbers and one date) `$subtract` (numbers, dates) `$multiply $divide $mod
//!   $abs`, with int → long → double promotion on overflow; its `Num` serves the other numeric
//!   families.
//! - `accum`: the accumulators as expressions, `$sum $avg $max $min $stdDevPop $stdDevSamp`.
//! - `math`: `$ceil $floor $trunc $round $sqrt $pow $exp $ln $log $log10` and trigonometry.
//! - `cond`: `$cond` (array and `{if, then, else}` forms), `$ifNull`, `$switch`.
//! - `string`: `$concat $toLower $toUpper $strLenCP $substrCP`.
//! - `text`: `$split $trim $ltrim $rtrim $indexOfBytes $indexOfCP $strLenBytes $substrBytes
//!   $substr $strcasecmp $replaceOne $replaceAll $regexFind $regexFindAll $regexMatch`.
//! - `array`: `$in $size $arrayElemAt $first $last $isArray $concatArrays $reverseArray $slice
//!   $range $indexOfArray $arrayToObject $objectToArray $allElementsTrue $anyElementTrue $zip
//!   $sortArray $firstN $lastN $maxN $minN`.
//! - `iterate`: `$map $filter $reduce`, which bind the element (`as:`, `$$this`, `$$value`).
//! - `set`: `$setEquals $setIntersection $setUnion $setDifference $setIsSubset`.
//! - `object`: `$mergeObjects $bsonSize $binarySize`.
//! - `types`: `$type $isNumber $convert $toBool $toDate $toDecimal $toDouble $toInt $toLong
//!   $toObjectId $toString`.
//! - `fields`: `$getField $setField $unsetField`, which read and write field names holding `.`
//!   or starting with `$`.
//! - `misc`: `$let` (scoped variables) and `$rand`.
//! - `date`: the date parts (`$year` … `$isoDayOfWeek`), `$dateToString $dateToParts
//!   $dateFromParts $dateFromString $dateAdd $dateSubtract $dateDiff $dateTrunc`, with IANA time
//!   zones.
//!
//! `$literal` (and its alias `$const`) is a constant, parsed here. Errors carry mongod's codes
//! and messages.
//!
//! ## Adding an operator or a family
//!
//! A family is a file with `pub(super) fn parse_op(name, args, scope) -> Option<Result<Node,
//! CommandError>>`: `None` when `name` (without the `$`) is not one of its operators, else the
//! parsed node. Register it with one line in `FAMILIES` (and its `mod` line). An operator
//! becomes a `Node::Op` holding something that implements `Operator`:
//!
//! - positional arguments (`{$op: [a, b]}` or `{$op: a}`): give the family a `Copy` op enum
//!   implementing `PositionalOp`, parse with `parse_args` (and check the count with
//!   `exactly`), and build the node with `call`; evaluate each argument with `arg` or
//!   `eval`;
//! - named arguments (`{$op: {input:, as:, in:}}`): read the object with `object_fields`,
//!   `parse` each value, and build the node with `Node::op` from a struct implementing
//!   `Operator` (its `args` lists every sub-expression, for dependency analysis);
//! - scoped variables (`$let`, `as:` of `$map`/`$filter`, `$$this`/`$$value` of `$reduce`):
//!   check each name with `variables::check_write_name`, parse the inner expression between
//!   `let base = scope.bind(names)` and `scope.unbind(base)`; when evaluating, build a
//!   `Frame::new(env, base, values)` (the names' values in the same order) and evaluate the
//!   inner expression in `env.with(&frame)`;
//! - work mongod does once at parse time for constant arguments (compiling a constant regex,
//!   with its errors then): match `Node::Const` in `parse_op` and keep the result in the node.
//!
//! Each family file has its own table-driven unit tests (values, and errors with mongod's codes
//! and messages). An operator of `KNOWN` that no family parses answers `NotImplemented`, naming it.
//!
//! Not supported: the other MongoDB operators (`NotImplemented`, named), `$$USER_ROLES`, and
//! server-side JavaScript (`$function`, `$accumulator`: mongod's error for a server without
//! JavaScript). `$$CLUSTER_TIME` is mongod's error for a standalone server (51144). Decimal128
//! arithmetic goes through `f64`, an approximation (comparisons of decimals are exact, see
//! [`compare`]), and
//! `$toLower`/`$toUpper` convert only strings, symbols, numbers and null/missing to strings.

mod accum;
mod arith;
mod array;
mod cond;
mod date;
mod fields;
mod iterate;
mod logic;
mod math;
mod misc;
mod object;
mod set;
mod string;
mod text;
mod types;
mod variables;

use std::cmp::Ordering;
use std::fmt::Debug;
use std::sync::Arc;

use bson::raw::CString;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

pub use self::variables::Variables;

/// A decimal128 holding `d` (computed through `f64`, as Ebb's decimal arithmetic is), written
/// without an exponent when its digits fit: what decimal sums and averages answer.
pub fn decimal_from_f64(d: f64) -> bson::RawBson {
    arith::decimal(d)
}

/// mongod's check on a variable name a stage defines (`$lookup`'s `let`): as `$let`'s.
pub fn check_let_name(name: &str) -> Result<(), CommandError> {
    variables::check_write_name(name)
}
use super::compare::compare;
use super::display::{self, type_name};
use super::{invalid_bson, not_implemented, true_value};
use crate::error::{CommandError, ErrorCode};

/// The operator families: each parses its own operators (`None`: not mine). Adding a family is
/// one line here.
const FAMILIES: &[ParseFn] = &[
    logic::parse_op,
    arith::parse_op,
    math::parse_op,
    cond::parse_op,
    string::parse_op,
    text::parse_op,
    array::parse_op,
    types::parse_op,
    fields::parse_op,
    misc::parse_op,
    iterate::parse_op,
    set::parse_op,
    object::parse_op,
    date::parse_op,
    accum::parse_op,
];

/// A family's parser: the operator name without `$`, its argument, the scope.
type ParseFn = fn(&str, RawBsonRef<'_>, &mut Scope<'_>) -> Option<Result<Node, CommandError>>;

/// A parsed aggregation expression, with the variables of the command it belongs to.
#[derive(Debug, Clone)]
pub struct Expression {
    node: Node,
    vars: Arc<Variables>,
}

/// A parsed expression.
#[derive(Debug, Clone)]
enum Node {
    Const(RawBson),
    /// `$$REMOVE`.
    Missing,
    /// A field path from the document being evaluated (`$$ROOT`, and `$$CURRENT` unless a
    /// `let` rebinds it); empty for the document itself.
    Path(Vec<String>),
    /// A variable, with a field path below it (`$$v.a.b`).
    Var(VarRef, Vec<String>),
    Array(Vec<Node>),
    Object(Vec<(CString, Node)>),
    /// An operator, parsed by its family.
    Op(Arc<dyn Operator>),
}

impl Node {
    /// An operator node.
    fn op(op: impl Operator + 'static) -> Node {
        Node::Op(Arc::new(op))
    }
}

/// A parsed operator: a family's op and its parsed arguments.
trait Operator: Debug + Send + Sync {
    /// Evaluates the operator in `env`.
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError>;
    /// Every sub-expression (for dependency analysis).
    fn args(&self) -> Vec<&Node>;
}

/// A family's op with positional arguments.
trait PositionalOp: Debug + Copy + Send + Sync + 'static {
    /// Evaluates the op on its (unevaluated) arguments.
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError>;
}

/// An operator with positional arguments.
#[derive(Debug)]
struct Call<O> {
    op: O,
    args: Vec<Node>,
}

impl<O: PositionalOp> Operator for Call<O> {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        self.op.eval(&self.args, env)
    }

    fn args(&self) -> Vec<&Node> {
        self.args.iter().collect()
    }
}

/// The node of a positional op.
fn call<O: PositionalOp>(op: O, args: Vec<Node>) -> Node {
    Node::op(Call { op, args })
}

/// What a variable reference names, resolved at parse time (mongod's `Variables::Id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VarRef {
    /// A command variable (`let`, or a pipeline update's `c`): an index into [`Variables`].
    User(usize),
    /// A scoped variable (`$let`, `as:`): its slot.
    Local(usize),
    /// `$$NOW`.
    Now,
    /// A builtin variable a standalone server does not define (`$$CLUSTER_TIME`): mongod's
    /// 51144 when evaluated.
    Unavailable(&'static str),
}

/// The result of evaluating an expression: `None` is "missing".
pub type Value = Option<RawBson>;

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

/// mongod's type name of a value, `missing` for none.
fn tname(v: Option<RawBsonRef<'_>>) -> &'static str {
    v.map_or("missing", |v| type_name(v.element_type()))
}

fn r(v: &Value) -> Option<RawBsonRef<'_>> {
    v.as_ref().map(RawBson::as_raw_bson_ref)
}

fn nullish(v: Option<RawBsonRef<'_>>) -> bool {
    matches!(v, None | Some(RawBsonRef::Null | RawBsonRef::Undefined))
}

/// Every expression operator MongoDB 7.0 defines, for telling "unknown" from "not supported".
const KNOWN: &[&str] = &[
    "abs",
    "acos",
    "acosh",
    "add",
    "allElementsTrue",
    "and",
    "anyElementTrue",
    "arrayElemAt",
    "arrayToObject",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "avg",
    "binarySize",
    "bitAnd",
    "bitNot",
    "bitOr",
    "bitXor",
    "bsonSize",
    "ceil",
    "cmp",
    "concat",
    "concatArrays",
    "cond",
    "convert",
    "cos",
    "cosh",
    "dateAdd",
    "dateDiff",
    "dateFromParts",
    "dateFromString",
    "dateSubtract",
    "dateToParts",
    "dateToString",
    "dateTrunc",
    "dayOfMonth",
    "dayOfWeek",
    "dayOfYear",
    "degreesToRadians",
    "divide",
    "eq",
    "exp",
    "filter",
    "first",
    "firstN",
    "floor",
    "function",
    "getField",
    "gt",
    "gte",
    "hour",
    "ifNull",
    "in",
    "indexOfArray",
    "indexOfBytes",
    "indexOfCP",
    "isArray",
    "isNumber",
    "isoDayOfWeek",
    "isoWeek",
    "isoWeekYear",
    "last",
    "lastN",
    "let",
    "literal",
    "ln",
    "log",
    "log10",
    "lt",
    "lte",
    "ltrim",
    "map",
    "max",
    "maxN",
    "median",
    "mergeObjects",
    "meta",
    "millisecond",
    "min",
    "minN",
    "minute",
    "mod",
    "month",
    "multiply",
    "ne",
    "not",
    "objectToArray",
    "or",
    "percentile",
    "pow",
    "radiansToDegrees",
    "rand",
    "range",
    "reduce",
    "regexFind",
    "regexFindAll",
    "regexMatch",
    "replaceAll",
    "replaceOne",
    "reverseArray",
    "round",
    "rtrim",
    "second",
    "setDifference",
    "setEquals",
    "setField",
    "setIntersection",
    "setIsSubset",
    "setUnion",
    "size",
    "sin",
    "sinh",
    "slice",
    "sortArray",
    "split",
    "sqrt",
    "stdDevPop",
    "stdDevSamp",
    "strLenBytes",
    "strLenCP",
    "strcasecmp",
    "substr",
    "substrBytes",
    "substrCP",
    "subtract",
    "sum",
    "switch",
    "tan",
    "tanh",
    "toBool",
    "toDate",
    "toDecimal",
    "toDouble",
    "toHashedIndexKey",
    "toInt",
    "toLong",
    "toLower",
    "toObjectId",
    "toString",
    "toUpper",
    "trim",
    "trunc",
    "tsIncrement",
    "tsSecond",
    "type",
    "unsetField",
    "week",
    "year",
    "zip",
];

/// Whether `$name` is an aggregation expression operator MongoDB 7.0 knows (`name` without the
/// `$`).
pub fn is_expression_name(name: &str) -> bool {
    KNOWN.contains(&name) || name == "const"
}

impl Expression {
    /// Parses an expression (any BSON value) with no user variables and `$$NOW` at the system
    /// clock's current time. Commands use [`Expression::parse_in`].
    pub fn parse(v: RawBsonRef<'_>) -> Result<Expression, CommandError> {
        Expression::parse_in(v, &Arc::new(Variables::system_clock()))
    }

    /// Parses an expression that sees `vars` (the command's `$$NOW` and `let` variables), with
    /// mongod's errors.
    pub fn parse_in(v: RawBsonRef<'_>, vars: &Arc<Variables>) -> Result<Expression, CommandError> {
        let mut scope = Scope::new(vars);
        Ok(Expression {
            node: parse(v, &mut scope)?,
            vars: Arc::clone(vars),
        })
    }

    /// Evaluates against `doc` (`$$ROOT` and `$$CURRENT`).
    pub fn evaluate(&self, doc: &RawDocument) -> Result<Value, CommandError> {
        eval(
            &self.node,
            Env {
                root: doc,
                vars: &self.vars,
                frame: None,
            },
        )
    }

    /// Evaluates and applies mongod's truthiness (missing, null, undefined, false and zero are
    /// false), as `$expr` does.
    pub fn evaluate_bool(&self, doc: &RawDocument) -> Result<bool, CommandError> {
        Ok(self
            .evaluate(doc)?
            .is_some_and(|v| true_value(v.as_raw_bson_ref())))
    }
}

/// What parsing sees (mongod's `VariablesParseState`): the command's variables and the names
/// the enclosing scoped operators (`$let`, …) bind, innermost last; a name's slot is its index
/// here.
struct Scope<'a> {
    vars: &'a Variables,
    locals: Vec<String>,
}

impl<'a> Scope<'a> {
    fn new(vars: &'a Variables) -> Scope<'a> {
        Scope {
            vars,
            locals: Vec::new(),
        }
    }

    /// A user-defined variable in scope: the innermost `$let` first, then the command's.
    fn lookup(&self, name: &str) -> Option<VarRef> {
        if let Some(slot) = self.locals.iter().rposition(|n| n == name) {
            return Some(VarRef::Local(slot));
        }
        self.vars.find(name).map(VarRef::User)
    }

    /// `"$a.b"`: a path in `$$CURRENT`, which is the document unless a `let` rebinds it.
    fn current(&self, parts: Vec<String>) -> Node {
        match self.lookup("CURRENT") {
            Some(var) => Node::Var(var, parts),
            None => Node::Path(parts),
        }
    }

    /// Puts `names` in scope (for parsing an inner expression) and returns the slot of the
    /// first; [`Scope::unbind`] with it ends their scope. At evaluation a [`Frame`] with this
    /// base gives their values, in the same order.
    fn bind(&mut self, names: impl IntoIterator<Item = String>) -> usize {
        let base = self.locals.len();
        self.locals.extend(names);
        base
    }

    /// Ends the scope [`Scope::bind`] started.
    fn unbind(&mut self, base: usize) {
        self.locals.truncate(base);
    }
}

fn parse(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    match v {
        RawBsonRef::String(s) if s.starts_with("$$") => parse_variable(&s[2..], sc),
        RawBsonRef::String(s) if s.starts_with('$') => Ok(sc.current(parse_field_path(&s[1..])?)),
        RawBsonRef::Array(a) => {
            let mut items = Vec::new();
            for e in a {
                items.push(parse(e.map_err(|e| invalid_bson(&e))?, sc)?);
            }
            Ok(Node::Array(items))
        }
        RawBsonRef::Document(d) => parse_object(d, sc),
        other => Ok(Node::Const(other.into())),
    }
}

/// mongod's `FieldPath::uassertValidFieldName`, for one component.
fn check_field_name(name: &str) -> Result<(), CommandError> {
    if name.is_empty() {
        return Err(loc(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if name.starts_with('$') {
        return Err(loc(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or \
             $setField.",
        ));
    }
    if name.contains('.') {
        return Err(loc(
            16412,
            "FieldPath field names may not contain '.'. Consider using $getField or $setField.",
        ));
    }
    Ok(())
}

/// `"$a.b"` without the `$`: mongod's `FieldPath` rules.
fn parse_field_path(path: &str) -> Result<Vec<String>, CommandError> {
    if path.is_empty() {
        return Err(loc(16872, "'$' by itself is not a valid FieldPath"));
    }
    if path.ends_with('.') {
        return Err(loc(40353, "FieldPath must not end with a '.'."));
    }
    let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
    for p in &parts {
        check_field_name(p)?;
    }
    Ok(parts)
}

/// `"$$name.a.b"` without the `$$`.
fn parse_variable(rest: &str, sc: &Scope<'_>) -> Result<Node, CommandError> {
    let (name, path) = match rest.split_once('.') {
        Some((name, path)) => (name, Some(path)),
        None => (rest, None),
    };
    variables::check_read_name(name)?;
    let resolved = match sc.lookup(name) {
        Some(var) => Some(var),
        None => match name {
            "ROOT" | "CURRENT" | "REMOVE" => None,
            "NOW" => Some(VarRef::Now),
            "CLUSTER_TIME" => Some(VarRef::Unavailable("CLUSTER_TIME")),
            "JS_SCOPE" => Some(VarRef::Unavailable("JS_SCOPE")),
            "IS_MR" => Some(VarRef::Unavailable("IS_MR")),
            // mongod leaves `$$SEARCH_META` missing outside `$search`.
            "SEARCH_META" => return Ok(Node::Missing),
            "USER_ROLES" => return Err(not_implemented("the $USER_ROLES variable")),
            _ => return Err(loc(17276, format!("Use of undefined variable: {name}"))),
        },
    };
    let parts = match path {
        Some("") => {
            return Err(loc(40353, "FieldPath must not end with a '.'."));
        }
        Some(path) => parse_field_path(path)?,
        None => Vec::new(),
    };
    Ok(match (resolved, name) {
        (Some(var), _) => Node::Var(var, parts),
        (None, "REMOVE") => Node::Missing,
        (None, _) => Node::Path(parts),
    })
}

fn parse_object(d: &RawDocument, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let mut items = Vec::new();
    for item in d {
        items.push(item.map_err(|e| invalid_bson(&e))?);
    }
    if let Some((first, v)) = items.first()
        && let Some(op) = first.as_str().strip_prefix('$')
    {
        if items.len() > 1 {
            return Err(loc(
                15983,
                format!(
                    "An object representing an expression must have exactly one field: {}",
                    display::value(RawBsonRef::Document(d))
                ),
            ));
        }
        return parse_operator(op, *v, sc);
    }
    let mut fields: Vec<(CString, Node)> = Vec::new();
    for (k, v) in items {
        check_field_name(k.as_str())?;
        if fields.iter().any(|(seen, _)| seen.as_str() == k.as_str()) {
            return Err(loc(
                16406,
                format!(
                    "duplicate field name specified in object literal: {}",
                    display::value(RawBsonRef::Document(d))
                ),
            ));
        }
        fields.push((CString::from(k), parse(v, sc)?));
    }
    Ok(Node::Object(fields))
}

fn parse_args(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Vec<Node>, CommandError> {
    match v {
        RawBsonRef::Array(a) => {
            let mut out = Vec::new();
            for e in a {
                out.push(parse(e.map_err(|e| invalid_bson(&e))?, sc)?);
            }
            Ok(out)
        }
        other => Ok(vec![parse(other, sc)?]),
    }
}

fn exactly(name: &str, args: &[Node], n: usize) -> Result<(), CommandError> {
    if args.len() == n {
        return Ok(());
    }
    let noun = if n == 1 { "argument" } else { "arguments" };
    Err(loc(
        16020,
        format!(
            "Expression ${name} takes exactly {n} {noun}. {} were passed in.",
            args.len()
        ),
    ))
}

fn parse_operator(name: &str, v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    match name {
        "literal" | "const" => return Ok(Node::Const(v.into())),
        "function" | "accumulator" => {
            return Err(loc(
                31264,
                "Cannot run server-side javascript without the javascript engine enabled",
            ));
        }
        _ => {}
    }
    for family in FAMILIES {
        if let Some(node) = family(name, v, sc) {
            return node;
        }
    }
    if KNOWN.contains(&name) {
        return Err(not_implemented(&format!("the ${name} expression")));
    }
    Err(CommandError::new(
        ErrorCode::InvalidPipelineOperator,
        format!("Unrecognized expression '${name}'"),
    ))
}

/// The fields of an operator's named-argument object, in order.
fn object_fields(d: &RawDocument) -> Result<Vec<(&str, RawBsonRef<'_>)>, CommandError> {
    let mut out = Vec::new();
    for item in d {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        out.push((k.as_str(), v));
    }
    Ok(out)
}

/// Whether evaluating `node` reads the document (a field path, `$$ROOT`, `$$CURRENT`), which
/// a command's `let` may not (mongod's dependency analysis).
fn reads_document(node: &Node) -> bool {
    match node {
        Node::Path(_) => true,
        Node::Const(_) | Node::Missing | Node::Var(..) => false,
        Node::Array(items) => items.iter().any(reads_document),
        Node::Object(fields) => fields.iter().any(|(_, n)| reads_document(n)),
        Node::Op(op) => op.args().into_iter().any(reads_document),
    }
}

// ---- evaluation ----

/// What evaluation sees: the document, the command's variables and the scoped values in scope.
#[derive(Clone, Copy)]
struct Env<'a> {
    root: &'a RawDocument,
    vars: &'a Variables,
    frame: Option<&'a Frame<'a>>,
}

/// The values one scoped operator binds, in slots `base..base + values.len()`.
struct Frame<'a> {
    parent: Option<&'a Frame<'a>>,
    base: usize,
    values: Vec<Value>,
}

impl<'a> Frame<'a> {
    /// The values of the names [`Scope::bind`] put in scope at `base`, inside `env`'s frames.
    fn new(env: Env<'a>, base: usize, values: Vec<Value>) -> Frame<'a> {
        Frame {
            parent: env.frame,
            base,
            values,
        }
    }
}

impl<'a> Env<'a> {
    /// This environment with `frame`'s values in scope as well.
    fn with<'b>(self, frame: &'b Frame<'b>) -> Env<'b>
    where
        'a: 'b,
    {
        Env {
            frame: Some(frame),
            root: self.root,
            vars: self.vars,
        }
    }

    /// A variable's value (`None`: missing).
    fn var(self, var: VarRef) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        match var {
            VarRef::User(i) => Ok(self.vars.value(i)),
            VarRef::Local(slot) => {
                let mut frame = self.frame;
                while let Some(f) = frame {
                    if slot >= f.base {
                        return Ok(f.values.get(slot - f.base).and_then(r));
                    }
                    frame = f.parent;
                }
                Err(CommandError::internal(format!(
                    "$let variable slot {slot} is not bound"
                )))
            }
            VarRef::Now => Ok(Some(RawBsonRef::DateTime(self.vars.now()))),
            VarRef::Unavailable(name) => Err(loc(
                51144,
                format!("Builtin variable '$${name}' is not available"),
            )),
        }
    }
}

/// `$a.b` on `doc`: mongod's `ExpressionFieldPath::evaluatePath` (arrays map over their
/// document elements; numeric components are field names, not indexes).
fn eval_path(doc: &RawDocument, parts: &[String]) -> Value {
    let (first, rest) = parts.split_first()?;
    let v = doc.get(first).ok().flatten()?;
    value_path(v, rest)
}

/// [`eval_path`] from a value: the value itself for an empty path.
fn value_path(v: RawBsonRef<'_>, parts: &[String]) -> Value {
    if parts.is_empty() {
        return Some(v.into());
    }
    match v {
        RawBsonRef::Document(d) => eval_path(d, parts),
        RawBsonRef::Array(a) => Some(RawBson::Array(eval_path_array(a, parts))),
        _ => None,
    }
}

fn eval_path_array(a: &RawArray, rest: &[String]) -> RawArrayBuf {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        if let RawBsonRef::Document(d) = e
            && let Some(v) = eval_path(d, rest)
        {
            out.push(v);
        }
    }
    out
}

fn eval(node: &Node, env: Env<'_>) -> Result<Value, CommandError> {
    match node {
        Node::Const(v) => Ok(Some(v.clone())),
        Node::Missing => Ok(None),
        Node::Path(parts) if parts.is_empty() => Ok(Some(RawBson::Document(env.root.to_owned()))),
        Node::Path(parts) => Ok(eval_path(env.root, parts)),
        Node::Var(var, parts) => Ok(env.var(*var)?.and_then(|v| value_path(v, parts))),
        Node::Array(items) => {
            let mut out = RawArrayBuf::new();
            for item in items {
                out.push(eval(item, env)?.unwrap_or(RawBson::Null));
            }
            Ok(Some(RawBson::Array(out)))
        }
        Node::Object(fields) => {
            let mut out = RawDocumentBuf::new();
            for (k, v) in fields {
                if let Some(v) = eval(v, env)? {
                    out.append(k, v);
                }
            }
            Ok(Some(RawBson::Document(out)))
        }
        Node::Op(op) => op.eval(env),
    }
}

/// Evaluates argument `i` (missing if absent).
fn arg(args: &[Node], i: usize, env: Env<'_>) -> Result<Value, CommandError> {
    args.get(i).map_or(Ok(None), |n| eval(n, env))
}

/// Evaluates every argument, in order.
fn eval_all(args: &[Node], env: Env<'_>) -> Result<Vec<Value>, CommandError> {
    args.iter().map(|a| eval(a, env)).collect()
}

/// Comparison in aggregation: missing sorts (and equals) as undefined.
fn agg_compare(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Ordering {
    compare(
        a.unwrap_or(RawBsonRef::Undefined),
        b.unwrap_or(RawBsonRef::Undefined),
    )
}

#[expect(clippy::unnecessary_wraps, reason = "a present value")]
fn boolean(b: bool) -> Value {
    Some(RawBson::Boolean(b))
}

fn truthy(v: &Value) -> bool {
    r(v).is_some_and(true_value)
}

/// mongod's `Value::coerceToString` for the types Ebb converts.
fn coerce_to_string(v: Option<RawBsonRef<'_>>) -> Result<String, CommandError> {
    Ok(match v {
        None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => String::new(),
        Some(RawBsonRef::String(s) | RawBsonRef::Symbol(s)) => s.to_owned(),
        Some(RawBsonRef::Int32(i)) => i.to_string(),
        Some(RawBsonRef::Int64(i)) => i.to_string(),
        Some(RawBsonRef::Double(d)) => format_g6(d),
        Some(RawBsonRef::Decimal128(d)) => d.to_string(),
        Some(other) => {
            return Err(loc(
                16007,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other.element_type())
                ),
            ));
        }
    })
}

/// A double as C++'s default stream output (`%g` with 6 significant digits).
pub(crate) fn format_g6(d: f64) -> String {
    display::format_g(d, 6)
}

/// A number that is an exact 32-bit integer (mongod's `Value::integral()`).
fn integral_i32(v: RawBsonRef<'_>) -> Option<i32> {
    match v {
        RawBsonRef::Int32(i) => Some(i),
        RawBsonRef::Int64(i) => i32::try_from(i).ok(),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => {
            let d = super::compare::number_as_f64(v)?;
            #[expect(clippy::cast_possible_truncation, reason = "checked to be exact below")]
            let i = d as i32;
            (f64::from(i) == d).then_some(i)
        }
        _ => None,
    }
}

fn is_number(v: Option<RawBsonRef<'_>>) -> bool {
    matches!(
        v,
        Some(
            RawBsonRef::Int32(_)
                | RawBsonRef::Int64(_)
                | RawBsonRef::Double(_)
                | RawBsonRef::Decimal128(_)
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawbson, rawdoc};

    fn eval_on(expr: &RawBson, doc: &RawDocumentBuf) -> Result<Value, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(doc)
    }

    #[test]
    fn evaluation_table() {
        let doc = rawdoc! {
            "a": 5, "b": 2.5, "s": "Hello", "arr": [1, 2, 3],
            "docs": [{"x": 1}, {"x": 2}, 7, {"y": 1}], "n": null,
            "big": i64::MAX, "d": bson::DateTime::from_millis(1000),
        };
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            (rawbson!("$a"), Some(rawbson!(5))),
            (rawbson!("$missing"), None),
            (rawbson!("$docs.x"), Some(rawbson!([1, 2]))),
            (rawbson!("$arr.0"), Some(rawbson!([]))),
            (rawbson!("$$ROOT.a"), Some(rawbson!(5))),
            (rawbson!("$$CURRENT.s"), Some(rawbson!("Hello"))),
            (rawbson!("$$REMOVE"), None),
            (rawbson!({"$literal": "$a"}), Some(rawbson!("$a"))),
            (rawbson!(["$a", "$missing"]), Some(rawbson!([5, null]))),
            (
                rawbson!({"k": "$a", "m": "$missing"}),
                Some(rawbson!({"k": 5})),
            ),
            (rawbson!({"$eq": ["$a", 5.0]}), Some(rawbson!(true))),
            (rawbson!({"$eq": ["$missing", null]}), Some(rawbson!(false))),
            (rawbson!({"$lt": ["$missing", null]}), Some(rawbson!(true))),
            (rawbson!({"$gt": ["$s", 1]}), Some(rawbson!(true))),
            (rawbson!({"$ne": ["$a", 4]}), Some(rawbson!(true))),
            (rawbson!({"$cmp": ["$a", 7]}), Some(rawbson!(-1))),
            (rawbson!({"$and": [1, "$a", true]}), Some(rawbson!(true))),
            (rawbson!({"$and": [1, "$missing"]}), Some(rawbson!(false))),
            (rawbson!({"$and": []}), Some(rawbson!(true))),
            (rawbson!({"$or": [0, null, "$n"]}), Some(rawbson!(false))),
            (rawbson!({"$or": [0, []]}), Some(rawbson!(true))),
            (rawbson!({"$not": [0]}), Some(rawbson!(true))),
            (rawbson!({"$add": [1, 2]}), Some(rawbson!(3))),
            (rawbson!({"$add": [1, 2.5]}), Some(rawbson!(3.5))),
            (
                rawbson!({"$add": [i32::MAX, 1]}),
                Some(RawBson::Int64(2_147_483_648)),
            ),
            #[expect(clippy::cast_precision_loss, reason = "expected promotion")]
            (
                rawbson!({"$add": ["$big", 1]}),
                Some(RawBson::Double(i64::MAX as f64 + 1.0)),
            ),
            (rawbson!({"$add": [1, "$n"]}), Some(RawBson::Null)),
            (rawbson!({"$add": []}), Some(rawbson!(0))),
            (
                rawbson!({"$add": ["$d", 500]}),
                Some(RawBson::DateTime(bson::DateTime::from_millis(1500))),
            ),
            (rawbson!({"$subtract": [10, "$a"]}), Some(rawbson!(5))),
            (
                rawbson!({"$subtract": ["$d", "$d"]}),
                Some(RawBson::Int64(0)),
            ),
            (
                rawbson!({"$subtract": ["$d", 1]}),
                Some(RawBson::DateTime(bson::DateTime::from_millis(999))),
            ),
            (rawbson!({"$multiply": [2, "$b"]}), Some(rawbson!(5.0))),
            (rawbson!({"$multiply": [3, 4]}), Some(rawbson!(12))),
            (rawbson!({"$divide": [5, 2]}), Some(rawbson!(2.5))),
            (rawbson!({"$mod": [7, 3]}), Some(rawbson!(1))),
            (rawbson!({"$mod": [-7, 3]}), Some(rawbson!(-1))),
            (rawbson!({"$mod": [7.5, 2]}), Some(rawbson!(1.5))),
            (rawbson!({"$abs": -3}), Some(rawbson!(3))),
            (
                rawbson!({"$abs": [i32::MIN]}),
                Some(RawBson::Int64(2_147_483_648)),
            ),
            (rawbson!({"$abs": null}), Some(RawBson::Null)),
            (rawbson!({"$cond": [true, 1, 2]}), Some(rawbson!(1))),
            (
                rawbson!({"$cond": {"if": {"$gt": ["$a", 9]}, "then": "big", "else": "small"}}),
                Some(rawbson!("small")),
            ),
            (
                rawbson!({"$ifNull": ["$missing", "$n", "d"]}),
                Some(rawbson!("d")),
            ),
            (rawbson!({"$ifNull": ["$a", "d"]}), Some(rawbson!(5))),
            (rawbson!({"$ifNull": ["$missing", "$missing"]}), None),
            (rawbson!({"$in": [2, "$arr"]}), Some(rawbson!(true))),
            (rawbson!({"$in": [2.0, [1, 3]]}), Some(rawbson!(false))),
            (rawbson!({"$size": "$arr"}), Some(rawbson!(3))),
            (rawbson!({"$size": [[1, 2]]}), Some(rawbson!(2))),
            (rawbson!({"$type": "$a"}), Some(rawbson!("int"))),
            (rawbson!({"$type": "$missing"}), Some(rawbson!("missing"))),
            (rawbson!({"$type": "$arr"}), Some(rawbson!("array"))),
            (
                rawbson!({"$concat": ["$s", " ", "x"]}),
                Some(rawbson!("Hello x")),
            ),
            (
                rawbson!({"$concat": ["$s", "$missing"]}),
                Some(RawBson::Null),
            ),
            (rawbson!({"$toLower": "$s"}), Some(rawbson!("hello"))),
            (rawbson!({"$toUpper": "$s"}), Some(rawbson!("HELLO"))),
            (rawbson!({"$toUpper": "$missing"}), Some(rawbson!(""))),
            (rawbson!({"$toLower": 2.5}), Some(rawbson!("2.5"))),
            (rawbson!({"$strLenCP": "héllo"}), Some(rawbson!(5))),
            (
                rawbson!({"$substrCP": ["héllo", 1, 3]}),
                Some(rawbson!("éll")),
            ),
            (rawbson!({"$substrCP": ["abc", 5, 1]}), Some(rawbson!(""))),
            (rawbson!({"$arrayElemAt": ["$arr", 0]}), Some(rawbson!(1))),
            (rawbson!({"$arrayElemAt": ["$arr", -1]}), Some(rawbson!(3))),
            (rawbson!({"$arrayElemAt": ["$arr", 3]}), None),
            (rawbson!({"$arrayElemAt": ["$arr", -4]}), None),
            (
                rawbson!({"$arrayElemAt": ["$missing", 0]}),
                Some(RawBson::Null),
            ),
        ];
        for (expr, want) in cases {
            let got = eval_on(&expr, &doc).unwrap_or_else(|e| panic!("{expr:?}: {e:?}"));
            assert_eq!(got, want, "{expr:?}");
        }
        let root = eval_on(&rawbson!("$$ROOT"), &doc).unwrap();
        assert_eq!(root, Some(RawBson::Document(doc.clone())));
    }

    #[test]
    fn error_table() {
        let doc = rawdoc! {"s": "x", "a": 1, "arr": [1]};
        let cases: Vec<(RawBson, ErrorCode, &str)> = vec![
            (
                rawbson!("$"),
                ErrorCode::Location(16872),
                "'$' by itself is not a valid FieldPath",
            ),
            (
                rawbson!("$a..b"),
                ErrorCode::Location(15998),
                "FieldPath field names may not be empty strings.",
            ),
            (
                rawbson!("$$foo"),
                ErrorCode::Location(17276),
                "Use of undefined variable: foo",
            ),
            (
                rawbson!({"$foo": 1}),
                ErrorCode::InvalidPipelineOperator,
                "Unrecognized expression '$foo'",
            ),
            (
                rawbson!({"$toHashedIndexKey": 1}),
                ErrorCode::NotImplemented,
                "the $toHashedIndexKey expression is not supported by Ebb yet",
            ),
            (
                rawbson!({"$function": {"body": "x", "args": [], "lang": "js"}}),
                ErrorCode::Location(31264),
                "Cannot run server-side javascript without the javascript engine enabled",
            ),
            (
                rawbson!({"$eq": [1, 2], "$gt": 1}),
                ErrorCode::Location(15983),
                "An object representing an expression must have exactly one field: { $eq: [ 1, 2 ], $gt: 1 }",
            ),
            (
                rawbson!({"$eq": [1]}),
                ErrorCode::Location(16020),
                "Expression $eq takes exactly 2 arguments. 1 were passed in.",
            ),
            (
                rawbson!({"$not": [1, 2]}),
                ErrorCode::Location(16020),
                "Expression $not takes exactly 1 argument. 2 were passed in.",
            ),
            (
                rawbson!({"$add": [1, "$s"]}),
                ErrorCode::Location(16554),
                "$add only supports numeric or date types, not string",
            ),
            (
                rawbson!({"$multiply": [1, "$s"]}),
                ErrorCode::Location(16555),
                "$multiply only supports numeric types, not string",
            ),
            (
                rawbson!({"$subtract": ["$a", "$s"]}),
                ErrorCode::Location(16556),
                "cant $subtract a string from a int",
            ),
            (
                rawbson!({"$divide": ["$a", 0]}),
                ErrorCode::BadValue,
                "can't $divide by zero",
            ),
            (
                rawbson!({"$divide": ["$s", 1]}),
                ErrorCode::TypeMismatch,
                "$divide only supports numeric types, not string and int",
            ),
            (
                rawbson!({"$mod": [1, 0]}),
                ErrorCode::Location(16610),
                "can't $mod by zero",
            ),
            (
                rawbson!({"$abs": "$s"}),
                ErrorCode::Location(28765),
                "$abs only supports numeric types, not string",
            ),
            (
                rawbson!({"$abs": i64::MIN}),
                ErrorCode::Location(28680),
                "can't take $abs of long long min",
            ),
            (
                rawbson!({"$in": [1, "$a"]}),
                ErrorCode::Location(40081),
                "$in requires an array as a second argument, found: int",
            ),
            (
                rawbson!({"$size": "$missing"}),
                ErrorCode::Location(17124),
                "The argument to $size must be an array. Type of argument: missing",
            ),
            (
                rawbson!({"$concat": ["$s", 1]}),
                ErrorCode::Location(16702),
                "$concat only supports strings, not int",
            ),
            (
                rawbson!({"$strLenCP": 1}),
                ErrorCode::Location(34471),
                "$strLenCP requires a string argument, found: int",
            ),
            (
                rawbson!({"$toLower": [[1]]}),
                ErrorCode::Location(16007),
                "can't convert from BSON type array to String",
            ),
            (
                rawbson!({"$cond": {"if": true, "then": 1}}),
                ErrorCode::Location(17082),
                "Missing 'else' parameter to $cond",
            ),
            (
                rawbson!({"$cond": {"if": true, "then": 1, "else": 2, "x": 1}}),
                ErrorCode::Location(17083),
                "Unrecognized parameter to $cond: x",
            ),
            (
                rawbson!({"$ifNull": [1]}),
                ErrorCode::Location(1_257_300),
                "$ifNull needs at least two arguments, had: 1",
            ),
            (
                rawbson!({"$arrayElemAt": ["$s", 0]}),
                ErrorCode::Location(28689),
                "$arrayElemAt's first argument must be an array, but is string",
            ),
            (
                rawbson!({"$arrayElemAt": ["$arr", 0.5]}),
                ErrorCode::Location(28691),
                "$arrayElemAt's second argument must be representable as a 32-bit integer: 0.5",
            ),
            (
                rawbson!({"$substrCP": ["abc", "x", 1]}),
                ErrorCode::Location(34450),
                "$substrCP: starting index must be a numeric type (is BSON type string)",
            ),
            (
                rawbson!({"$substrCP": ["abc", 0, -1]}),
                ErrorCode::Location(34454),
                "$substrCP: length must be a nonnegative integer.",
            ),
            (
                rawbson!({"a.b": 1}),
                ErrorCode::Location(16412),
                "FieldPath field names may not contain '.'. Consider using $getField or $setField.",
            ),
            (
                rawbson!({"a": 1, "a": 2}),
                ErrorCode::Location(16406),
                "duplicate field name specified in object literal: { a: 1, a: 2 }",
            ),
            (
                rawbson!("$a."),
                ErrorCode::Location(40353),
                "FieldPath must not end with a '.'.",
            ),
            (
                rawbson!("$$CLUSTER_TIME"),
                ErrorCode::Location(51144),
                "Builtin variable '$$CLUSTER_TIME' is not available",
            ),
            (
                rawbson!("$$USER_ROLES"),
                ErrorCode::NotImplemented,
                "the $USER_ROLES variable is not supported by Ebb yet",
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval_on(&expr, &doc).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{expr:?}");
        }
    }

    #[test]
    fn let_and_rand_table() -> Result<(), CommandError> {
        let doc = rawdoc! {"a": 5, "sub": {"x": 7}};
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            (
                rawbson!({"$let": {"vars": {"x": 2, "y": "$a"}, "in": {"$multiply": ["$$x", "$$y"]}}}),
                Some(rawbson!(10)),
            ),
            // An inner `$let` shadows; its values see the outer scope.
            (
                rawbson!({"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": {"$add": ["$$x", 1]}}, "in": "$$x"}}}}),
                Some(rawbson!(2)),
            ),
            (
                rawbson!({"$let": {"vars": {"x": 1}, "in": ["$$x", {"$let": {"vars": {"y": 2}, "in": {"$add": ["$$x", "$$y"]}}}, "$$x"]}}),
                Some(rawbson!([1, 3, 1])),
            ),
            (
                rawbson!({"$let": {"vars": {"o": {"p": {"q": 1}}}, "in": "$$o.p.q"}}),
                Some(rawbson!(1)),
            ),
            // Rebinding CURRENT changes what field paths read; `$$ROOT` stays the document.
            (
                rawbson!({"$let": {"vars": {"CURRENT": "$sub"}, "in": ["$x", "$$ROOT.a"]}}),
                Some(rawbson!([7, 5])),
            ),
            (
                rawbson!({"$let": {"vars": {"m": "$$REMOVE"}, "in": "$$m"}}),
                None,
            ),
            (rawbson!({"$type": {"$rand": {}}}), Some(rawbson!("double"))),
            (
                rawbson!({"$and": [{"$gte": [{"$rand": {}}, 0]}, {"$lt": [{"$rand": {}}, 1]}]}),
                Some(rawbson!(true)),
            ),
            (rawbson!({"$const": "$a"}), Some(rawbson!("$a"))),
            (rawbson!("$$SEARCH_META"), None),
        ];
        for (expr, want) in cases {
            assert_eq!(eval_on(&expr, &doc)?, want, "{expr:?}");
        }
        let errors: Vec<(RawBson, i32, &str)> = vec![
            (
                rawbson!({"$let": 1}),
                16874,
                "$let only supports an object as its argument",
            ),
            (
                rawbson!({"$let": {"vars": {}, "in": 1, "z": 1}}),
                16875,
                "Unrecognized parameter to $let: z",
            ),
            (
                rawbson!({"$let": {"in": 1}}),
                16876,
                "Missing 'vars' parameter to $let",
            ),
            (
                rawbson!({"$let": {"vars": {}}}),
                16877,
                "Missing 'in' parameter to $let",
            ),
            (
                rawbson!({"$let": {"vars": 1, "in": 1}}),
                10065,
                "invalid parameter: expected an object (vars)",
            ),
            (
                rawbson!({"$let": {"vars": {"X": 1}, "in": 1}}),
                16867,
                "'X' starts with an invalid character for a user variable name",
            ),
            (
                rawbson!({"$let": {"vars": {"a": 1, "b": "$$a"}, "in": 1}}),
                17276,
                "Use of undefined variable: a",
            ),
            (
                rawbson!([{"$let": {"vars": {"a": 1}, "in": 1}}, "$$a"]),
                17276,
                "Use of undefined variable: a",
            ),
            (
                rawbson!({"$rand": {"a": 1}}),
                3_040_501,
                "$rand does not currently accept arguments",
            ),
            (
                rawbson!({"$rand": 1}),
                10065,
                "invalid parameter: expected an object ($rand)",
            ),
        ];
        for (expr, code, msg) in errors {
            let err = eval_on(&expr, &doc).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn truthiness() {
        let doc = rawdoc! {};
        for (v, want) in [
            (rawbson!(0), false),
            (rawbson!(0.0), false),
            (rawbson!(f64::NAN), true),
            (rawbson!(""), true),
            (rawbson!([]), true),
            (RawBson::Null, false),
            (rawbson!(false), false),
        ] {
            let e = Expression::parse(v.as_raw_bson_ref()).unwrap();
            assert_eq!(e.evaluate_bool(&doc).unwrap(), want, "{v:?}");
        }
        let e = Expression::parse(rawbson!("$missing").as_raw_bson_ref()).unwrap();
        assert!(!e.evaluate_bool(&doc).unwrap());
    }
}
