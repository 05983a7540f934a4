//! Type operators: `$type`.

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, arg, call, exactly, parse_args, r, tname,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Type,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "type" => Op::Type,
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        exactly(name, &args, 1)?;
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        match self {
            Op::Type => Ok(Some(RawBson::String(
                tname(r(&arg(args, 0, env)?)).to_owned(),
            ))),
        }
    }
}
