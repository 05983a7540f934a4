//! What a Cosmos DB for MongoDB (RU) account reports about itself, for each API version
//! (`--cosmos-server-version`): `buildInfo.version`/`versionArray`, `hello`'s wire versions
//! and limits, and the documents it stores.
//!
//! Sources. Microsoft documents the API versions an account serves (pages "Azure Cosmos DB for
//! MongoDB (N server version): supported features and syntax", 4.2, 5.0, 6.0, 7.0), the
//! `globaldb` replica set and port 10255 of its connection strings, and the 2 MB document limit
//! (same pages, "Data types": "16-MB document support raises the size limit for your documents
//! from 2 MB to 16 MB", an opt-in capability, `EnableMongo16MBDocumentSupport`). It does not
//! document the exact replies of `hello` and `buildInfo`; what is here follows an RU account's
//! `isMaster` reply as published by a user (mongodb/laravel-mongodb issue #1492:
//! `maxBsonObjectSize` 16777216, `maxMessageSizeBytes` 4194304, `maxWriteBatchSize` 1000,
//! `hosts`/`primary`/`me` the account's host on port 10255, `setName` `globaldb`,
//! `setVersion` 1), with the wire version of the MongoDB release whose API is served (what
//! drivers need to use that release's features), and the version string `N.0.0`. Where that
//! is a guess, the field's comment says so.

use crate::config::CosmosVersion;

/// The largest document an account stores without the 16 MB capability: 2 MB (2 MiB of BSON;
/// Cosmos DB's pages say "2 MB").
pub const MAX_DOCUMENT_BYTES: usize = 2 * 1024 * 1024;

/// `maxMessageSizeBytes` an RU account reports (4 MiB, against mongod's 48,000,000; from the
/// published `isMaster` reply, not from Microsoft's pages). Not reported by the profile yet:
/// drivers also refuse replies larger than this, and an account cuts its reply batches at
/// 4 MB ("Maximum response size", Cosmos DB's service limits) where Ebb's cursors cut them at
/// 16 MiB; `hello` keeps mongod's value until batches follow the account's limit.
pub const MAX_MESSAGE_SIZE_BYTES: i32 = 4 * 1024 * 1024;

/// `maxWriteBatchSize` an RU account reports (from the published `isMaster` reply; mongod
/// reports 100,000).
pub const MAX_WRITE_BATCH_SIZE: i32 = 1000;

/// `maxBsonObjectSize` an RU account reports: 16 MiB, as mongod (from the published `isMaster`
/// reply: drivers size their messages by it, while the account refuses stored documents over
/// [`MAX_DOCUMENT_BYTES`]).
pub const MAX_BSON_OBJECT_SIZE: i32 = 16 * 1024 * 1024;

/// The version fields of one API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// `buildInfo.version` (and `serverStatus.version`): `"N.M.0"`. A guess: Cosmos DB's pages
    /// name the API version (`N.M`) only.
    pub version: &'static str,
    /// `buildInfo.versionArray`: `[N, M, 0, 0]`, as mongod makes it from the version.
    pub version_array: [i32; 4],
    /// `hello.maxWireVersion`: the wire version of MongoDB `N.M` (4.2: 8, 5.0: 13, 6.0: 17,
    /// 7.0: 21; the drivers' table, mongod's `WireVersion` enum).
    pub max_wire_version: i32,
}

/// What an account serving `version` reports.
pub fn of(version: CosmosVersion) -> Identity {
    match version {
        CosmosVersion::V4_2 => Identity {
            version: "4.2.0",
            version_array: [4, 2, 0, 0],
            max_wire_version: 8,
        },
        CosmosVersion::V5_0 => Identity {
            version: "5.0.0",
            version_array: [5, 0, 0, 0],
            max_wire_version: 13,
        },
        CosmosVersion::V6_0 => Identity {
            version: "6.0.0",
            version_array: [6, 0, 0, 0],
            max_wire_version: 17,
        },
        CosmosVersion::V7_0 => Identity {
            version: "7.0.0",
            version_array: [7, 0, 0, 0],
            max_wire_version: 21,
        },
    }
}

/// The error for a document over [`MAX_DOCUMENT_BYTES`], on insert, update, replace, upsert and
/// `findAndModify` alike. Cosmos DB's pages give neither code nor message; the message is the
/// one users report from RU accounts ("Request size is too large", e.g. Chronasorg/chronas
/// issue #28, restoring into an account on port 10255), and the code is mongod's
/// `InvalidLength` (16), a guess: the account answers HTTP 413 `RequestEntityTooLarge`
/// inside, which has no MongoDB code of its own.
pub fn document_too_large() -> crate::error::CommandError {
    crate::error::CommandError::new(
        crate::error::ErrorCode::InvalidLength,
        "Request size is too large",
    )
}

/// The error for a retryable write (`txnNumber` outside a transaction). Retryable writes are
/// an opt-in capability of RU accounts (`EnableMongoRetryableWrites`, the "Retryable writes"
/// section of the 4.2, 5.0, 6.0 and 7.0 feature pages), off unless enabled, and the profile
/// serves an account without it: every API version refuses them, with code 2 (`BadValue`) and
/// this message, as users report (microsoft/vscode-cosmosdb issues #1296 and #1343: "Error
/// type: 2"). That is why Cosmos DB's connection strings carry `retrywrites=false`.
pub fn retryable_writes_refused() -> crate::error::CommandError {
    crate::error::CommandError::bad_value(
        "Retryable writes are not supported. Please disable retryable writes by specifying \
         \"retrywrites=false\" in the connection string or an equivalent driver specific \
         config.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_reports_its_own() {
        for (v, name, wire) in [
            (CosmosVersion::V4_2, "4.2", 8),
            (CosmosVersion::V5_0, "5.0", 13),
            (CosmosVersion::V6_0, "6.0", 17),
            (CosmosVersion::V7_0, "7.0", 21),
        ] {
            let id = of(v);
            assert!(id.version.starts_with(name), "{v:?}");
            assert_eq!(id.max_wire_version, wire);
            assert_eq!(
                format!("{}.{}.{}", id.version_array[0], id.version_array[1], 0),
                id.version
            );
        }
    }
}
