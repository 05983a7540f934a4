//! The pipeline layer's stages and accumulators through the `mongodb` driver against an
//! in-process server: `$unwind`, `$sortByCount`, `$bucket`, `$bucketAuto`, `$facet`,
//! `$sample`, `$redact`, the `$group` accumulators, mongod's errors, and the blocking stages'
//! memory limit without `allowDiskUse`.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain, run_command_err};
use mongodb::bson::{Bson, Document, doc};
use mongodb::{Client, Collection};

const DB: &str = "stages";

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

/// The manual's `$unwind` inventory.
async fn inventory(client: &Client) -> TestResult<Collection<Document>> {
    let c = coll(client, "inventory");
    c.insert_many(vec![
        doc! {"_id": 1, "item": "ABC", "sizes": ["S", "M", "L"]},
        doc! {"_id": 2, "item": "EFG", "sizes": []},
        doc! {"_id": 3, "item": "IJK", "sizes": "M"},
        doc! {"_id": 4, "item": "LMN"},
        doc! {"_id": 5, "item": "XYZ", "sizes": null},
    ])
    .await?;
    Ok(c)
}

#[tokio::test]
async fn unwind_after_a_pushed_down_match_and_sort_by_count() -> TestResult {
    let (_server, client) = start().await?;
    let c = inventory(&client).await?;
    let out = run(
        &c,
        vec![
            doc! {"$match": {"_id": {"$lte": 3}}},
            doc! {"$unwind": {"path": "$sizes", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "item": "ABC", "sizes": "S", "i": 0_i64},
            doc! {"_id": 1, "item": "ABC", "sizes": "M", "i": 1_i64},
            doc! {"_id": 1, "item": "ABC", "sizes": "L", "i": 2_i64},
            doc! {"_id": 2, "item": "EFG", "i": Bson::Null},
            doc! {"_id": 3, "item": "IJK", "sizes": "M", "i": Bson::Null},
        ]
    );
    let out = run(
        &c,
        vec![doc! {"$unwind": "$sizes"}, doc! {"$sortByCount": "$sizes"}],
    )
    .await?;
    assert_eq!(out[0], doc! {"_id": "M", "count": 2});
    assert_eq!(out.len(), 3);
    Ok(())
}

#[tokio::test]
async fn facet_with_buckets_and_accumulators() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "scores");
    c.insert_many(
        (1..=10)
            .map(|i| doc! {"_id": i, "player": format!("p{}", i % 3), "score": i * 10})
            .collect::<Vec<_>>(),
    )
    .await?;
    let out = run(
        &c,
        vec![doc! {"$facet": {
            "byRange": [{"$bucket": {"groupBy": "$score", "boundaries": [0, 50, 101],
                                     "output": {"n": {"$count": {}}, "best": {"$max": "$score"}}}}],
            "auto": [{"$bucketAuto": {"groupBy": "$score", "buckets": 2}}],
            "players": [
                {"$group": {"_id": "$player",
                            "top2": {"$topN": {"n": 2, "output": "$score", "sortBy": {"score": -1}}},
                            "median": {"$median": {"input": "$score", "method": "approximate"}},
                            "ids": {"$addToSet": "$_id"}}},
                {"$sort": {"_id": 1}},
                {"$project": {"top2": 1, "median": 1, "n": {"$size": "$ids"}}}
            ],
        }}],
    )
    .await?;
    assert_eq!(
        out,
        vec![doc! {
            "byRange": [{"_id": 0, "n": 4, "best": 40}, {"_id": 50, "n": 6, "best": 100}],
            "auto": [
                {"_id": {"min": 10, "max": 60}, "count": 5},
                {"_id": {"min": 60, "max": 100}, "count": 5}
            ],
            "players": [
                {"_id": "p0", "top2": [90, 60], "median": 60.0, "n": 3},
                {"_id": "p1", "top2": [100, 70], "median": 40.0, "n": 4},
                {"_id": "p2", "top2": [80, 50], "median": 50.0, "n": 3}
            ],
        }]
    );
    Ok(())
}

#[tokio::test]
async fn sample_and_redact() -> TestResult {
    let (_server, client) = start().await?;
    let c = inventory(&client).await?;
    let out = run(&c, vec![doc! {"$sample": {"size": 2}}]).await?;
    assert_eq!(out.len(), 2);
    assert_ne!(out[0].get_i32("_id")?, out[1].get_i32("_id")?);
    let out = run(
        &c,
        vec![
            doc! {"$redact": {"$cond": {"if": {"$eq": ["$item", "ABC"]}, "then": "$$KEEP", "else": "$$PRUNE"}}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![doc! {"_id": 1, "item": "ABC", "sizes": ["S", "M", "L"]}]
    );
    Ok(())
}

#[tokio::test]
async fn stage_and_accumulator_errors() -> TestResult {
    let (_server, client) = start().await?;
    coll(&client, "e")
        .insert_one(doc! {"_id": 1, "a": "x"})
        .await?;
    let cases: Vec<(Document, i32, &str)> = vec![
        (
            doc! {"$graphLookup": {"from": "x", "as": "y"}},
            40105,
            "Location40105",
        ),
        (doc! {"$unwind": "sizes"}, 28818, "Location28818"),
        (
            doc! {"$facet": {"a": [{"$out": "x"}]}},
            40600,
            "Location40600",
        ),
        (doc! {"$facet": {"a": []}}, 2, "BadValue"),
        (doc! {"$sample": {"size": -1}}, 28747, "Location28747"),
        (
            doc! {"$bucket": {"groupBy": "$a", "boundaries": [1, 2]}},
            40066,
            "Location40066",
        ),
        (
            doc! {"$group": {"_id": null, "v": {"$sum": [1, 2]}}},
            40237,
            "Location40237",
        ),
        (
            doc! {"$group": {"_id": null, "v": {"$count": 1}}},
            14,
            "TypeMismatch",
        ),
        (
            doc! {"$group": {"_id": null, "v": {"$mergeObjects": "$a"}}},
            40400,
            "Location40400",
        ),
        (
            doc! {"$group": {"_id": null, "v": {"$firstN": {"input": "$a", "n": 0}}}},
            5_787_908,
            "Location5787908",
        ),
        (doc! {"$redact": "$a"}, 17053, "Location17053"),
    ];
    for (stage, code, name) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! {"aggregate": "e", "pipeline": [stage.clone()], "cursor": {}},
        )
        .await?;
        assert_command_error(&err, code, name);
        assert!(!err.message.is_empty(), "{stage}");
    }
    // More than 1000 stages, at the top or in a `$lookup` or `$facet` sub-pipeline, are
    // refused before any is parsed (mongod's internalPipelineLengthLimit); 1000 run.
    let skips = |n: usize| -> Vec<Document> { (0..n).map(|_| doc! {"$skip": 0}).collect() };
    let ok = common::run_command(
        &client,
        DB,
        doc! {"aggregate": "e", "pipeline": skips(1000), "cursor": {}},
    )
    .await?;
    assert_eq!(ok.get_document("cursor")?.get_array("firstBatch")?.len(), 1);
    for pipeline in [
        skips(1001),
        vec![doc! {"$facet": {"f": skips(1001)}}],
        vec![doc! {"$lookup": {"from": "e", "pipeline": skips(1001), "as": "x"}}],
    ] {
        let err = run_command_err(
            &client,
            DB,
            doc! {"aggregate": "e", "pipeline": pipeline, "cursor": {}},
        )
        .await?;
        assert_command_error(&err, 7_749_501, "Location7749501");
        assert_eq!(
            err.message,
            "Pipeline length must be no longer than 1000 stages."
        );
    }
    Ok(())
}

#[tokio::test]
async fn group_past_the_memory_limit_needs_disk_use() -> TestResult {
    let server = TestServer::start_with(|c| c.max_blocking_sort_bytes = 20_000).await?;
    let client = server.client().await?;
    let c = coll(&client, "big");
    c.insert_many(
        (0..500)
            .map(|i| doc! {"_id": i, "pad": "x".repeat(100)})
            .collect::<Vec<_>>(),
    )
    .await?;
    let pipeline = vec![doc! {"$group": {"_id": "$_id", "pads": {"$push": "$pad"}}}];
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "big", "pipeline": pipeline.clone(), "cursor": {}, "allowDiskUse": false},
    )
    .await?;
    assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    assert!(
        err.message.contains("Exceeded memory limit for $group"),
        "{}",
        err.message
    );
    // mongod 7.0's default allows disk use: Ebb keeps the groups in memory.
    assert_eq!(run(&c, pipeline).await?.len(), 500);
    Ok(())
}

#[tokio::test]
async fn bucket_and_group_compare_under_the_collation() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "names");
    c.insert_many(vec![
        doc! {"_id": 1, "name": "Bob"},
        doc! {"_id": 2, "name": "bob"},
        doc! {"_id": 3, "name": "alice"},
    ])
    .await?;
    let pipeline = vec![doc! {"$bucket": {
        "groupBy": "$name", "boundaries": ["a", "m", "z"], "default": "zz",
        "output": {"ids": {"$push": "$_id"}}
    }}];
    // Binary: "Bob" sorts before "a".
    let binary = run(&c, pipeline.clone()).await?;
    assert_eq!(
        binary,
        vec![
            doc! {"_id": "a", "ids": [2, 3]},
            doc! {"_id": "zz", "ids": [1]}
        ]
    );
    let reply = common::run_command(
        &client,
        DB,
        doc! {"aggregate": "names", "pipeline": pipeline, "cursor": {},
        "collation": {"locale": "en", "strength": 1}},
    )
    .await?;
    let batch = reply.get_document("cursor")?.get_array("firstBatch")?;
    assert_eq!(
        batch,
        &vec![Bson::Document(doc! {"_id": "a", "ids": [1, 2, 3]})]
    );
    let out = drain(
        c.aggregate(vec![doc! {"$sortByCount": "$name"}])
            .collation(
                mongodb::options::Collation::builder()
                    .locale("en")
                    .strength(mongodb::options::CollationStrength::Primary)
                    .build(),
            )
            .await?,
    )
    .await?;
    assert_eq!(out[0].get_i32("count")?, 2);
    Ok(())
}
