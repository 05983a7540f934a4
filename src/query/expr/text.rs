//! More string operators: `$split`, `$trim $ltrim $rtrim`, `$indexOfBytes $indexOfCP`,
//! `$strLenBytes`, `$substrBytes` (and its old name `$substr`), `$strcasecmp`, `$replaceOne
//! $replaceAll`, and the regular-expression operators `$regexFind $regexFindAll $regexMatch`
//! (through [`crate::query::regex`], so with its PCRE subset).

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::{
    CommandError, Env, Node, Operator, PositionalOp, Scope, Value, arg, call, coerce_to_string,
    display, eval, exactly, integral_i32, is_number, loc, nullish, object_fields, parse,
    parse_args, r, tname,
};
use crate::error::ErrorCode;
use crate::query::regex::Regex;

/// mongod's `BufferMaxSize`, the most a result buffer may hold (64MB).
const BUFFER_MAX_SIZE: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Split,
    IndexOfBytes,
    IndexOfCp,
    StrLenBytes,
    SubstrBytes,
    Strcasecmp,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "trim" => return Some(parse_trim(Trim::Both, v, sc)),
        "ltrim" => return Some(parse_trim(Trim::Left, v, sc)),
        "rtrim" => return Some(parse_trim(Trim::Right, v, sc)),
        "replaceOne" => return Some(parse_replace(false, v, sc)),
        "replaceAll" => return Some(parse_replace(true, v, sc)),
        "regexFind" => return Some(parse_regex(RegexOp::Find, v, sc)),
        "regexFindAll" => return Some(parse_regex(RegexOp::FindAll, v, sc)),
        "regexMatch" => return Some(parse_regex(RegexOp::Match, v, sc)),
        "split" => Op::Split,
        "indexOfBytes" => Op::IndexOfBytes,
        "indexOfCP" => Op::IndexOfCp,
        "strLenBytes" => Op::StrLenBytes,
        "substrBytes" | "substr" => Op::SubstrBytes,
        "strcasecmp" => Op::Strcasecmp,
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        match op {
            Op::IndexOfBytes | Op::IndexOfCp => {
                if !(2..=4).contains(&args.len()) {
                    return Err(loc(
                        28667,
                        format!(
                            "Expression ${name} takes at least 2 arguments, and at most 4, but {} \
                             were passed in.",
                            args.len()
                        ),
                    ));
                }
            }
            Op::StrLenBytes => exactly(name, &args, 1)?,
            Op::SubstrBytes => exactly(name, &args, 3)?,
            Op::Split | Op::Strcasecmp => exactly(name, &args, 2)?,
        }
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let a = |i: usize| arg(args, i, env);
        match self {
            Op::Split => split(r(&a(0)?), r(&a(1)?)),
            Op::StrLenBytes => {
                let v = a(0)?;
                let Some(RawBsonRef::String(s)) = r(&v) else {
                    return Err(loc(
                        34473,
                        format!(
                            "$strLenBytes requires a string argument, found: {}",
                            tname(r(&v))
                        ),
                    ));
                };
                Ok(Some(RawBson::Int32(
                    i32::try_from(s.len()).unwrap_or(i32::MAX),
                )))
            }
            Op::SubstrBytes => substr_bytes(r(&a(0)?), r(&a(1)?), r(&a(2)?)),
            Op::Strcasecmp => {
                let x = coerce_to_string(r(&a(0)?))?.to_ascii_uppercase();
                let y = coerce_to_string(r(&a(1)?))?.to_ascii_uppercase();
                Ok(Some(RawBson::Int32(match x.cmp(&y) {
                    std::cmp::Ordering::Less => -1,
                    std::cmp::Ordering::Equal => 0,
                    std::cmp::Ordering::Greater => 1,
                })))
            }
            Op::IndexOfBytes | Op::IndexOfCp => index_of(self == Op::IndexOfBytes, args, env),
        }
    }
}

fn split(
    input: Option<RawBsonRef<'_>>,
    sep: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    if nullish(input) || nullish(sep) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::String(s)) = input else {
        return Err(loc(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, \
                 found: {}",
                tname(input)
            ),
        ));
    };
    let Some(RawBsonRef::String(d)) = sep else {
        return Err(loc(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, \
                 found: {}",
                tname(sep)
            ),
        ));
    };
    if d.is_empty() {
        return Err(loc(40087, "$split requires a non-empty separator"));
    }
    let mut out = RawArrayBuf::new();
    for piece in s.split(d) {
        out.push(piece);
    }
    Ok(Some(RawBson::Array(out)))
}

/// mongod's check on the optional start and end of `$indexOfBytes`/`$indexOfCP`.
fn index_bound(v: Option<RawBsonRef<'_>>, op: &str, what: &str) -> Result<usize, CommandError> {
    let shown = v.map_or_else(|| "MISSING".to_owned(), display::value);
    let Some(i) = v.filter(|v| is_number(Some(*v))).and_then(integral_i32) else {
        // mongod's message has no space after the operator name here.
        return Err(loc(
            40096,
            format!(
                "{op}requires an integral {what}, found a value of type: {}, with value: {shown}",
                tname(v)
            ),
        ));
    };
    usize::try_from(i).map_err(|_| {
        loc(
            40097,
            format!("{op} requires a nonnegative {what}, found: {shown}"),
        )
    })
}

fn index_of(bytes: bool, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let (op, codes) = if bytes {
        ("$indexOfBytes", (40091, 40092))
    } else {
        ("$indexOfCP", (40093, 40094))
    };
    let input = arg(args, 0, env)?;
    let input = r(&input);
    if nullish(input) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::String(s)) = input else {
        return Err(loc(
            codes.0,
            format!(
                "{op} requires a string as the first argument, found: {}",
                tname(input)
            ),
        ));
    };
    let token = arg(args, 1, env)?;
    let Some(RawBsonRef::String(token)) = r(&token) else {
        return Err(loc(
            codes.1,
            format!(
                "{op} requires a string as the second argument, found: {}",
                tname(r(&token))
            ),
        ));
    };
    let start = match args.get(2) {
        Some(n) => index_bound(r(&eval(n, env)?), op, "starting index")?,
        None => 0,
    };
    let end = match args.get(3) {
        Some(n) => Some(index_bound(r(&eval(n, env)?), op, "ending index")?),
        None => None,
    };
    let found = if bytes {
        let hay = s.as_bytes();
        let end = end.map_or(hay.len(), |e| e.min(hay.len()));
        if start > hay.len() || end < start {
            None
        } else {
            let window = hay.get(..end).unwrap_or(hay);
            (start..=window.len().saturating_sub(token.len()))
                .find(|&i| window.get(i..i + token.len()) == Some(token.as_bytes()))
                .filter(|&i| i + token.len() <= window.len())
        }
    } else {
        let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        let len = starts.len();
        let end = end.map_or(len, |e| e.min(len));
        if end < start {
            None
        } else if s.is_empty() && token.is_empty() && start == 0 {
            Some(0)
        } else {
            (start..end).find(|&cp| {
                starts.get(cp).is_some_and(|&b| {
                    s.as_bytes()
                        .get(b..)
                        .is_some_and(|t| t.starts_with(token.as_bytes()))
                })
            })
        }
    };
    Ok(Some(RawBson::Int32(
        found.map_or(-1, |i| i32::try_from(i).unwrap_or(i32::MAX)),
    )))
}

/// A number as mongod's `coerceToLong` (doubles truncate).
fn coerce_long(v: Option<RawBsonRef<'_>>) -> i64 {
    match v {
        Some(RawBsonRef::Int32(i)) => i64::from(i),
        Some(RawBsonRef::Int64(i)) => i,
        Some(other) => {
            let d = crate::query::compare::number_as_f64(other).unwrap_or(0.0);
            #[expect(
                clippy::cast_possible_truncation,
                reason = "mongod truncates, saturating"
            )]
            let i = d as i64;
            i
        }
        None => 0,
    }
}

fn substr_bytes(
    s: Option<RawBsonRef<'_>>,
    lower: Option<RawBsonRef<'_>>,
    length: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    let s = coerce_to_string(s)?;
    if !is_number(lower) {
        return Err(loc(
            16034,
            format!(
                "$substrBytes:  starting index must be a numeric type (is BSON type {})",
                tname(lower)
            ),
        ));
    }
    if !is_number(length) {
        return Err(loc(
            16035,
            format!(
                "$substrBytes:  length must be a numeric type (is BSON type {})",
                tname(length)
            ),
        ));
    }
    let lower = coerce_long(lower);
    let Ok(lower) = usize::try_from(lower) else {
        return Err(loc(
            50752,
            format!("$substrBytes:  starting index must be non-negative (got: {lower})"),
        ));
    };
    let length = usize::try_from(coerce_long(length)).unwrap_or(s.len());
    let bytes = s.as_bytes();
    let continuation = |i: usize| bytes.get(i).is_some_and(|b| b & 0xC0 == 0x80);
    if lower < bytes.len() && continuation(lower) {
        return Err(loc(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    let end = lower.saturating_add(length);
    if end < bytes.len() && continuation(end) {
        return Err(loc(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    if lower >= bytes.len() {
        return Ok(Some(RawBson::String(String::new())));
    }
    let end = end.min(bytes.len());
    Ok(Some(RawBson::String(
        s.get(lower..end).unwrap_or_default().to_owned(),
    )))
}

// ---- $trim ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trim {
    Both,
    Left,
    Right,
}

/// `{$trim: {input, chars}}`.
#[derive(Debug)]
struct TrimOp {
    kind: Trim,
    input: Node,
    chars: Option<Node>,
}

/// mongod's default `$trim` set: NUL, the ASCII spaces and the Unicode space separators.
const WHITESPACE: &[char] = &[
    '\0', ' ', '\t', '\n', '\u{0B}', '\u{0C}', '\r', '\u{A0}', '\u{1680}', '\u{2000}', '\u{2001}',
    '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}',
    '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}', '\u{3000}',
];

fn trim_name(kind: Trim) -> &'static str {
    match kind {
        Trim::Both => "$trim",
        Trim::Left => "$ltrim",
        Trim::Right => "$rtrim",
    }
}

fn parse_trim(kind: Trim, v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let name = trim_name(kind);
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            50696,
            format!(
                "{name} only supports an object as an argument, found {}",
                tname(Some(v))
            ),
        ));
    };
    let (mut input, mut chars) = (None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(parse(v, sc)?),
            "chars" => chars = Some(parse(v, sc)?),
            other => {
                return Err(loc(
                    50694,
                    format!("{name} found an unknown argument: {other}"),
                ));
            }
        }
    }
    let input = input.ok_or_else(|| loc(50695, format!("{name} requires an 'input' field")))?;
    Ok(Node::op(TrimOp { kind, input, chars }))
}

impl Operator for TrimOp {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let name = trim_name(self.kind);
        let input = eval(&self.input, env)?;
        let input = r(&input);
        if nullish(input) {
            return Ok(Some(RawBson::Null));
        }
        let Some(RawBsonRef::String(s)) = input else {
            return Err(loc(
                50699,
                format!(
                    "{name} requires its input to be a string, got {} (of type {}) instead.",
                    input.map_or_else(String::new, display::value),
                    tname(input)
                ),
            ));
        };
        let custom: Option<Vec<char>> = match &self.chars {
            None => None,
            Some(n) => {
                let c = eval(n, env)?;
                let c = r(&c);
                if nullish(c) {
                    return Ok(Some(RawBson::Null));
                }
                let Some(RawBsonRef::String(c)) = c else {
                    return Err(loc(
                        50700,
                        format!(
                            "{name} requires 'chars' to be a string, got {} (of type {}) instead.",
                            c.map_or_else(String::new, display::value),
                            tname(c)
                        ),
                    ));
                };
                Some(c.chars().collect())
            }
        };
        let set: &[char] = custom.as_deref().unwrap_or(WHITESPACE);
        let out = match self.kind {
            Trim::Both => s.trim_matches(set),
            Trim::Left => s.trim_start_matches(set),
            Trim::Right => s.trim_end_matches(set),
        };
        Ok(Some(RawBson::String(out.to_owned())))
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = vec![&self.input];
        out.extend(&self.chars);
        out
    }
}

// ---- $replaceOne, $replaceAll ----

#[derive(Debug)]
struct Replace {
    all: bool,
    input: Node,
    find: Node,
    replacement: Node,
}

fn replace_name(all: bool) -> &'static str {
    if all { "$replaceAll" } else { "$replaceOne" }
}

fn parse_replace(all: bool, v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let name = replace_name(all);
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            51751,
            format!(
                "{name} requires an object as an argument, found: {}",
                tname(Some(v))
            ),
        ));
    };
    let (mut input, mut find, mut replacement) = (None, None, None);
    for (k, v) in object_fields(d)? {
        let slot = match k {
            "input" => &mut input,
            "find" => &mut find,
            "replacement" => &mut replacement,
            other => {
                return Err(loc(
                    51750,
                    format!("{name} found an unknown argument: {other}"),
                ));
            }
        };
        *slot = Some(parse(v, sc)?);
    }
    let input =
        input.ok_or_else(|| loc(51749, format!("{name} requires 'input' to be specified")))?;
    let find = find.ok_or_else(|| loc(51748, format!("{name} requires 'find' to be specified")))?;
    let replacement = replacement.ok_or_else(|| {
        loc(
            51747,
            format!("{name} requires 'replacement' to be specified"),
        )
    })?;
    Ok(Node::op(Replace {
        all,
        input,
        find,
        replacement,
    }))
}

impl Operator for Replace {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let name = replace_name(self.all);
        let input = eval(&self.input, env)?;
        let find = eval(&self.find, env)?;
        let replacement = eval(&self.replacement, env)?;
        let mut strings = Vec::with_capacity(3);
        for (v, what, code) in [
            (&input, "input", 51746),
            (&find, "find", 51745),
            (&replacement, "replacement", 51744),
        ] {
            match r(v) {
                Some(RawBsonRef::String(s)) => strings.push(Some(s)),
                v if nullish(v) => strings.push(None),
                Some(other) => {
                    return Err(loc(
                        code,
                        format!(
                            "{name} requires that '{what}' be a string, found: {}",
                            display::value(other)
                        ),
                    ));
                }
                None => strings.push(None),
            }
        }
        let (Some(Some(s)), Some(Some(f)), Some(Some(t))) =
            (strings.first(), strings.get(1), strings.get(2))
        else {
            return Ok(Some(RawBson::Null));
        };
        if self.all {
            // mongod builds the result in a buffer that may not pass 64MB.
            let count = if f.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(*f).count()
            };
            let size = s.len().saturating_add(count.saturating_mul(t.len()));
            if size > BUFFER_MAX_SIZE {
                return Err(loc(
                    13548,
                    format!("BufBuilder attempted to grow() to {size} bytes, past the 64MB limit."),
                ));
            }
        }
        Ok(Some(RawBson::String(if self.all {
            s.replace(f, t)
        } else {
            s.replacen(f, t, 1)
        })))
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.input, &self.find, &self.replacement]
    }
}

// ---- $regexFind, $regexFindAll, $regexMatch ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegexOp {
    Find,
    FindAll,
    Match,
}

fn regex_name(op: RegexOp) -> &'static str {
    match op {
        RegexOp::Find => "$regexFind",
        RegexOp::FindAll => "$regexFindAll",
        RegexOp::Match => "$regexMatch",
    }
}

/// A regex compiled when parsing.
#[derive(Debug)]
enum Compiled {
    /// `regex` or `options` is not a constant: compiled for each evaluation.
    No,
    /// A constant null regex.
    Null,
    Yes(Regex),
}

#[derive(Debug)]
struct RegexExpr {
    op: RegexOp,
    input: Node,
    regex: Node,
    options: Option<Node>,
    /// The regex, compiled once when `regex` and `options` are constants.
    constant: Compiled,
}

fn parse_regex(op: RegexOp, v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let name = regex_name(op);
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            51103,
            format!(
                "{name} expects an object of named arguments but found: {}",
                tname(Some(v))
            ),
        ));
    };
    let (mut input, mut regex, mut options) = (None, None, None);
    for (k, v) in object_fields(d)? {
        let slot = match k {
            "input" => &mut input,
            "regex" => &mut regex,
            "options" => &mut options,
            other => {
                return Err(loc(
                    31024,
                    format!("{name} found an unknown argument: {other}"),
                ));
            }
        };
        *slot = Some(parse(v, sc)?);
    }
    let input = input.ok_or_else(|| loc(31022, format!("{name} requires 'input' parameter")))?;
    let regex = regex.ok_or_else(|| loc(31023, format!("{name} requires 'regex' parameter")))?;
    // mongod compiles a constant regex once, when parsing, so its errors come first.
    let constant = match (&regex, &options) {
        (Node::Const(re), None) => compile(name, Some(re.as_raw_bson_ref()), None)?,
        (Node::Const(re), Some(Node::Const(o))) => {
            compile(name, Some(re.as_raw_bson_ref()), Some(o.as_raw_bson_ref()))?
        }
        _ => None,
    }
    .map_or_else(
        || {
            if matches!(regex, Node::Const(_))
                && options.as_ref().is_none_or(|o| matches!(o, Node::Const(_)))
            {
                Compiled::Null
            } else {
                Compiled::No
            }
        },
        Compiled::Yes,
    );
    Ok(Node::op(RegexExpr {
        op,
        input,
        regex,
        options,
        constant,
    }))
}

/// mongod's checks on `regex` and `options`, then the compiled regex (`None` for a null one).
fn compile(
    name: &str,
    regex: Option<RawBsonRef<'_>>,
    options: Option<RawBsonRef<'_>>,
) -> Result<Option<Regex>, CommandError> {
    let (pattern, flags) = match regex {
        Some(RawBsonRef::String(p)) => (Some(p), None),
        Some(RawBsonRef::RegularExpression(re)) => {
            (Some(re.pattern.as_str()), Some(re.options.as_str()))
        }
        v if nullish(v) => (None, None),
        _ => {
            return Err(loc(
                51105,
                format!("{name} needs 'regex' to be of type string or regex"),
            ));
        }
    };
    let options = match options {
        Some(RawBsonRef::String(o)) => Some(o),
        v if nullish(v) => None,
        _ => {
            return Err(loc(
                51106,
                format!("{name} needs 'options' to be of type string"),
            ));
        }
    };
    if flags.is_some_and(|f| !f.is_empty()) && options.is_some() {
        return Err(loc(
            51107,
            format!("{name}: found regex option(s) specified in both 'regex' and 'option' fields"),
        ));
    }
    let options = options.or(flags).unwrap_or("");
    if pattern.is_some_and(|p| p.contains('\0')) {
        return Err(loc(
            51109,
            format!("{name}: regular expression cannot contain an embedded null byte"),
        ));
    }
    if options.contains('\0') {
        return Err(loc(
            51110,
            format!("{name}: regular expression options cannot contain an embedded null byte"),
        ));
    }
    let Some(pattern) = pattern else {
        return Ok(None);
    };
    Regex::compile(pattern, options).map(Some).map_err(|e| {
        if e.code == ErrorCode::Location(51108) {
            // Query `$regex` leaves the operator name out of this message.
            loc(51108, format!("{name}{}", e.errmsg))
        } else {
            let detail = e
                .errmsg
                .strip_prefix("Regular expression is invalid: ")
                .unwrap_or(&e.errmsg)
                .to_owned();
            loc(51111, format!("Invalid Regex in {name}: {detail}"))
        }
    })
}

/// `{match, idx, captures}` for the match at or after byte `from`, with `idx` in code points.
fn find_at(re: &Regex, s: &str, from: usize) -> Option<(RawDocumentBuf, usize, usize)> {
    let caps = re.engine().captures_at(s, from)?;
    let whole = caps.get(0)?;
    let mut captures = RawArrayBuf::new();
    for group in caps.iter().skip(1) {
        match group {
            Some(m) => captures.push(m.as_str()),
            None => captures.push(RawBson::Null),
        }
    }
    let idx = s.get(..whole.start()).map_or(0, |p| p.chars().count());
    let mut doc = RawDocumentBuf::new();
    doc.append(cstr!("match"), whole.as_str());
    doc.append(cstr!("idx"), i32::try_from(idx).unwrap_or(i32::MAX));
    doc.append(cstr!("captures"), captures);
    Some((doc, whole.start(), whole.end()))
}

impl Operator for RegexExpr {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let name = regex_name(self.op);
        let input = eval(&self.input, env)?;
        let compiled;
        let re = if let Compiled::No = self.constant {
            let regex = eval(&self.regex, env)?;
            let options = match &self.options {
                Some(o) => eval(o, env)?,
                None => None,
            };
            compiled = compile(name, r(&regex), r(&options))?;
            compiled.as_ref()
        } else if let Compiled::Yes(re) = &self.constant {
            Some(re)
        } else {
            None
        };
        let input = match r(&input) {
            Some(RawBsonRef::String(s)) => Some(s),
            v if nullish(v) => None,
            _ => {
                return Err(loc(
                    51104,
                    format!("{name} needs 'input' to be of type string"),
                ));
            }
        };
        let (Some(re), Some(s)) = (re, input) else {
            return Ok(Some(match self.op {
                RegexOp::Find => RawBson::Null,
                RegexOp::FindAll => RawBson::Array(RawArrayBuf::new()),
                RegexOp::Match => RawBson::Boolean(false),
            }));
        };
        Ok(Some(match self.op {
            RegexOp::Match => RawBson::Boolean(re.engine().is_match(s)),
            RegexOp::Find => {
                find_at(re, s, 0).map_or(RawBson::Null, |(d, ..)| RawBson::Document(d))
            }
            RegexOp::FindAll => {
                let mut out = RawArrayBuf::new();
                let mut from = 0;
                let mut size = 0_usize;
                while let Some((doc, start, end)) = find_at(re, s, from) {
                    size = size.saturating_add(doc.as_bytes().len());
                    if size > BUFFER_MAX_SIZE {
                        return Err(loc(
                            51151,
                            format!(
                                "{name}: the size of buffer to store output exceeded the 64MB \
                                 limit"
                            ),
                        ));
                    }
                    out.push(doc);
                    // An empty match moves on by one code point; others continue after it.
                    from = if end == start {
                        end + s
                            .get(end..)
                            .and_then(|t| t.chars().next())
                            .map_or(1, char::len_utf8)
                    } else {
                        end
                    };
                    if from >= s.len() {
                        break;
                    }
                }
                RawBson::Array(out)
            }
        }))
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = vec![&self.input, &self.regex];
        out.extend(&self.options);
        out
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, rawbson, rawdoc};

    use crate::error::{CommandError, ErrorCode};
    use crate::query::Expression;

    fn eval(expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(&rawdoc! {"s": "a-b-c", "n": null})
    }

    use crate::query::testutil::regex as re;

    #[test]
    fn values_table() -> Result<(), CommandError> {
        let cases: Vec<(RawBson, RawBson)> = vec![
            (
                rawbson!({"$split": ["June-15-2013", "-"]}),
                rawbson!(["June", "15", "2013"]),
            ),
            (
                rawbson!({"$split": ["a,,b", ","]}),
                rawbson!(["a", "", "b"]),
            ),
            (rawbson!({"$split": ["abc", "x"]}), rawbson!(["abc"])),
            (rawbson!({"$split": ["$n", "-"]}), RawBson::Null),
            (rawbson!({"$split": ["$s", "$missing"]}), RawBson::Null),
            (
                rawbson!({"$trim": {"input": "  \n good  bye \t  "}}),
                rawbson!("good  bye"),
            ),
            (
                rawbson!({"$trim": {"input": "\u{a0}\u{3000}x\0"}}),
                rawbson!("x"),
            ),
            (
                rawbson!({"$trim": {"input": "ggggoodbyeeeee", "chars": "ge"}}),
                rawbson!("oodby"),
            ),
            (
                rawbson!({"$trim": {"input": "éaé", "chars": "é"}}),
                rawbson!("a"),
            ),
            (rawbson!({"$ltrim": {"input": "  x  "}}), rawbson!("x  ")),
            (rawbson!({"$rtrim": {"input": "  x  "}}), rawbson!("  x")),
            (rawbson!({"$trim": {"input": "$n"}}), RawBson::Null),
            (
                rawbson!({"$trim": {"input": "x", "chars": null}}),
                RawBson::Null,
            ),
            (rawbson!({"$indexOfBytes": ["cafeteria", "e"]}), rawbson!(3)),
            (rawbson!({"$indexOfBytes": ["cafétéria", "é"]}), rawbson!(3)),
            (
                rawbson!({"$indexOfBytes": ["cafétéria", "e"]}),
                rawbson!(-1),
            ),
            (rawbson!({"$indexOfBytes": ["cafétéria", "t"]}), rawbson!(5)),
            (
                rawbson!({"$indexOfBytes": ["foo.bar.fi", ".", 5]}),
                rawbson!(7),
            ),
            (
                rawbson!({"$indexOfBytes": ["vanilla", "ll", 0, 2]}),
                rawbson!(-1),
            ),
            (
                rawbson!({"$indexOfBytes": ["vanilla", "ll", 12]}),
                rawbson!(-1),
            ),
            (
                rawbson!({"$indexOfBytes": ["vanilla", "ll", 5, 2]}),
                rawbson!(-1),
            ),
            (
                rawbson!({"$indexOfBytes": ["vanilla", "nilla", 3]}),
                rawbson!(-1),
            ),
            (rawbson!({"$indexOfBytes": ["abc", "", 3]}), rawbson!(3)),
            (rawbson!({"$indexOfBytes": ["$n", "foo"]}), RawBson::Null),
            (rawbson!({"$indexOfCP": ["cafétéria", "é"]}), rawbson!(3)),
            (rawbson!({"$indexOfCP": ["cafétéria", "t"]}), rawbson!(4)),
            (
                rawbson!({"$indexOfCP": ["foo.bar.fi", ".", 5]}),
                rawbson!(7),
            ),
            (rawbson!({"$indexOfCP": ["abc", "", 3]}), rawbson!(-1)),
            (rawbson!({"$indexOfCP": ["", ""]}), rawbson!(0)),
            (rawbson!({"$indexOfCP": ["ééé", "é", 1, 2]}), rawbson!(1)),
            (rawbson!({"$strLenBytes": "cafétéria"}), rawbson!(11)),
            (rawbson!({"$substrBytes": ["abcde", 1, 2]}), rawbson!("bc")),
            (rawbson!({"$substrBytes": ["abcde", 3, -1]}), rawbson!("de")),
            (rawbson!({"$substrBytes": ["abc", 10, 1]}), rawbson!("")),
            (rawbson!({"$substrBytes": ["éa", 2, 1]}), rawbson!("a")),
            (rawbson!({"$substr": ["abcde", 0, 2]}), rawbson!("ab")),
            (rawbson!({"$substr": ["$n", 0, 2]}), rawbson!("")),
            (rawbson!({"$substr": [5, 0, 1]}), rawbson!("5")),
            (rawbson!({"$strcasecmp": ["Hello", "hello"]}), rawbson!(0)),
            (rawbson!({"$strcasecmp": ["a", "B"]}), rawbson!(-1)),
            (rawbson!({"$strcasecmp": ["b", "A"]}), rawbson!(1)),
            (rawbson!({"$strcasecmp": ["$n", ""]}), rawbson!(0)),
            (
                rawbson!({"$replaceOne": {"input": "blue paint", "find": "blue", "replacement": "red"}}),
                rawbson!("red paint"),
            ),
            (
                rawbson!({"$replaceOne": {"input": "$s", "find": "-", "replacement": "+"}}),
                rawbson!("a+b-c"),
            ),
            (
                rawbson!({"$replaceAll": {"input": "$s", "find": "-", "replacement": "+"}}),
                rawbson!("a+b+c"),
            ),
            (
                rawbson!({"$replaceAll": {"input": "$n", "find": "-", "replacement": "+"}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$replaceAll": {"input": "x", "find": "$missing", "replacement": "+"}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$regexFind": {"input": "abc123def", "regex": "([a-z]+)(\\d+)"}}),
                rawbson!({"match": "abc123", "idx": 0, "captures": ["abc", "123"]}),
            ),
            (
                rawbson!({"$regexFind": {"input": "café x", "regex": "x"}}),
                rawbson!({"match": "x", "idx": 5, "captures": []}),
            ),
            (
                rawbson!({"$regexFind": {"input": "b", "regex": "(a)?b"}}),
                rawbson!({"match": "b", "idx": 0, "captures": [null]}),
            ),
            (
                rawbson!({"$regexFind": {"input": "ABC", "regex": "b", "options": "i"}}),
                rawbson!({"match": "B", "idx": 1, "captures": []}),
            ),
            (
                rawbson!({"$regexFind": {"input": "xyz", "regex": "a"}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$regexFind": {"input": "$n", "regex": "a"}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$regexFindAll": {"input": "a1b2", "regex": "\\d"}}),
                rawbson!([
                    {"match": "1", "idx": 1, "captures": []},
                    {"match": "2", "idx": 3, "captures": []},
                ]),
            ),
            (
                rawbson!({"$regexFindAll": {"input": "ab", "regex": ""}}),
                rawbson!([
                    {"match": "", "idx": 0, "captures": []},
                    {"match": "", "idx": 1, "captures": []},
                ]),
            ),
            (
                rawbson!({"$regexFindAll": {"input": "", "regex": "x*"}}),
                rawbson!([{"match": "", "idx": 0, "captures": []}]),
            ),
            (
                rawbson!({"$regexFindAll": {"input": "aaa", "regex": "^a"}}),
                rawbson!([{"match": "a", "idx": 0, "captures": []}]),
            ),
            (
                rawbson!({"$regexFindAll": {"input": "x", "regex": "$n"}}),
                rawbson!([]),
            ),
            (
                rawbson!({"$regexMatch": {"input": "Hello", "regex": "^h", "options": "i"}}),
                rawbson!(true),
            ),
            (
                rawbson!({"$regexMatch": {"input": "Hello", "regex": re("^h", "i")}}),
                rawbson!(true),
            ),
            (
                rawbson!({"$regexMatch": {"input": "Hello", "regex": "^h"}}),
                rawbson!(false),
            ),
            (
                rawbson!({"$regexMatch": {"input": "$missing", "regex": "^h"}}),
                rawbson!(false),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr)?, Some(want), "{expr:?}");
        }
        Ok(())
    }

    #[test]
    fn errors_table() {
        let cases: Vec<(RawBson, i32, &str)> = vec![
            (
                rawbson!({"$split": [1, "-"]}),
                40085,
                "$split requires an expression that evaluates to a string as a first argument, \
                 found: int",
            ),
            (
                rawbson!({"$split": ["a", 1]}),
                40086,
                "$split requires an expression that evaluates to a string as a second argument, \
                 found: int",
            ),
            (
                rawbson!({"$split": ["a", ""]}),
                40087,
                "$split requires a non-empty separator",
            ),
            (
                rawbson!({"$trim": "x"}),
                50696,
                "$trim only supports an object as an argument, found string",
            ),
            (
                rawbson!({"$ltrim": {"input": "a", "x": 1}}),
                50694,
                "$ltrim found an unknown argument: x",
            ),
            (
                rawbson!({"$rtrim": {}}),
                50695,
                "$rtrim requires an 'input' field",
            ),
            (
                rawbson!({"$trim": {"input": 1}}),
                50699,
                "$trim requires its input to be a string, got 1 (of type int) instead.",
            ),
            (
                rawbson!({"$trim": {"input": "a", "chars": 1}}),
                50700,
                "$trim requires 'chars' to be a string, got 1 (of type int) instead.",
            ),
            (
                rawbson!({"$indexOfCP": [1, "a"]}),
                40093,
                "$indexOfCP requires a string as the first argument, found: int",
            ),
            (
                rawbson!({"$indexOfBytes": ["a", 1]}),
                40092,
                "$indexOfBytes requires a string as the second argument, found: int",
            ),
            (
                rawbson!({"$indexOfCP": ["a", "a", 1.5]}),
                40096,
                "$indexOfCPrequires an integral starting index, found a value of type: double, \
                 with value: 1.5",
            ),
            (
                rawbson!({"$indexOfBytes": ["vanilla", "ll", -1]}),
                40097,
                "$indexOfBytes requires a nonnegative starting index, found: -1",
            ),
            (
                rawbson!({"$indexOfBytes": ["a"]}),
                28667,
                "Expression $indexOfBytes takes at least 2 arguments, and at most 4, but 1 were \
                 passed in.",
            ),
            (
                rawbson!({"$strLenBytes": 1}),
                34473,
                "$strLenBytes requires a string argument, found: int",
            ),
            (
                rawbson!({"$substrBytes": ["abc", "a", 1]}),
                16034,
                "$substrBytes:  starting index must be a numeric type (is BSON type string)",
            ),
            (
                rawbson!({"$substr": ["abc", 0, "a"]}),
                16035,
                "$substrBytes:  length must be a numeric type (is BSON type string)",
            ),
            (
                rawbson!({"$substrBytes": ["abc", -1, 1]}),
                50752,
                "$substrBytes:  starting index must be non-negative (got: -1)",
            ),
            (
                rawbson!({"$substrBytes": ["éa", 1, 1]}),
                28656,
                "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
            ),
            (
                rawbson!({"$substrBytes": ["éa", 0, 1]}),
                28657,
                "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 \
                 character.",
            ),
            (
                rawbson!({"$replaceOne": 1}),
                51751,
                "$replaceOne requires an object as an argument, found: int",
            ),
            (
                rawbson!({"$replaceAll": {"input": "a", "find": "a", "replacement": "b", "x": 1}}),
                51750,
                "$replaceAll found an unknown argument: x",
            ),
            (
                rawbson!({"$replaceAll": {"find": "a", "replacement": "b"}}),
                51749,
                "$replaceAll requires 'input' to be specified",
            ),
            (
                rawbson!({"$replaceOne": {"input": "a", "replacement": "b"}}),
                51748,
                "$replaceOne requires 'find' to be specified",
            ),
            (
                rawbson!({"$replaceOne": {"input": "a", "find": "a"}}),
                51747,
                "$replaceOne requires 'replacement' to be specified",
            ),
            (
                rawbson!({"$replaceAll": {"input": 1, "find": "a", "replacement": "b"}}),
                51746,
                "$replaceAll requires that 'input' be a string, found: 1",
            ),
            (
                rawbson!({"$replaceAll": {"input": "a", "find": 1, "replacement": "b"}}),
                51745,
                "$replaceAll requires that 'find' be a string, found: 1",
            ),
            (
                rawbson!({"$replaceAll": {"input": "a", "find": "a", "replacement": 2}}),
                51744,
                "$replaceAll requires that 'replacement' be a string, found: 2",
            ),
            (
                rawbson!({"$regexFind": "a"}),
                51103,
                "$regexFind expects an object of named arguments but found: string",
            ),
            (
                rawbson!({"$regexFind": {"regex": "a"}}),
                31022,
                "$regexFind requires 'input' parameter",
            ),
            (
                rawbson!({"$regexFindAll": {"input": "a"}}),
                31023,
                "$regexFindAll requires 'regex' parameter",
            ),
            (
                rawbson!({"$regexMatch": {"input": "a", "regex": "a", "x": 1}}),
                31024,
                "$regexMatch found an unknown argument: x",
            ),
            (
                rawbson!({"$regexMatch": {"input": 1, "regex": "a"}}),
                51104,
                "$regexMatch needs 'input' to be of type string",
            ),
            (
                rawbson!({"$regexMatch": {"input": "a", "regex": 1}}),
                51105,
                "$regexMatch needs 'regex' to be of type string or regex",
            ),
            (
                rawbson!({"$regexFind": {"input": "a", "regex": "a", "options": 1}}),
                51106,
                "$regexFind needs 'options' to be of type string",
            ),
            (
                rawbson!({"$regexFind": {"input": "a", "regex": re("a", "i"), "options": "m"}}),
                51107,
                "$regexFind: found regex option(s) specified in both 'regex' and 'option' fields",
            ),
            (
                rawbson!({"$regexFind": {"input": "a", "regex": "a", "options": "z"}}),
                51108,
                "$regexFind invalid flag in regex options: z",
            ),
            (
                rawbson!({"$regexFind": {"input": "a", "regex": "a\u{0}"}}),
                51109,
                "$regexFind: regular expression cannot contain an embedded null byte",
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval(&expr).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr:?}"
            );
        }
        // Results past mongod's 64MB buffer are refused, not built.
        let big = "x".repeat(1 << 20);
        let res = eval(
            &rawbson!({"$replaceAll": {"input": big.as_str(), "find": "", "replacement": big.as_str()}}),
        );
        assert!(
            matches!(&res, Err(e) if e.code == ErrorCode::Location(13548)),
            "$replaceAll past 64MB was not refused"
        );
        // 1024 matches of 1024 bytes, each captured by 70 nested groups: over 64MB of output.
        let pattern = format!("{}x{{1024}}{}", "(".repeat(70), ")".repeat(70));
        let res = eval(&rawbson!({"$regexFindAll": {"input": big.as_str(), "regex": pattern}}));
        let Err(err) = res else {
            panic!("$regexFindAll past 64MB was not refused");
        };
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::Location(51151),
                "$regexFindAll: the size of buffer to store output exceeded the 64MB limit"
            )
        );
        // A bad pattern: mongod's code and prefix (the rest is PCRE's text).
        let err = eval(&rawbson!({"$regexMatch": {"input": "a", "regex": "("}})).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(51111));
        assert!(
            err.errmsg.starts_with("Invalid Regex in $regexMatch: "),
            "{}",
            err.errmsg
        );
        // A non-constant regex is checked when evaluated.
        let doc = rawdoc! {"p": 5};
        let e = Expression::parse(
            rawbson!({"$regexMatch": {"input": "a", "regex": "$p"}}).as_raw_bson_ref(),
        )
        .unwrap();
        assert_eq!(
            e.evaluate(&doc).unwrap_err().code,
            ErrorCode::Location(51105)
        );
    }
}
