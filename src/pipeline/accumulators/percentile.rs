//! `$median` and `$percentile` with `method: 'approximate'`, the only method mongod 7.0
//! accepts. Ebb answers the discrete percentile (the value at rank ⌈p·n⌉ of the sorted
//! numbers), which mongod's t-digest gives exactly on the inputs it keeps whole; on very large
//! groups mongod's answer is an approximation of the same value.

use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef};

use super::{Accumulator, Op, fields, loc};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::display::{self, type_name};
use crate::query::{Expression, Variables};

/// Parses `$median: {input, method}` and `$percentile: {input, p, method}` (IDL-parsed in
/// mongod: unknown fields 40415, missing ones 40414, a method not a string 14).
pub(super) fn parse(
    name: &str,
    arg: RawBsonRef<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<Accumulator> {
    let median = name == "$median";
    let RawBsonRef::Document(spec) = arg else {
        return Err(loc(
            if median { 7_436_100 } else { 7_429_703 },
            format!(
                "specification must be an object; found {}",
                display::value(arg)
            ),
        ));
    };
    let mut input = None;
    let mut ps = None;
    let mut method = false;
    for (k, v) in fields(spec)? {
        match k {
            "input" => input = Some(Expression::parse_in(v, vars)?),
            "p" if !median => ps = Some(parse_p(v, vars)?),
            "method" => {
                let RawBsonRef::String(m) = v else {
                    return Err(CommandError::type_mismatch(format!(
                        "BSON field '{name}.method' is the wrong type '{}', expected type 'string'",
                        type_name(v.element_type())
                    )));
                };
                if m != "approximate" {
                    return Err(CommandError::bad_value(
                        "Currently only 'approximate' can be used as percentile 'method'.",
                    ));
                }
                method = true;
            }
            other => {
                return Err(CommandError::new(
                    ErrorCode::IDLUnknownField,
                    format!("BSON field '{name}.{other}' is an unknown field."),
                ));
            }
        }
    }
    let missing = |field: &str| CommandError::missing_field(&format!("{name}.{field}"));
    let input = input.ok_or_else(|| missing("input"))?;
    let ps = if median {
        vec![0.5]
    } else {
        ps.ok_or_else(|| missing("p"))?
    };
    if !method {
        return Err(missing("method"));
    }
    Ok(Accumulator {
        op: if median { Op::Median } else { Op::Percentile },
        input,
        n: None,
        sort: None,
        ps,
        collation: None,
    })
}

/// `p`: a constant array of numbers in [0, 1].
fn parse_p(v: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Vec<f64>> {
    const MSG: &str =
        "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: ";
    let value = match v {
        RawBsonRef::String(s) if s.starts_with('$') && !s.starts_with("$$") => None,
        other => Expression::parse_in(other, vars)?
            .evaluate(&bson::RawDocumentBuf::new())
            .ok()
            .flatten(),
    };
    let Some(value) = value else {
        return Err(loc(
            7_750_300,
            format!(
                "The $percentile 'p' field must be an array of constant values, but found value: \
                 {}.",
                display::value(v)
            ),
        ));
    };
    let RawBson::Array(items) = &value else {
        return Err(loc(
            7_750_301,
            format!("{MSG}{}", display::value(value.as_raw_bson_ref())),
        ));
    };
    let mut ps = Vec::new();
    for item in items.into_iter().map_while(Result::ok) {
        let Some(p) = crate::query::compare::number_as_f64(item) else {
            return Err(loc(7_750_302, format!("{MSG}{}", display::value(item))));
        };
        if !(0.0..=1.0).contains(&p) {
            return Err(loc(
                7_750_303,
                format!("{MSG}{}", crate::query::expr::format_g6(p)),
            ));
        }
        ps.push(p);
    }
    if ps.is_empty() {
        return Err(loc(
            7_750_301,
            format!("{MSG}{}", display::value(value.as_raw_bson_ref())),
        ));
    }
    Ok(ps)
}

/// The discrete percentiles of `values`: for each p, the value at rank ⌈p·n⌉ (1-based).
pub(super) fn finish(acc: &Accumulator, mut values: Vec<f64>) -> RawBson {
    values.sort_by(f64::total_cmp);
    let at = |p: f64| -> Option<f64> {
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "p is in [0, 1]: the rank is within 0..=n"
        )]
        let rank = (p * values.len() as f64).ceil() as usize;
        values
            .get(rank.saturating_sub(1).min(values.len().saturating_sub(1)))
            .copied()
    };
    if acc.op == Op::Median {
        return at(0.5).map_or(RawBson::Null, RawBson::Double);
    }
    let mut out = RawArrayBuf::new();
    for p in &acc.ps {
        out.push(at(*p).map_or(RawBson::Null, RawBson::Double));
    }
    RawBson::Array(out)
}
