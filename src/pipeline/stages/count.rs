//! `$count`: one document holding the number of input documents (none for no input).

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Stage, Stream, blocking, computed};

/// `$count: <field>`.
pub struct Count(String);

impl Count {
    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Count> {
        match arg {
            RawBsonRef::String(s) if !s.is_empty() && !s.starts_with('$') && !s.contains('.') => {
                Ok(Count(s.to_owned()))
            }
            _ => Err(CommandError::new(
                ErrorCode::Location(40156),
                "the count field must be a non-empty string",
            )),
        }
    }
}

impl Stage for Count {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let mut n: usize = 0;
            for item in input {
                item?;
                n = n.saturating_add(1);
            }
            if n == 0 {
                return Ok(Vec::new());
            }
            let mut out = RawDocumentBuf::new();
            if let Ok(key) = <&CStr>::try_from(self.0.as_str()) {
                out.append(key, i32::try_from(n).unwrap_or(i32::MAX));
            }
            Ok(vec![computed(out)])
        })
    }
}
