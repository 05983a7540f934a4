//! The durable store's block cache (`--cache-size-gb`): its size as configured, and what it
//! holds and reads, in `serverStatus.wiredTiger.cache` (mongod's field names).

mod common;

use bson::{Document, doc};
use common::{TestResult, TestServer, integer, run_command};

/// The server's `wiredTiger.cache` section.
async fn cache(client: &mongodb::Client) -> TestResult<Document> {
    let status = run_command(client, "admin", doc! { "serverStatus": 1 }).await?;
    Ok(status
        .get_document("wiredTiger")?
        .get_document("cache")?
        .clone())
}

fn field(cache: &Document, name: &str) -> i64 {
    integer(cache.get(name)).unwrap_or_else(|| panic!("no {name} in {cache}"))
}

#[tokio::test]
async fn the_cache_is_sized_as_configured_and_serves_a_repeated_scan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |c| c.cache_size_gb = Some(0.5)).await?;
    let client = server.client().await?;
    let before = cache(&client).await?;
    assert_eq!(field(&before, "maximum bytes configured"), 512 << 20);

    let coll = client.database("cached").collection::<Document>("c");
    let pad = "p".repeat(500);
    for chunk in 0..10 {
        coll.insert_many((0..1000).map(|i| doc! { "_id": chunk * 1000 + i, "pad": pad.as_str() }))
            .await?;
    }
    assert!(field(&cache(&client).await?, "tracked dirty bytes in the cache") > 0);
    // Written out of memory into tables: reads now go through the block cache.
    run_command(&client, "cached", doc! { "compact": "c" }).await?;
    let written = cache(&client).await?;

    let scan = doc! { "pad": { "$ne": "x" } };
    assert_eq!(coll.count_documents(scan.clone()).await?, 10_000);
    let first = cache(&client).await?;
    let read_in = field(&first, "pages read into cache") - field(&written, "pages read into cache");
    // 10,000 documents of ~530 bytes: about 5 MB of 32 KiB blocks (the documents' block size),
    // read from the files once.
    assert!(read_in > 100, "{first}");
    assert!(
        field(&first, "bytes currently in the cache") > 4_000_000,
        "{first}"
    );

    // The same scan again reads next to nothing from the files: the cache holds it.
    assert_eq!(coll.count_documents(scan).await?, 10_000);
    let second = cache(&client).await?;
    let read_again =
        field(&second, "pages read into cache") - field(&first, "pages read into cache");
    assert!(
        read_again * 20 < read_in,
        "the second scan read {read_again} blocks from files, the first {read_in}: {second}"
    );
    Ok(())
}

#[tokio::test]
async fn the_default_follows_wired_tiger_and_memory_has_no_cache() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    let configured = field(&cache(&client).await?, "maximum bytes configured");
    let expected = ebb::Config::default().cache_bytes(ebb::config::physical_memory());
    assert_eq!(u64::try_from(configured)?, expected);
    assert!(configured >= 256 << 20);

    // The in-memory engine has no block cache to report.
    let memory = TestServer::start().await?;
    let client = memory.client().await?;
    let status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert!(status.get("wiredTiger").is_none(), "{status}");
    Ok(())
}
