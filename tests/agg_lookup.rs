//! `$lookup` (equality, `let`/`pipeline`, both combined) and `$unionWith` through the `mongodb`
//! driver against an in-process server: their results as the manual gives them, mongod's
//! parse errors, and TTL: a document that expired is invisible to both at the instant it
//! expires, as it is to `find`.

mod common;

use common::{TestResult, TestServer, advance_clock, assert_command_error, drain, run_command_err};
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::{Client, Collection, IndexModel};

const DB: &str = "lookup";

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

async fn run(c: &Collection<Document>, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    drain(c.aggregate(pipeline).await?).await
}

/// The manual's orders and inventory (with an index on the foreign field).
async fn orders_and_inventory(client: &Client) -> TestResult<Collection<Document>> {
    let orders = coll(client, "orders");
    orders
        .insert_many(vec![
            doc! {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
            doc! {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
            doc! {"_id": 3},
        ])
        .await?;
    let inventory = coll(client, "inventory");
    inventory
        .insert_many(vec![
            doc! {"_id": 1, "sku": "almonds", "instock": 120},
            doc! {"_id": 2, "sku": "bread", "instock": 80},
            doc! {"_id": 3, "sku": "cashews", "instock": 60},
            doc! {"_id": 4, "sku": "pecans", "instock": 70},
            doc! {"_id": 5, "sku": Bson::Null},
            doc! {"_id": 6},
        ])
        .await?;
    inventory
        .create_index(IndexModel::builder().keys(doc! {"sku": 1}).build())
        .await?;
    Ok(orders)
}

#[tokio::test]
async fn lookup_by_equality_matches_arrays_and_missing_as_null() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let orders = orders_and_inventory(&client).await?;
    let out = run(
        &orders,
        vec![
            doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}},
            doc! {"$project": {"ids": "$inv._id"}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "ids": [1]},
            doc! {"_id": 2, "ids": [4]},
            // A missing local field matches null and missing foreign fields.
            doc! {"_id": 3, "ids": [5, 6]},
        ]
    );
    // A local array matches any of its elements; `as` may be a dotted path.
    let c = coll(&client, "carts");
    c.insert_one(doc! {"_id": 1, "items": ["bread", "pecans", "none"]})
        .await?;
    let out = run(
        &c,
        vec![
            doc! {"$lookup": {"from": "inventory", "localField": "items", "foreignField": "sku", "as": "a.inv"}},
            doc! {"$project": {"ids": "$a.inv._id"}},
        ],
    )
    .await?;
    assert_eq!(out, vec![doc! {"_id": 1, "ids": [2, 4]}]);
    // A collection that does not exist joins nothing.
    let out = run(
        &c,
        vec![doc! {"$lookup": {"from": "missing", "localField": "items", "foreignField": "x", "as": "m"}}],
    )
    .await?;
    assert_eq!(out[0].get_array("m")?.len(), 0);
    Ok(())
}

#[tokio::test]
async fn lookup_with_let_and_pipeline_and_both_forms() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let orders = orders_and_inventory(&client).await?;
    let out = run(
        &orders,
        vec![doc! {"$lookup": {
            "from": "inventory",
            "let": {"it": "$item", "q": "$quantity"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$it"]}, {"$gte": ["$instock", "$$q"]}]}}},
                {"$project": {"_id": 0, "instock": 1}},
            ],
            "as": "stock",
        }}],
    )
    .await?;
    let stock: Vec<Bson> = out
        .iter()
        .map(|d| d.get("stock").cloned().unwrap_or(Bson::Null))
        .collect();
    assert_eq!(
        stock,
        vec![
            Bson::Array(vec![Bson::Document(doc! {"instock": 120})]),
            Bson::Array(vec![Bson::Document(doc! {"instock": 70})]),
            // `$$it` is missing: `$eq` of two missing values holds for `_id: 6` only, and
            // `$gte` against a missing `$$q` holds too.
            Bson::Array(vec![Bson::Document(doc! {})]),
        ]
    );
    // Both forms: the equality first, then the sub-pipeline with the `let` variables.
    let out = run(
        &orders,
        vec![
            doc! {"$lookup": {
                "from": "inventory", "localField": "item", "foreignField": "sku",
                "let": {"q": "$quantity"},
                "pipeline": [{"$project": {"_id": 0, "sku": 1, "wanted": "$$q"}}],
                "as": "s",
            }},
            doc! {"$project": {"s": 1}},
        ],
    )
    .await?;
    assert_eq!(
        out[..2],
        [
            doc! {"_id": 1, "s": [{"sku": "almonds", "wanted": 2}]},
            doc! {"_id": 2, "s": [{"sku": "pecans", "wanted": 1}]},
        ]
    );
    // An uncorrelated sub-pipeline, and a `$lookup` inside a `$lookup`.
    let out = run(
        &orders,
        vec![
            doc! {"$match": {"_id": 1}},
            doc! {"$lookup": {
                "from": "inventory",
                "pipeline": [
                    {"$match": {"instock": {"$gte": 100}}},
                    {"$lookup": {"from": "orders", "localField": "sku", "foreignField": "item", "as": "o"}},
                    {"$project": {"_id": 1, "o": "$o._id"}},
                ],
                "as": "big",
            }},
        ],
    )
    .await?;
    assert_eq!(
        out[0].get_array("big")?,
        &vec![Bson::Document(doc! {"_id": 1, "o": [1]})]
    );
    Ok(())
}

#[tokio::test]
async fn union_with_appends_another_collection_through_its_pipeline() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let orders = orders_and_inventory(&client).await?;
    let out = run(
        &orders,
        vec![
            doc! {"$project": {"_id": 1}},
            doc! {"$unionWith": {"coll": "inventory", "pipeline": [{"$match": {"instock": {"$gt": 65}}}, {"$project": {"sku": 1}}]}},
            doc! {"$unionWith": "missing"},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1},
            doc! {"_id": 2},
            doc! {"_id": 3},
            doc! {"_id": 1, "sku": "almonds"},
            doc! {"_id": 2, "sku": "bread"},
            doc! {"_id": 4, "sku": "pecans"},
        ]
    );
    let total = run(
        &orders,
        vec![doc! {"$unionWith": "inventory"}, doc! {"$count": "n"}],
    )
    .await?;
    assert_eq!(total, vec![doc! {"n": 9}]);
    Ok(())
}

#[tokio::test]
async fn lookup_and_union_with_errors_are_mongods() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    orders_and_inventory(&client).await?;
    let cases: Vec<(Document, i32, &str)> = vec![
        (doc! {"$lookup": 1}, 9, "FailedToParse"),
        (doc! {"$lookup": {"from": "x"}}, 9, "FailedToParse"),
        (
            doc! {"$lookup": {"from": "x", "as": "a", "localField": "a"}},
            9,
            "FailedToParse",
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "a", "localField": "a", "foreignField": "b", "let": {}}},
            9,
            "FailedToParse",
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "a", "bogus": "b"}},
            9,
            "FailedToParse",
        ),
        (
            doc! {"$lookup": {"from": "x", "as": 1, "pipeline": []}},
            9,
            "FailedToParse",
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "a", "pipeline": [{"$bogus": 1}]}},
            40324,
            "Location40324",
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "a", "let": {"Bad": 1}, "pipeline": []}},
            16867,
            "Location16867",
        ),
        (doc! {"$unionWith": 1}, 9, "FailedToParse"),
        (
            doc! {"$unionWith": {"coll": "x", "bogus": 1}},
            40415,
            "Location40415",
        ),
        (doc! {"$unionWith": {"coll": 1}}, 14, "TypeMismatch"),
    ];
    for (stage, code, name) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! {"aggregate": "orders", "pipeline": [stage.clone()], "cursor": {}},
        )
        .await?;
        assert_command_error(&err, code, name);
    }
    Ok(())
}

/// A document joined by `$lookup` or `$unionWith` is invisible from the instant it expires.
#[tokio::test]
async fn expired_documents_are_invisible_to_lookup_and_union_with() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let now = advance_clock(&client, 0).await?.timestamp_millis();
    let sessions = coll(&client, "sessions");
    sessions
        .create_index(
            IndexModel::builder()
                .keys(doc! {"at": 1})
                .options(
                    mongodb::options::IndexOptions::builder()
                        .expire_after(std::time::Duration::from_secs(10))
                        .build(),
                )
                .build(),
        )
        .await?;
    sessions
        .insert_many(vec![
            doc! {"_id": "s1", "user": 1, "at": DateTime::from_millis(now)},
            doc! {"_id": "s2", "user": 1, "at": DateTime::from_millis(now + 5_000)},
        ])
        .await?;
    let users = coll(&client, "users");
    users.insert_one(doc! {"_id": 1}).await?;
    let pipeline = || {
        vec![
            doc! {"$lookup": {"from": "sessions", "localField": "_id", "foreignField": "user", "as": "s"}},
            doc! {"$project": {"s": "$s._id"}},
            doc! {"$unionWith": {"coll": "sessions", "pipeline": [{"$project": {"_id": 1}}]}},
        ]
    };
    let all = run(&users, pipeline()).await?;
    assert_eq!(
        all,
        vec![
            doc! {"_id": 1, "s": ["s1", "s2"]},
            doc! {"_id": "s1"},
            doc! {"_id": "s2"}
        ]
    );
    // s1 expires at now + 10 s exactly: not yet 1 ms before, gone at the instant.
    advance_clock(&client, 9_999).await?;
    assert_eq!(run(&users, pipeline()).await?, all);
    advance_clock(&client, 1).await?;
    assert_eq!(
        run(&users, pipeline()).await?,
        vec![doc! {"_id": 1, "s": ["s2"]}, doc! {"_id": "s2"}]
    );
    Ok(())
}

/// `from` naming a view reads the view's documents (its pipeline over its collection), and the
/// equality applies to what the view gives.
#[tokio::test]
async fn lookup_and_union_with_read_views_through_their_pipeline() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let orders = orders_and_inventory(&client).await?;
    client
        .database(DB)
        .run_command(doc! {
            "create": "stocked",
            "viewOn": "inventory",
            "pipeline": [
                {"$match": {"instock": {"$gte": 70}}},
                {"$project": {"name": "$sku", "instock": 1}},
            ],
        })
        .await?;
    let out = run(
        &orders,
        vec![
            doc! {"$lookup": {"from": "stocked", "localField": "item", "foreignField": "name", "as": "s"}},
            doc! {"$project": {"s": "$s._id"}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "s": [1]},
            doc! {"_id": 2, "s": [4]},
            doc! {"_id": 3, "s": []}
        ]
    );
    let out = run(
        &orders,
        vec![
            doc! {"$match": {"_id": 1}},
            doc! {"$project": {"_id": 1}},
            doc! {"$unionWith": "stocked"},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1},
            doc! {"_id": 1, "instock": 120, "name": "almonds"},
            doc! {"_id": 2, "instock": 80, "name": "bread"},
            doc! {"_id": 4, "instock": 70, "name": "pecans"},
        ]
    );
    Ok(())
}

/// Sub-pipelines nest at most 20 deep (mongod's `MaxSubPipelineDepthExceeded`, 232), also
/// through views: a view whose pipeline reads itself is refused when read, and the server
/// stays up (it used to overflow its stack).
#[tokio::test]
async fn sub_pipelines_and_views_nest_at_most_twenty_deep() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let orders = orders_and_inventory(&client).await?;
    let nested = |depth: usize| {
        // One document a level, so the result stays small.
        let mut p = vec![doc! {"$limit": 1}];
        for _ in 0..depth {
            p = vec![
                doc! {"$limit": 1},
                doc! {"$lookup": {"from": "inventory", "pipeline": p, "as": "a"}},
            ];
        }
        p
    };
    assert_eq!(run(&orders, nested(20)).await?.len(), 1);
    let too_deep =
        |pipeline: Vec<Document>| doc! {"aggregate": "orders", "pipeline": pipeline, "cursor": {}};
    let err = run_command_err(&client, DB, too_deep(nested(21))).await?;
    assert_command_error(&err, 232, "MaxSubPipelineDepthExceeded");
    let err = run_command_err(
        &client,
        DB,
        too_deep(vec![
            doc! {"$unionWith": {"coll": "x", "pipeline": nested(20)}},
        ]),
    )
    .await?;
    assert_command_error(&err, 232, "MaxSubPipelineDepthExceeded");
    let db = client.database(DB);
    db.run_command(doc! {
        "create": "itself",
        "viewOn": "orders",
        "pipeline": [{"$lookup": {"from": "itself", "localField": "_id", "foreignField": "_id", "as": "x"}}],
    })
    .await?;
    let err = run_command_err(&client, DB, doc! {"find": "itself"}).await?;
    assert_command_error(&err, 232, "MaxSubPipelineDepthExceeded");
    db.run_command(doc! {"ping": 1}).await?;
    Ok(())
}
