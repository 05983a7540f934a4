//! `$skip` and `$limit`.

use bson::RawBsonRef;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Kind, Stage, Stream};

/// `$skip: <n>`.
pub struct Skip(usize);

/// `$limit: <n>`.
pub struct Limit(usize);

impl Skip {
    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Skip> {
        count_arg("$skip", arg).map(Skip)
    }
}

impl Limit {
    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Limit> {
        count_arg("$limit", arg).map(Limit)
    }
}

impl Stage for Skip {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        // An error in the skipped part still ends the stream.
        let mut skipped = 0;
        Box::new(input.filter(move |r| {
            if r.is_err() || skipped >= self.0 {
                return true;
            }
            skipped += 1;
            false
        }))
    }

    fn kind(&self) -> Kind<'_> {
        Kind::Skip(self.0)
    }
}

impl Stage for Limit {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.take(self.0))
    }

    fn kind(&self) -> Kind<'_> {
        Kind::Limit(self.0)
    }
}

fn count_arg(stage: &str, v: RawBsonRef<'_>) -> CommandResult<usize> {
    let n = match v {
        RawBsonRef::Int32(n) => i64::from(n),
        RawBsonRef::Int64(n) => n,
        #[expect(clippy::cast_possible_truncation, reason = "checked to be integral")]
        RawBsonRef::Double(d) if d.fract() == 0.0 => d as i64,
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(if stage == "$skip" { 15972 } else { 15957 }),
                format!(
                    "invalid argument to {stage} stage: Expected a number in: {stage}: {other:?}"
                ),
            ));
        }
    };
    match (stage, n) {
        ("$limit", n) if n <= 0 => Err(CommandError::new(
            ErrorCode::Location(15958),
            "the limit must be positive",
        )),
        ("$skip", n) if n < 0 => Err(CommandError::new(
            ErrorCode::Location(15956),
            "invalid argument to $skip stage: Expected a non-negative number in: $skip",
        )),
        _ => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
    }
}
