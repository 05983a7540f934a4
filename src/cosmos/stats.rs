//! `getLastRequestStatistics`: the last command's statistics on the connection, as Microsoft's
//! page "Find the request unit charge for operations executed in Azure Cosmos DB for MongoDB"
//! shows the reply:
//! `{"_t": "GetRequestStatisticsResponse", "ok": 1, "CommandName": "find",
//! "RequestCharge": 10.1, "RequestDurationInMilliSeconds": 7.2}`.

use bson::{RawDocumentBuf, rawdoc};

use crate::dispatch::ConnCtx;
use crate::error::{CommandError, CommandResult};

/// The reply to `getLastRequestStatistics` on the connection of `ctx`.
///
/// A connection always runs its handshake first, so there is a last request unless the
/// command is a raw connection's very first. What Cosmos DB answers then is not documented:
/// this is a guess (`BadValue`).
pub fn get_last_request_statistics(ctx: &ConnCtx) -> CommandResult<RawDocumentBuf> {
    let Some(last) = &ctx.cosmos.last else {
        return Err(CommandError::bad_value(
            "There is no last request on this connection to report statistics of.",
        ));
    };
    Ok(rawdoc! {
        "_t": "GetRequestStatisticsResponse",
        "ok": 1_i32,
        "CommandName": last.command_name.as_str(),
        "RequestCharge": last.request_charge,
        "RequestDurationInMilliSeconds": last.duration_ms,
    })
}
