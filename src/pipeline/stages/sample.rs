//! `$sample`: `size` documents chosen at random (all of them, shuffled, when there are fewer).

use bson::RawBsonRef;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Stage, Stream, blocking};

/// `$sample: {size: <n>}`.
pub struct Sample(usize);

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl Sample {
    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Sample> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(loc(
                28745,
                "the $sample stage specification must be an object",
            ));
        };
        let mut size = None;
        for item in spec {
            let (k, v) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str() != "size" {
                return Err(loc(
                    28748,
                    format!("unrecognized option to $sample: {}", k.as_str()),
                ));
            }
            let n = match v {
                RawBsonRef::Int32(n) => i64::from(n),
                RawBsonRef::Int64(n) => n,
                #[expect(clippy::cast_possible_truncation, reason = "mongod coerces to long")]
                RawBsonRef::Double(d) if !d.is_nan() => d as i64,
                RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().map_or(0, |f| {
                    #[expect(clippy::cast_possible_truncation, reason = "mongod coerces to long")]
                    let n = f as i64;
                    n
                }),
                _ => return Err(loc(28746, "size argument to $sample must be a number")),
            };
            if n < 0 {
                return Err(loc(28747, "size argument to $sample must not be negative"));
            }
            size = Some(usize::try_from(n).unwrap_or(usize::MAX));
        }
        size.map(Sample)
            .ok_or_else(|| loc(28749, "$sample stage must specify a size"))
    }
}

impl Stage for Sample {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let mut keyed = Vec::new();
            for item in input {
                keyed.push((crate::query::random_unit(), item?));
            }
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            Ok(keyed.into_iter().take(self.0).map(|(_, d)| d).collect())
        })
    }
}
