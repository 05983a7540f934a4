//! Comparison (`$eq $ne $gt $gte $lt $lte $cmp`, in the BSON order where missing equals
//! undefined) and boolean (`$and $or $not`, mongod's truthiness) operators.

use std::cmp::Ordering;

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, agg_compare, arg, boolean, call, eval,
    exactly, parse_args, r, truthy,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Cmp,
    And,
    Or,
    Not,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "eq" => Op::Eq,
        "ne" => Op::Ne,
        "gt" => Op::Gt,
        "gte" => Op::Gte,
        "lt" => Op::Lt,
        "lte" => Op::Lte,
        "cmp" => Op::Cmp,
        "and" => Op::And,
        "or" => Op::Or,
        "not" => Op::Not,
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        match op {
            Op::And | Op::Or => {}
            Op::Not => exactly(name, &args, 1)?,
            _ => exactly(name, &args, 2)?,
        }
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        match self {
            Op::And => {
                for a in args {
                    if !truthy(&eval(a, env)?) {
                        return Ok(boolean(false));
                    }
                }
                Ok(boolean(true))
            }
            Op::Or => {
                for a in args {
                    if truthy(&eval(a, env)?) {
                        return Ok(boolean(true));
                    }
                }
                Ok(boolean(false))
            }
            Op::Not => Ok(boolean(!truthy(&arg(args, 0, env)?))),
            Op::Eq | Op::Ne | Op::Gt | Op::Gte | Op::Lt | Op::Lte | Op::Cmp => {
                let (a, b) = (arg(args, 0, env)?, arg(args, 1, env)?);
                let ord = agg_compare(r(&a), r(&b));
                Ok(match self {
                    Op::Eq => boolean(ord.is_eq()),
                    Op::Ne => boolean(ord.is_ne()),
                    Op::Gt => boolean(ord.is_gt()),
                    Op::Gte => boolean(ord.is_ge()),
                    Op::Lt => boolean(ord.is_lt()),
                    Op::Lte => boolean(ord.is_le()),
                    Op::Cmp | Op::And | Op::Or | Op::Not => Some(RawBson::Int32(match ord {
                        Ordering::Less => -1,
                        Ordering::Equal => 0,
                        Ordering::Greater => 1,
                    })),
                })
            }
        }
    }
}
