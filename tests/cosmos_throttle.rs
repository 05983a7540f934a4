//! `--profile cosmos`: request units and throttling (issue #16), through the `mongodb` driver.
//!
//! A collection has 400 RU/s (Cosmos DB's default); an insert of a document under 1 KB costs
//! 5 RU (`docs/cosmos-request-units.md`), so 80 such inserts a second spend the budget. Past
//! it, a command answers `16500` with `RetryAfterMs=N` in its message, nothing written.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestResult, TestServer, run_command};
use ebb::config::{Profile, Switch};
use mongodb::bson::{Bson, Document, doc};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::{Client, Collection};

const DB: &str = "cosmosru";
/// The default throughput of a collection.
const BUDGET: f64 = 400.0;
/// What an insert of a document under 1 KB costs.
const INSERT_RU: f64 = 5.0;

/// A server with the Cosmos DB profile; `configure` adjusts the rest of its configuration.
async fn start_cosmos(
    configure: impl FnOnce(&mut ebb::Config),
) -> TestResult<(TestServer, Client)> {
    let server = TestServer::start_with(|c| {
        c.profile = Profile::Cosmos;
        configure(c);
    })
    .await?;
    let client = server.client().await?;
    Ok((server, client))
}

/// A document of about 600 bytes.
fn doc_numbered(i: i64) -> Document {
    doc! { "_id": i, "pad": "x".repeat(560) }
}

/// The code and message of a command or write error.
fn code_and_message(e: &mongodb::error::Error) -> Option<(i32, String)> {
    match &*e.kind {
        ErrorKind::Command(c) => Some((c.code, c.message.clone())),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some((w.code, w.message.clone())),
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|w| w.first())
            .map(|w| (w.code, w.message.clone())),
        _ => None,
    }
}

/// `RetryAfterMs` of a rate-limiting message, which must have Cosmos DB's shape.
fn retry_after_ms(message: &str) -> u64 {
    assert!(
        message.starts_with("Error=16500, RetryAfterMs="),
        "{message}"
    );
    assert!(
        message.contains("TooManyRequests (429)") && message.contains("Request rate is large"),
        "{message}"
    );
    let rest = &message["Error=16500, RetryAfterMs=".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("RetryAfterMs is a number")
}

/// `serverStatus.cosmos.requestUnits.databases.<DB>.collections.<coll>`.
async fn usage(client: &Client, coll: &str) -> TestResult<Document> {
    let status = run_command(client, "admin", doc! { "serverStatus": 1 }).await?;
    Ok(status
        .get_document("cosmos")?
        .get_document("requestUnits")?
        .get_document("databases")?
        .get_document(DB)?
        .get_document("collections")?
        .get_document(coll)?
        .clone())
}

/// Spends `ru` of `coll`'s budget (and more: the overdraft is paid by the seconds after) in
/// one unordered insert that is admitted because the budget is untouched.
async fn overdraw(coll: &Collection<Document>, first_id: i64, ru: f64) -> TestResult {
    #[expect(clippy::cast_possible_truncation, reason = "a few hundred documents")]
    let n = (ru / INSERT_RU).ceil() as i64;
    let docs: Vec<Document> = (first_id..first_id + n).map(doc_numbered).collect();
    coll.insert_many(docs).await?;
    Ok(())
}

/// The test: a 400 RU/s collection driven at twice that rate by several connections
/// whose client honours `RetryAfterMs` (sleeps, then retries the same write). Every write
/// completes once, the throttled ones answered 16500 with `RetryAfterMs`, and the rate
/// accepted in whole seconds of the budget stays within 10% of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_honouring_retry_after_completes_every_write_at_the_budgets_rate() -> TestResult {
    const WORKERS: i32 = 4;
    const PER_WORKER: i32 = 140;
    let (server, client) = start_cosmos(|_| {}).await?;
    // Twice the budget: 160 inserts a second, 40 from each worker.
    let interval = Duration::from_secs_f64(INSERT_RU * f64::from(WORKERS) / (2.0 * BUDGET));
    // (sent at, accepted?, RetryAfterMs) for every attempt.
    let log: Arc<Mutex<Vec<(Instant, bool, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        // A client of its own: its own connections.
        let client = server.client().await?;
        let log = Arc::clone(&log);
        workers.push(tokio::spawn(async move {
            let coll = client.database(DB).collection::<Document>("c");
            let mut next = Instant::now();
            for i in 0..PER_WORKER {
                let id = i64::from(w * PER_WORKER + i);
                tokio::time::sleep_until(next.into()).await;
                next += interval;
                loop {
                    let sent = Instant::now();
                    match coll.insert_one(doc_numbered(id)).await {
                        Ok(_) => {
                            log.lock().unwrap().push((sent, true, 0));
                            break;
                        }
                        Err(e) => {
                            let (code, message) =
                                code_and_message(&e).unwrap_or_else(|| panic!("{e}"));
                            assert_eq!(code, 16500, "{message}");
                            let after = retry_after_ms(&message);
                            assert!((1..=1000).contains(&after), "{after}");
                            log.lock().unwrap().push((sent, false, after));
                            tokio::time::sleep(Duration::from_millis(after)).await;
                        }
                    }
                }
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    let elapsed = started.elapsed();
    // What the server charged and throttled: the inserts alone.
    let used = usage(&client, "c").await?;
    // The checks below are reads on the collection: after the last second's overdraft.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let coll = client.database(DB).collection::<Document>("c");
    // Nothing lost, nothing written twice.
    let n = WORKERS * PER_WORKER;
    assert_eq!(coll.count_documents(doc! {}).await?, u64::try_from(n)?);
    let ids: BTreeSet<i64> = coll
        .distinct("_id", doc! {})
        .await?
        .iter()
        .filter_map(Bson::as_i64)
        .collect();
    assert_eq!(ids, (0..i64::from(n)).collect::<BTreeSet<_>>());

    let log = log.lock().unwrap().clone();
    let throttled: Vec<_> = log.iter().filter(|(_, ok, _)| !ok).collect();
    assert!(!throttled.is_empty(), "twice the budget is throttled");
    assert_eq!(log.len() - throttled.len(), usize::try_from(n)?);
    // The server counted the same.
    assert_eq!(
        used.get_i64("throttledRequests")?,
        i64::try_from(throttled.len())?
    );
    let charged = f64::from(n) * INSERT_RU;
    assert!((used.get_f64("requestCharge")? - charged).abs() < 1e-6);
    assert_eq!(used.get_i64("provisionedThroughput")?, 400);

    // The budget's seconds: the first throttled attempt was told when its second ends.
    let (at, _, after) = **throttled.first().unwrap();
    let boundary = at + Duration::from_millis(after);
    // Whole seconds from there while the workers were still held back by the budget.
    let last_throttled = throttled.iter().map(|(t, _, _)| *t).max().unwrap();
    let seconds = last_throttled.saturating_duration_since(boundary).as_secs();
    assert!(seconds >= 3, "driven long enough ({elapsed:?})");
    let end = boundary + Duration::from_secs(seconds);
    #[expect(clippy::cast_precision_loss, reason = "a few hundred writes")]
    let accepted = log
        .iter()
        .filter(|(t, ok, _)| *ok && *t >= boundary && *t < end)
        .count() as f64
        * INSERT_RU;
    #[expect(clippy::cast_precision_loss, reason = "a few seconds")]
    let rate = accepted / seconds as f64;
    eprintln!("accepted {rate} RU/s over {seconds} s; {elapsed:?} in all");
    assert!(
        (rate - BUDGET).abs() <= BUDGET * 0.1,
        "accepted {rate} RU/s over {seconds} s against {BUDGET}"
    );
    // Over the whole run, no more than the budget and the first (partial) second allow.
    let whole = f64::from(n) * INSERT_RU / elapsed.as_secs_f64();
    assert!(
        whole <= BUDGET * (1.0 + 1.0 / elapsed.as_secs_f64()) * 1.1,
        "{whole}"
    );
    server.stop().await?;
    Ok(())
}

/// Past the budget: an insert fails with 16500 in `writeErrors` (every statement when
/// unordered) and writes nothing; a read fails with the command error; after `RetryAfterMs`
/// the same write succeeds.
#[tokio::test]
async fn a_throttled_request_changes_nothing_and_says_when_to_retry() -> TestResult {
    let (server, client) = start_cosmos(|_| {}).await?;
    let coll = client.database(DB).collection::<Document>("t");
    overdraw(&coll, 0, 600.0).await?;
    let before = coll.count_documents(doc! {}).await;
    // The count itself was throttled, or ran: either way nothing changed.
    if let Ok(n) = before {
        assert_eq!(n, 120);
    }
    let err = coll.insert_one(doc_numbered(1000)).await.unwrap_err();
    let (code, message) = code_and_message(&err).unwrap();
    assert_eq!(code, 16500);
    let after = retry_after_ms(&message);
    assert!(matches!(*err.kind, ErrorKind::Write(_)), "{err}");

    // An unordered insert: each statement fails.
    let reply = run_command(
        &client,
        DB,
        doc! {
            "insert": "t",
            "documents": [doc_numbered(2000), doc_numbered(2001), doc_numbered(2002)],
            "ordered": false,
        },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 0);
    let errors = reply.get_array("writeErrors")?;
    assert_eq!(errors.len(), 3);
    for (i, e) in errors.iter().enumerate() {
        let e = e.as_document().unwrap();
        assert_eq!(e.get_i32("index")?, i32::try_from(i)?);
        assert_eq!(e.get_i32("code")?, 16500);
    }
    // A read: the command error, with the codeName Cosmos DB sends.
    let err = client
        .database(DB)
        .run_command(doc! { "find": "t", "filter": { "_id": 1 } })
        .await
        .unwrap_err();
    let ErrorKind::Command(c) = &*err.kind else {
        panic!("{err}")
    };
    assert_eq!(
        (c.code, c.code_name.as_str()),
        (16500, "RequestRateTooLarge")
    );
    retry_after_ms(&c.message);

    // Nothing was written; once the overdraft is paid, the same writes go through.
    tokio::time::sleep(Duration::from_millis(after)).await;
    let mut waited = 0;
    loop {
        match coll.insert_one(doc_numbered(1000)).await {
            Ok(_) => break,
            Err(e) => {
                let (code, message) = code_and_message(&e).unwrap();
                assert_eq!(code, 16500);
                waited += 1;
                assert!(waited < 5, "still throttled");
                tokio::time::sleep(Duration::from_millis(retry_after_ms(&message))).await;
            }
        }
    }
    assert_eq!(
        coll.count_documents(doc! { "_id": { "$gte": 1000 } })
            .await?,
        1
    );
    let used = usage(&client, "t").await?;
    assert!(used.get_i64("throttledRequests")? >= 3);
    server.stop().await?;
    Ok(())
}

/// `--cosmos-throttle off`: charged and reported, never throttled.
#[tokio::test]
async fn with_throttling_off_requests_are_charged_but_never_refused() -> TestResult {
    let (server, client) = start_cosmos(|c| c.cosmos_throttle = Switch::Off).await?;
    let coll = client.database(DB).collection::<Document>("off");
    overdraw(&coll, 0, 1000.0).await?;
    for i in 0..20 {
        coll.insert_one(doc_numbered(1000 + i)).await?;
    }
    let used = usage(&client, "off").await?;
    assert_eq!(used.get_i64("throttledRequests")?, 0);
    assert!((used.get_f64("requestCharge")? - 1100.0).abs() < 1e-6);
    let status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert!(!status.get_document("cosmos")?.get_bool("throttle")?);
    server.stop().await?;
    Ok(())
}

/// `--cosmos-server-retries`: a throttled request waits inside the server and succeeds when
/// its budget frees up within the time; past it, the client gets code 50, as Cosmos DB's
/// server-side retry answers after its timeout.
#[tokio::test]
async fn server_side_retry_waits_for_the_budget_then_times_out() -> TestResult {
    let (server, client) = start_cosmos(|c| c.cosmos_server_retries = 2).await?;
    let coll = client.database(DB).collection::<Document>("ssr");
    // 600 RU: paid within the next second.
    overdraw(&coll, 0, 600.0).await?;
    let started = Instant::now();
    coll.insert_one(doc_numbered(1000)).await?;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(
        usage(&client, "ssr").await?.get_i64("throttledRequests")?,
        1
    );
    // 4,000 RU: ten seconds of budget, more than two seconds of retries.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    overdraw(&coll, 2000, 4000.0).await?;
    let started = Instant::now();
    let err = coll.insert_one(doc_numbered(1001)).await.unwrap_err();
    let waited = started.elapsed();
    let ErrorKind::Command(c) = &*err.kind else {
        panic!("{err}")
    };
    assert_eq!(c.code, 50, "{}", c.message);
    assert!(
        c.message.contains("Retries due to rate limiting: True"),
        "{}",
        c.message
    );
    assert!(waited >= Duration::from_millis(1900), "{waited:?}");
    // Admitted and run: the two overdrafts and the first insert; the second never ran.
    let used = usage(&client, "ssr").await?;
    assert_eq!(used.get_i64("requests")?, 3);
    assert!(used.get_i64("throttledRequests")? >= 2);
    server.stop().await?;
    Ok(())
}

/// The charge follows the query's shape: a point read by `_id` costs 1 RU, a scan more; a
/// command's charge lands on its collection; without the profile, no `cosmos` section.
#[tokio::test]
async fn point_reads_cost_less_than_scans() -> TestResult {
    let (server, client) = start_cosmos(|c| c.cosmos_throttle = Switch::Off).await?;
    let coll = client.database(DB).collection::<Document>("shape");
    let docs: Vec<Document> = (0..50).map(doc_numbered).collect();
    coll.insert_many(docs).await?;
    let charged = |d: Document| d.get_f64("requestCharge").unwrap();
    let before = charged(usage(&client, "shape").await?);
    assert!((before - 250.0).abs() < 1e-6, "{before}");
    coll.find_one(doc! { "_id": 7 }).await?;
    let point = charged(usage(&client, "shape").await?) - before;
    assert!((point - 1.0).abs() < 1e-6, "{point}");
    coll.find_one(doc! { "pad": "nothing" }).await?;
    let scan = charged(usage(&client, "shape").await?) - before - point;
    // 2 + 50 × 0.1 + 50 documents of about 600 bytes × 9/99 RU a KB.
    assert!((9.0..10.0).contains(&scan), "{scan}");

    // Each step's charge, from the collection's total.
    let mut total = charged(usage(&client, "shape").await?);
    let mut step = async || -> TestResult<f64> {
        let now = charged(usage(&client, "shape").await?);
        let delta = now - total;
        total = now;
        Ok(delta)
    };
    // An update by `_id`: a point read and a write of the document (its index entry stays).
    coll.update_one(doc! { "_id": 3 }, doc! { "$set": { "pad": "y" } })
        .await?;
    assert!((step().await? - 6.0).abs() < 1e-6);
    // A delete by `_id`: a point read, the document and its `_id` entry removed.
    coll.delete_one(doc! { "_id": 4 }).await?;
    assert!((step().await? - 6.0).abs() < 1e-6);
    // A secondary index: each insert writes one more index entry.
    coll.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build())
        .await?;
    step().await?;
    coll.insert_one(doc! { "_id": 100, "k": 1 }).await?;
    assert!((step().await? - 5.5).abs() < 1e-6);
    // A cursor: the `getMore` is charged for the documents it reads.
    let db = client.database(DB);
    let first = db
        .run_command(doc! { "find": "shape", "filter": {}, "batchSize": 10 })
        .await?;
    let find = step().await?;
    let id = first.get_document("cursor")?.get_i64("id")?;
    db.run_command(doc! { "getMore": id, "collection": "shape" })
        .await?;
    let get_more = step().await?;
    assert!(
        find >= 2.0 && get_more > find,
        "find {find}, getMore {get_more}"
    );
    server.stop().await?;

    let plain = TestServer::start().await?;
    let client = plain.client().await?;
    let status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert!(status.get("cosmos").is_none());
    plain.stop().await?;
    Ok(())
}

/// `--cosmos-ru NAME=VALUE` sets a constant of the formula.
#[tokio::test]
async fn the_formulas_constants_are_settable() -> TestResult {
    let (server, client) = start_cosmos(|c| {
        c.cosmos_ru = vec![("write".into(), 10.0), ("point_read".into(), 2.5)];
    })
    .await?;
    let coll = client.database(DB).collection::<Document>("rates");
    coll.insert_one(doc_numbered(1)).await?;
    coll.find_one(doc! { "_id": 1 }).await?;
    let used = usage(&client, "rates").await?;
    assert!((used.get_f64("requestCharge")? - 12.5).abs() < 1e-6);
    server.stop().await?;
    Ok(())
}
