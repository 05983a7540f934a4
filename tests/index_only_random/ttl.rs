//! The randomized test where documents expire (TTL indexes, Cosmos DB `ttl` fields).

use bson::{DateTime, Document, doc};
use mongodb::Client;
use mongodb::options::Hint;

use crate::check::{Check, assert_no_failures, report};
use crate::common::rng::Rng;
use crate::common::{TestResult, TestServer, advance_clock};
use crate::generate::{chance, natural};
use crate::query::query_round;
use crate::seed;
use crate::writes::{Setup, assert_valid, create, mutate};

/// A Cosmos DB `ttl` field on some documents: some expire, some never.
fn cosmos_ttl(rng: &mut Rng, d: &mut Document) {
    match rng.below(3) {
        0 => {
            d.insert("ttl", 5);
        }
        1 => {
            d.insert("ttl", -1);
        }
        _ => {}
    }
}

/// The test clock's instant when the expiry test starts (ms).
static CLOCK_START: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// A date `e` for a TTL index on it: up to 20 s before the expiry test's start.
fn recent_date(rng: &mut Rng, d: &mut Document) {
    if chance(rng, 70) {
        let ago = i64::try_from(rng.below(20)).unwrap_or(0) * 1000;
        let now = CLOCK_START.load(std::sync::atomic::Ordering::Relaxed);
        d.insert("e", DateTime::from_millis(now - ago));
    }
}

/// The same where documents expire: a `_ts` TTL index, a Cosmos DB default of -1 with
/// per-document `ttl` fields, a TTL index on a date field. Some documents expired (their keys
/// still in the indexes), then the TTL indexes are dropped (expired documents stay hidden, and
/// index-only plans run again).
#[tokio::test]
async fn random_queries_with_expired_documents() -> TestResult {
    let mut check = Check::new(seed() ^ 0x7717);
    eprintln!(
        "seed {} (EBB_INDEX_ONLY_SEED replays it, xored with 0x7717)",
        check.seed
    );
    let server = TestServer::start_with_test_clock().await?;
    let client: Client = server.client().await?;
    let start = advance_clock(&client, 0).await?.timestamp_millis();
    CLOCK_START.store(start, std::sync::atomic::Ordering::Relaxed);
    let db = client.database("index_only_random_ttl");
    let mut colls = vec![
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
                ),
                ..Setup::new("t", vec!["c"], 150)
            },
        )
        .await?,
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": -1 },
                ),
                decorate: cosmos_ttl,
                ..Setup::new("tc", vec![], 150)
            },
        )
        .await?,
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "e": 1 }, "name": "e_1", "expireAfterSeconds": 10 },
                ),
                decorate: recent_date,
                index_after: true,
                ..Setup::new("td", vec![], 200)
            },
        )
        .await?,
    ];
    advance_clock(&client, 6000).await?;
    for coll in &mut colls {
        let c = db.collection::<Document>(&coll.name);
        let mut batch = Vec::new();
        for _ in 0..150 {
            batch.push(coll.new_doc(&mut check.rng, coll.next_id));
            coll.next_id += 1;
        }
        let _ = c.insert_many(batch).ordered(false).await;
        // Writes refresh some of the first documents.
        mutate(&mut check, coll, 20).await?;
    }
    advance_clock(&client, 5000).await?;
    for coll in &mut colls {
        check.phase = format!("{} with TTL: ", coll.name);
        let c = db.collection::<Document>(&coll.name);
        let live = c
            .count_documents(doc! {})
            .hint(Hint::Keys(natural()))
            .await?;
        eprintln!("{}: {live} of {} documents live", coll.name, coll.next_id);
        assert!(
            live > 50 && live < u64::try_from(coll.next_id)?,
            "{}: {live} live",
            coll.name
        );
        query_round(&mut check, coll, 15).await;
        mutate(&mut check, coll, 60).await?;
        advance_clock(&client, 1000).await?;
        query_round(&mut check, coll, 10).await;
        assert_valid(coll).await?;
    }

    // No TTL index: keys alone answer again, and what expired must stay out.
    for coll in &mut colls {
        let ttl = if coll.name == "td" { "e_1" } else { "_ts_1" };
        db.run_command(doc! { "dropIndexes": coll.name.clone(), "index": ttl })
            .await?;
        coll.ttl = false;
        coll.extra = None;
    }
    advance_clock(&client, 20_000).await?;
    for coll in &mut colls {
        check.phase = format!("{} after dropping TTL: ", coll.name);
        query_round(&mut check, coll, 15).await;
        mutate(&mut check, coll, 60).await?;
        query_round(&mut check, coll, 8).await;
        assert_valid(coll).await?;
    }
    report(&check, "random_queries_with_expired_documents");
    assert_no_failures(&check);
    assert!(
        check.tally.of("count COUNT_SCAN, 0 docs examined (n > 0)") > 0,
        "no count from keys after the TTL indexes were dropped"
    );
    drop(client);
    server.stop().await?;
    Ok(())
}
