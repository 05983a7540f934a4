//! The administrative stages through the `mongodb` driver against an in-process server:
//! `$collStats` (every section), `$indexStats` with its access counters, `$listSessions`, and
//! mongod's refusals of `$geoNear` (no geo index) and the Atlas Search stages.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain, is_ok, run_command_err};
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{Binary, Bson, Document, doc};
use mongodb::{Client, Collection, IndexModel};

const DB: &str = "admin_stages";

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

async fn run(c: &Collection<Document>, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    drain(c.aggregate(pipeline).await?).await
}

/// The one document `$collStats` with `spec` answers on `c`.
async fn coll_stats(c: &Collection<Document>, spec: Document) -> TestResult<Document> {
    let mut out = run(c, vec![doc! {"$collStats": spec}]).await?;
    assert_eq!(out.len(), 1, "{out:?}");
    Ok(out.remove(0))
}

/// The error an aggregate of `pipeline` on `coll` answers.
async fn agg_err(
    client: &Client,
    coll: &str,
    pipeline: Vec<Document>,
) -> TestResult<mongodb::error::CommandError> {
    run_command_err(
        client,
        DB,
        doc! {"aggregate": coll, "pipeline": pipeline, "cursor": {}},
    )
    .await
}

async fn three_docs(client: &Client, name: &str) -> TestResult<Collection<Document>> {
    let c = coll(client, name);
    c.insert_many(vec![
        doc! {"_id": 1, "a": 1, "s": "x"},
        doc! {"_id": 2, "a": 2, "s": "yy"},
        doc! {"_id": 3, "a": 3, "s": "zzz"},
    ])
    .await?;
    Ok(c)
}

#[tokio::test]
async fn coll_stats_count_and_storage_stats() -> TestResult {
    let (_server, client) = start().await?;
    let c = three_docs(&client, "matrices").await?;
    c.create_index(IndexModel::builder().keys(doc! {"a": 1}).build())
        .await?;

    let header = coll_stats(&c, doc! {}).await?;
    let keys: Vec<&str> = header.keys().map(String::as_str).collect();
    assert_eq!(keys, ["ns", "host", "localTime"]);
    assert_eq!(header.get_str("ns")?, "admin_stages.matrices");
    assert!(header.get_str("host")?.contains(':'), "{header}");
    assert!(header.get_datetime("localTime").is_ok(), "{header}");

    let out = coll_stats(&c, doc! {"count": {}, "storageStats": {}}).await?;
    // A count below 2^30 is an int, as mongod's appendNumber makes it.
    assert_eq!(out.get("count"), Some(&Bson::Int32(3)));
    let storage = out.get_document("storageStats")?;
    let keys: Vec<&str> = storage.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "size",
            "count",
            "avgObjSize",
            "numOrphanDocs",
            "storageSize",
            "freeStorageSize",
            "capped",
            "nindexes",
            "indexDetails",
            "indexBuilds",
            "totalIndexSize",
            "indexSizes",
            "totalSize",
            "scaleFactor",
        ]
    );
    assert_eq!(storage.get("count"), Some(&Bson::Int32(3)));
    assert_eq!(storage.get("nindexes"), Some(&Bson::Int32(2)));
    assert_eq!(storage.get("scaleFactor"), Some(&Bson::Int32(1)));
    assert!(!storage.get_bool("capped")?);
    let size = storage.get_i32("size")?;
    assert!(size > 0, "{storage}");
    assert_eq!(storage.get_i32("avgObjSize")?, size / 3);
    let sizes: Vec<&str> = storage
        .get_document("indexSizes")?
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(sizes, ["_id_", "a_1"]);
    // The same figures as the collStats command.
    let command = client
        .database(DB)
        .run_command(doc! {"collStats": "matrices"})
        .await?;
    assert_eq!(
        i64::from(size),
        common::integer(command.get("size")).unwrap_or(-1)
    );
    assert_eq!(common::integer(command.get("nindexes")), Some(2));

    let scaled = coll_stats(&c, doc! {"storageStats": {"scale": 2}}).await?;
    let scaled = scaled.get_document("storageStats")?;
    assert_eq!(scaled.get_i32("size")?, size / 2);
    assert_eq!(scaled.get("scaleFactor"), Some(&Bson::Int32(2)));
    Ok(())
}

#[tokio::test]
async fn coll_stats_refusals_and_missing_collections() -> TestResult {
    let (_server, client) = start().await?;
    three_docs(&client, "c").await?;
    for (pipeline, code, name) in [
        (
            vec![doc! {"$match": {}}, doc! {"$collStats": {}}],
            40602,
            "Location40602",
        ),
        (
            vec![doc! {"$collStats": {"x": 1}}],
            40415,
            "IDLUnknownField",
        ),
        (
            vec![doc! {"$collStats": {"count": {"a": 1}}}],
            31170,
            "Location31170",
        ),
        (vec![doc! {"$collStats": {"count": 1}}], 14, "TypeMismatch"),
        (
            vec![doc! {"$collStats": {"storageStats": {"scale": 0}}}],
            51024,
            "Location51024",
        ),
        (vec![doc! {"$collStats": 1}], 5_447_000, "Location5447000"),
        (
            vec![doc! {"$facet": {"a": [{"$collStats": {}}]}}],
            40600,
            "Location40600",
        ),
    ] {
        let err = agg_err(&client, "c", pipeline.clone()).await?;
        assert_command_error(&err, code, name);
    }
    let err = agg_err(
        &client,
        "c",
        vec![doc! {"$match": {}}, doc! {"$collStats": {}}],
    )
    .await?;
    assert_eq!(
        err.message,
        "$collStats is only valid as the first stage in a pipeline"
    );

    // A collection that does not exist: the header alone is fine, its count is not.
    let missing = coll(&client, "missing");
    let out = coll_stats(&missing, doc! {"latencyStats": {}}).await?;
    assert_eq!(out.get_str("ns")?, "admin_stages.missing");
    assert_eq!(
        out.get_document("latencyStats")?
            .get_document("reads")?
            .get_i64("ops")?,
        0
    );
    for section in ["count", "storageStats", "queryExecStats"] {
        let mut spec = Document::new();
        spec.insert(section, Document::new());
        let err = agg_err(&client, "missing", vec![doc! {"$collStats": spec}]).await?;
        assert_command_error(&err, 26, "NamespaceNotFound");
        assert_eq!(
            err.message,
            format!(
                "PlanExecutor error during aggregation :: caused by :: Unable to retrieve \
                 {section} in $collStats stage :: caused by :: Collection \
                 [admin_stages.missing] not found."
            )
        );
    }

    // On a view: its own namespace, not its collection's (mongod does not resolve it).
    client
        .database(DB)
        .run_command(doc! {"create": "v", "viewOn": "c", "pipeline": [{"$match": {"a": 1}}]})
        .await?;
    let view = coll(&client, "v");
    let out = coll_stats(&view, doc! {"latencyStats": {}}).await?;
    assert_eq!(out.get_str("ns")?, "admin_stages.v");
    for section in ["count", "storageStats", "queryExecStats"] {
        let mut spec = Document::new();
        spec.insert(section, Document::new());
        let err = agg_err(&client, "v", vec![doc! {"$collStats": spec}]).await?;
        assert_command_error(&err, 166, "CommandNotSupportedOnView");
        assert_eq!(
            err.message,
            "PlanExecutor error during aggregation :: caused by :: Namespace admin_stages.v is \
             a view, not a collection"
        );
    }
    // $indexStats on a view comes after the view's pipeline: not first.
    let err = agg_err(&client, "v", vec![doc! {"$indexStats": {}}]).await?;
    assert_command_error(&err, 40602, "Location40602");
    Ok(())
}

#[tokio::test]
async fn latency_stats_count_reads_and_writes() -> TestResult {
    let (_server, client) = start().await?;
    let c = three_docs(&client, "lat").await?;
    for _ in 0..4 {
        c.find_one(doc! {"a": 2}).await?;
    }
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"b": 1}})
        .await?;
    c.create_index(IndexModel::builder().keys(doc! {"s": 1}).build())
        .await?;

    let out = coll_stats(&c, doc! {"latencyStats": {"histograms": true}}).await?;
    let lat = out.get_document("latencyStats")?;
    let keys: Vec<&str> = lat.keys().map(String::as_str).collect();
    assert_eq!(keys, ["reads", "writes", "commands", "transactions"]);
    let reads = lat.get_document("reads")?;
    assert_eq!(reads.get_i64("ops")?, 4);
    assert!(reads.get_i64("latency")? > 0, "{reads}");
    let histogram = reads.get_array("histogram")?;
    let counted: i64 = histogram
        .iter()
        .map(|b| {
            let b = b.as_document().ok_or("bucket")?;
            assert!(b.get_i64("micros").is_ok(), "{b}");
            b.get_i64("count").map_err(Into::into)
        })
        .sum::<TestResult<i64>>()?;
    assert_eq!(counted, 4);
    // insert_many and update_one.
    assert_eq!(lat.get_document("writes")?.get_i64("ops")?, 2);
    assert_eq!(lat.get_document("commands")?.get_i64("ops")?, 1);
    assert_eq!(lat.get_document("transactions")?.get_i64("ops")?, 0);
    // Without `histograms`, none.
    let plain = coll_stats(&c, doc! {"latencyStats": {}}).await?;
    let reads = plain.get_document("latencyStats")?.get_document("reads")?;
    assert!(reads.get("histogram").is_none(), "{reads}");
    // The first $collStats aggregate was a read too.
    assert_eq!(reads.get_i64("ops")?, 5);

    // A dropped collection starts over.
    c.drop().await?;
    let out = coll_stats(&c, doc! {"latencyStats": {}}).await?;
    let reads = out.get_document("latencyStats")?.get_document("reads")?;
    assert_eq!(reads.get_i64("ops")?, 0);
    Ok(())
}

#[tokio::test]
async fn query_exec_stats_count_collection_scans() -> TestResult {
    let (_server, client) = start().await?;
    let c = three_docs(&client, "scans").await?;
    c.create_index(IndexModel::builder().keys(doc! {"a": 1}).build())
        .await?;
    let scans = |d: Document| -> TestResult<(i64, i64)> {
        let s = d
            .get_document("queryExecStats")?
            .get_document("collectionScans")?;
        Ok((s.get_i64("total")?, s.get_i64("nonTailable")?))
    };
    assert_eq!(
        scans(coll_stats(&c, doc! {"queryExecStats": {}}).await?)?,
        (0, 0)
    );
    c.find_one(doc! {"s": "x"}).await?; // no index: a collection scan
    c.find_one(doc! {"a": 1}).await?; // by the index
    c.find_one(doc! {"_id": 2}).await?; // by _id
    c.count_documents(doc! {}).await?; // a $match+$group aggregate: a collection scan
    // The count command over the whole collection reads its record count (mongod's
    // RECORD_STORE_FAST_COUNT); with a filter it scans.
    c.estimated_document_count().await?;
    client
        .database(DB)
        .run_command(doc! {"count": "scans", "query": {"s": "yy"}})
        .await?;
    assert_eq!(
        scans(coll_stats(&c, doc! {"queryExecStats": {}}).await?)?,
        (3, 3)
    );
    Ok(())
}

/// `accesses.ops` of each index of `c`, by name, from `$indexStats`.
async fn ops(c: &Collection<Document>) -> TestResult<Vec<(String, i64)>> {
    let mut out = Vec::new();
    for d in run(c, vec![doc! {"$indexStats": {}}]).await? {
        let accesses = d.get_document("accesses")?;
        out.push((d.get_str("name")?.to_owned(), accesses.get_i64("ops")?));
    }
    Ok(out)
}

#[tokio::test]
async fn index_stats_count_uses_by_the_chosen_plan() -> TestResult {
    let (_server, client) = start().await?;
    let c = three_docs(&client, "orders").await?;
    c.create_index(IndexModel::builder().keys(doc! {"a": 1}).build())
        .await?;
    c.create_index(IndexModel::builder().keys(doc! {"s": 1, "a": -1}).build())
        .await?;

    let out = run(&c, vec![doc! {"$indexStats": {}}]).await?;
    assert_eq!(out.len(), 3);
    let first = &out[0];
    let keys: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(keys, ["name", "key", "host", "accesses", "spec"]);
    assert_eq!(first.get_str("name")?, "_id_");
    assert_eq!(first.get_document("key")?, &doc! {"_id": 1});
    assert_eq!(
        first.get_document("spec")?,
        &doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    );
    assert!(first.get_str("host")?.contains(':'));
    assert!(
        first
            .get_document("accesses")?
            .get_datetime("since")
            .is_ok()
    );
    assert_eq!(out[2].get_str("name")?, "s_1_a_-1");
    assert_eq!(out[2].get_document("key")?, &doc! {"s": 1, "a": -1});
    assert_eq!(
        out[2].get_document("spec")?,
        &doc! {"v": 2, "key": {"s": 1, "a": -1}, "name": "s_1_a_-1"}
    );
    let zero = vec![
        ("_id_".to_owned(), 0),
        ("a_1".to_owned(), 0),
        ("s_1_a_-1".to_owned(), 0),
    ];
    assert_eq!(ops(&c).await?, zero);

    // One use per operation whose plan scans the index.
    c.find_one(doc! {"a": 2}).await?;
    c.count_documents(doc! {"a": {"$gt": 1}}).await?;
    c.distinct("a", doc! {"a": 3}).await?;
    run(&c, vec![doc! {"$match": {"s": "x"}}, doc! {"$count": "n"}]).await?;
    c.update_one(doc! {"a": 1}, doc! {"$set": {"t": 1}}).await?;
    c.delete_one(doc! {"s": "zzz"}).await?;
    c.find_one(doc! {"_id": 1}).await?;
    c.update_one(doc! {"_id": 2}, doc! {"$set": {"t": 2}})
        .await?;
    // A collection scan uses no index; explain runs nothing.
    c.find_one(doc! {"t": 1}).await?;
    client
        .database(DB)
        .run_command(doc! {"explain": {"find": "orders", "filter": {"a": 1}}})
        .await?;
    assert_eq!(
        ops(&c).await?,
        vec![
            ("_id_".to_owned(), 2),
            ("a_1".to_owned(), 4),
            ("s_1_a_-1".to_owned(), 2),
        ]
    );
    // A hint is the plan.
    c.find(doc! {})
        .hint(mongodb::options::Hint::Name("a_1".to_owned()))
        .await?;
    assert_eq!(ops(&c).await?[1], ("a_1".to_owned(), 5));

    // A re-created index starts over; the others keep counting.
    c.drop_index("a_1").await?;
    c.create_index(IndexModel::builder().keys(doc! {"a": 1}).build())
        .await?;
    assert_eq!(
        ops(&c).await?,
        vec![
            ("_id_".to_owned(), 2),
            ("s_1_a_-1".to_owned(), 2),
            ("a_1".to_owned(), 0),
        ]
    );
    // Inside a sub-pipeline they would report on the wrong collection: refused.
    let err = agg_err(
        &client,
        "orders",
        vec![doc! {"$unionWith": {"coll": "other", "pipeline": [{"$indexStats": {}}]}}],
    )
    .await?;
    assert_command_error(&err, 238, "NotImplemented");
    // Explained, it runs nothing and counts nothing.
    let explained = client
        .database(DB)
        .run_command(
            doc! {"aggregate": "orders", "pipeline": [{"$indexStats": {}}], "explain": true},
        )
        .await?;
    assert!(is_ok(&explained), "{explained}");
    // A missing collection has no indexes.
    assert!(
        run(&coll(&client, "none"), vec![doc! {"$indexStats": {}}])
            .await?
            .is_empty()
    );
    // Its placement and form.
    let err = agg_err(
        &client,
        "orders",
        vec![doc! {"$match": {}}, doc! {"$indexStats": {}}],
    )
    .await?;
    assert_command_error(&err, 40602, "Location40602");
    let err = agg_err(&client, "orders", vec![doc! {"$indexStats": {"a": 1}}]).await?;
    assert_command_error(&err, 28803, "Location28803");
    // Used after $indexStats, the rest of the pipeline runs as usual.
    let names = run(
        &c,
        vec![
            doc! {"$indexStats": {}},
            doc! {"$match": {"accesses.ops": {"$gt": 0}}},
            doc! {"$project": {"_id": 0, "name": 1}},
        ],
    )
    .await?;
    assert_eq!(
        names,
        vec![doc! {"name": "_id_"}, doc! {"name": "s_1_a_-1"}]
    );
    Ok(())
}

#[tokio::test]
async fn index_stats_count_lookup_reads_of_the_foreign_index() -> TestResult {
    let (_server, client) = start().await?;
    let local = three_docs(&client, "local").await?;
    let foreign = coll(&client, "foreign");
    foreign
        .insert_many(vec![doc! {"_id": 1, "k": 1}, doc! {"_id": 2, "k": 2}])
        .await?;
    foreign
        .create_index(IndexModel::builder().keys(doc! {"k": 1}).build())
        .await?;
    run(
        &local,
        vec![doc! {"$lookup": {"from": "foreign", "localField": "a", "foreignField": "k", "as": "f"}}],
    )
    .await?;
    // A view whose pipeline starts with $indexStats reports on its own collection when
    // $lookup reads it.
    client
        .database(DB)
        .run_command(doc! {"create": "foreign_indexes", "viewOn": "foreign", "pipeline": [{"$indexStats": {}}]})
        .await?;
    let joined = run(
        &local,
        vec![
            doc! {"$match": {"_id": 1}},
            doc! {"$lookup": {"from": "foreign_indexes", "pipeline": [{"$project": {"_id": 0, "name": 1}}], "as": "ix"}},
            doc! {"$project": {"_id": 0, "ix": 1}},
        ],
    )
    .await?;
    assert_eq!(
        joined,
        vec![doc! {"ix": [{"name": "_id_"}, {"name": "k_1"}]}]
    );
    let counted = ops(&foreign).await?;
    assert_eq!(counted[0].0, "_id_");
    assert_eq!(counted[1].0, "k_1");
    assert!(counted[1].1 >= 1, "{counted:?}");
    Ok(())
}

fn lsid(byte: u8) -> Document {
    doc! { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![byte; 16] } }
}

#[tokio::test]
async fn list_sessions_only_on_the_sessions_collection() -> TestResult {
    let (server, client) = start().await?;
    three_docs(&client, "c").await?;
    let message = "$listSessions must be run against the 'system.sessions' collection in the 'config' \
         database.";
    for (db, target) in [
        (DB, Bson::from("c")),
        ("config", Bson::from("sessions")),
        ("config", Bson::Int32(1)),
        ("admin", Bson::from("system.sessions")),
    ] {
        let err = run_command_err(
            &client,
            db,
            doc! {"aggregate": target, "pipeline": [{"$listSessions": {}}], "cursor": {}},
        )
        .await?;
        assert_command_error(&err, 73, "InvalidNamespace");
        assert_eq!(err.message, message);
    }

    let mut raw = server.raw().await?;
    let reply = raw.command(DB, doc! { "ping": 1, "lsid": lsid(5) }).await?;
    assert!(is_ok(&reply), "{reply}");
    let listed = |spec: Document| {
        let client = client.clone();
        async move {
            let docs = drain(
                client
                    .database("config")
                    .collection::<Document>("system.sessions")
                    .aggregate(vec![
                        doc! {"$listSessions": spec},
                        doc! {"$match": {"_id.id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![5; 16] }}},
                    ])
                    .await?,
            )
            .await?;
            TestResult::Ok(docs)
        }
    };
    let docs = listed(doc! {}).await?;
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert!(docs[0].get_datetime("lastUse").is_ok());
    assert_eq!(
        docs[0]
            .get_document("_id")?
            .get_binary_generic("uid")?
            .len(),
        32
    );
    assert_eq!(listed(doc! {"allUsers": true}).await?.len(), 1);
    assert!(
        listed(doc! {"users": [{"user": "app", "db": "admin"}]})
            .await?
            .is_empty()
    );
    let err = run_command_err(
        &client,
        "config",
        doc! {
            "aggregate": "system.sessions",
            "pipeline": [{"$listSessions": {"bogus": 1}}],
            "cursor": {},
        },
    )
    .await?;
    assert_command_error(&err, 40415, "IDLUnknownField");
    assert_eq!(
        err.message,
        "BSON field '$listSessions.bogus' is an unknown field."
    );
    Ok(())
}

#[tokio::test]
async fn geo_near_and_search_are_refused_as_mongod_refuses_them() -> TestResult {
    let (_server, client) = start().await?;
    three_docs(&client, "places").await?;
    let geo =
        doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [0, 0]}, "distanceField": "d"}};
    let err = agg_err(&client, "places", vec![geo.clone()]).await?;
    assert_command_error(&err, 27, "IndexNotFound");
    assert_eq!(
        err.message,
        "$geoNear requires a 2d or 2dsphere index, but none were found"
    );
    let err = agg_err(&client, "nowhere", vec![geo.clone()]).await?;
    assert_command_error(&err, 26, "NamespaceNotFound");
    assert_eq!(
        err.message,
        "$geoNear requires a geo index to run, but admin_stages.nowhere does not exist"
    );
    let err = agg_err(&client, "places", vec![doc! {"$match": {}}, geo]).await?;
    assert_command_error(&err, 40602, "Location40602");
    assert_eq!(
        err.message,
        "$geoNear is only valid as the first stage in a pipeline"
    );
    for stage in ["$search", "$searchMeta", "$vectorSearch"] {
        let mut d = Document::new();
        d.insert(stage, doc! {"index": "default"});
        let err = agg_err(&client, "places", vec![d]).await?;
        assert_command_error(&err, 31082, "SearchNotEnabled");
    }
    Ok(())
}
