//! `explain` as mongod 7.0 shapes it, through the `mongodb` crate: `queryHash` and
//! `planCacheKey`, the `_id` fast path (`IDHACK`), `EOF` on a missing collection, pipelines
//! pushed into the query layer, `$match` shown parsed; and `serverStatus.storageEngine`.

mod common;

use bson::{Bson, doc};
use common::{TestResult, TestServer};

#[tokio::test]
async fn server_status_reports_the_storage_engine() -> TestResult {
    for in_memory in [true, false] {
        let dir = tempfile::tempdir()?;
        let server = if in_memory {
            TestServer::start().await?
        } else {
            TestServer::start_durable(dir.path(), |_| {}).await?
        };
        let client = server.client().await?;
        let status = client
            .database("admin")
            .run_command(doc! { "serverStatus": 1 })
            .await?;
        let se = status.get_document("storageEngine")?;
        let keys: Vec<&str> = se.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "name",
                "supportsCommittedReads",
                "oldestRequiredTimestampForCrashRecovery",
                "supportsPendingDrops",
                "dropPendingIdents",
                "supportsSnapshotReadConcern",
                "readOnly",
                "persistent",
                "backupCursorOpen",
            ]
        );
        assert_eq!(
            se.get_str("name")?,
            if in_memory { "inMemory" } else { "fjall" }
        );
        assert_eq!(se.get_bool("persistent")?, !in_memory);
        assert!(!se.get_bool("readOnly")?);
        assert_eq!(se.get("dropPendingIdents"), Some(&Bson::Int64(0)));
        assert!(matches!(
            se.get("oldestRequiredTimestampForCrashRecovery"),
            Some(Bson::Timestamp(_))
        ));
        server.stop().await?;
    }
    Ok(())
}
