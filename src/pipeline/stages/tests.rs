//! Stages run through the pipeline layer: the manual's examples and mongod's errors.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::error::CommandResult;
use crate::pipeline::{Context, computed, run};
use crate::query::Variables;
use crate::sorter::SortLimits;

pub(crate) fn ctx(allow_disk_use: bool, max_bytes: usize) -> Context {
    Context::new(SortLimits {
        max_bytes,
        allow_disk_use,
        temp_dir: std::env::temp_dir(),
    })
}

/// Runs `pipeline` over `docs` with the default limits.
pub(crate) fn aggregate(pipeline: &[Document], docs: &[Document]) -> CommandResult<Vec<Document>> {
    aggregate_in(
        &ctx(true, crate::sorter::DEFAULT_MAX_SORT_BYTES),
        pipeline,
        docs,
    )
}

pub(crate) fn aggregate_in(
    ctx: &Context,
    pipeline: &[Document],
    docs: &[Document],
) -> CommandResult<Vec<Document>> {
    let vars = Arc::new(Variables::system_clock());
    let raw: Vec<RawDocumentBuf> = pipeline
        .iter()
        .map(|d| RawDocumentBuf::try_from(d).unwrap())
        .collect();
    let refs: Vec<&bson::RawDocument> = raw.iter().map(AsRef::as_ref).collect();
    let stages = super::coalesce(super::parse_pipeline(&refs, &vars)?);
    let input = docs
        .iter()
        .map(|d| computed(RawDocumentBuf::try_from(d).unwrap()))
        .collect();
    Ok(run(&stages, input, ctx)?
        .into_iter()
        .map(|(d, _)| Document::try_from(d).unwrap())
        .collect())
}

/// The error code `pipeline` answers.
pub(crate) fn code(pipeline: Document, docs: &[Document]) -> i32 {
    match aggregate(&[pipeline], docs) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e.code.code(),
    }
}

fn artists() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "last_name": "Bernard", "first_name": "Emil", "year_born": 1868},
        doc! {"_id": 2, "last_name": "Rippl-Ronai", "first_name": "Joszef", "year_born": 1861},
        doc! {"_id": 3, "last_name": "Ostroumova", "first_name": "Anna", "year_born": 1871},
        doc! {"_id": 4, "last_name": "Van Gogh", "first_name": "Vincent", "year_born": 1853},
        doc! {"_id": 5, "last_name": "Maurer", "first_name": "Alfred", "year_born": 1868},
        doc! {"_id": 6, "last_name": "Munch", "first_name": "Edvard", "year_born": 1863},
        doc! {"_id": 7, "last_name": "Redon", "first_name": "Odilon", "year_born": 1840},
        doc! {"_id": 8, "last_name": "Diriks", "first_name": "Edvard", "year_born": 1855},
        doc! {"_id": 9, "last_name": "Nobody", "first_name": "Some", "year_born": "unknown"},
    ]
}

#[test]
fn bucket_manual_example() {
    let out = aggregate(
        &[doc! {"$bucket": {
            "groupBy": "$year_born",
            "boundaries": [1840, 1850, 1860, 1870, 1880],
            "default": "Other",
            "output": {
                "count": {"$sum": 1},
                "artists": {"$push": {"$concat": ["$first_name", " ", "$last_name"]}}
            }
        }}],
        &artists(),
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1840, "count": 1, "artists": ["Odilon Redon"]},
            doc! {"_id": 1850, "count": 2, "artists": ["Vincent Van Gogh", "Edvard Diriks"]},
            doc! {"_id": 1860, "count": 4, "artists": [
                "Emil Bernard", "Joszef Rippl-Ronai", "Alfred Maurer", "Edvard Munch"
            ]},
            doc! {"_id": 1870, "count": 1, "artists": ["Anna Ostroumova"]},
            doc! {"_id": "Other", "count": 1, "artists": ["Some Nobody"]},
        ]
    );
    // Without `output`, a count.
    let out = aggregate(
        &[doc! {"$bucket": {"groupBy": "$year_born", "boundaries": [1800, 1900], "default": 0}}],
        &artists(),
    )
    .unwrap();
    assert_eq!(
        out,
        vec![doc! {"_id": 0, "count": 1}, doc! {"_id": 1800, "count": 8}]
    );
}

#[test]
fn bucket_errors() {
    let b = |spec: Document| code(doc! {"$bucket": spec}, &artists());
    assert_eq!(code(doc! {"$bucket": 1}, &[]), 40201);
    assert_eq!(b(doc! {"groupBy": "year", "boundaries": [1, 2]}), 40202);
    assert_eq!(b(doc! {"groupBy": "$y", "boundaries": 1}), 40200);
    assert_eq!(b(doc! {"groupBy": "$y", "boundaries": ["$x", 2]}), 40191);
    assert_eq!(b(doc! {"groupBy": "$y", "boundaries": [1]}), 40192);
    assert_eq!(b(doc! {"groupBy": "$y", "boundaries": [1, "a"]}), 40193);
    assert_eq!(b(doc! {"groupBy": "$y", "boundaries": [2, 1]}), 40194);
    assert_eq!(
        b(doc! {"groupBy": "$y", "boundaries": [1, 2], "default": "$x"}),
        40195
    );
    assert_eq!(
        b(doc! {"groupBy": "$y", "boundaries": [1, 2], "output": 1}),
        40196
    );
    assert_eq!(
        b(doc! {"groupBy": "$y", "boundaries": [1, 2], "foo": 1}),
        40197
    );
    assert_eq!(b(doc! {"groupBy": "$y"}), 40198);
    assert_eq!(
        b(doc! {"groupBy": "$y", "boundaries": [1, 3], "default": 2}),
        40199
    );
    // A value in no bucket and no default: the `$switch` mongod builds fails.
    assert_eq!(
        b(doc! {"groupBy": "$year_born", "boundaries": [1, 3]}),
        40066
    );
}

#[test]
fn bucket_auto_cuts_equal_counts() {
    let docs: Vec<Document> = [
        Bson::Double(199.99),
        Bson::Double(280.0),
        Bson::Double(76.04),
        Bson::Double(167.30),
        Bson::Double(483.0),
        Bson::Double(385.0),
        Bson::Null,
        Bson::Double(118.42),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, p)| {
        let mut d = doc! {"_id": i32::try_from(i).unwrap()};
        if p != Bson::Null {
            d.insert("price", p);
        }
        d
    })
    .collect();
    let out = aggregate(
        &[doc! {"$bucketAuto": {"groupBy": "$price", "buckets": 4}}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": null, "max": 118.42}, "count": 2},
            doc! {"_id": {"min": 118.42, "max": 199.99}, "count": 2},
            doc! {"_id": {"min": 199.99, "max": 385.0}, "count": 2},
            doc! {"_id": {"min": 385.0, "max": 483.0}, "count": 2},
        ]
    );
    // Equal values stay together; more buckets than values give one per value.
    let same: Vec<Document> = (0..5)
        .map(|i| doc! {"_id": i, "v": i32::from(i > 2)})
        .collect();
    let out = aggregate(
        &[doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "output": {"ids": {"$push": "$_id"}}}}],
        &same,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": 0, "max": 1}, "ids": [0, 1, 2]},
            doc! {"_id": {"min": 1, "max": 1}, "ids": [3, 4]},
        ]
    );
    let out = aggregate(
        &[doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 10}}],
        &same,
    )
    .unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn bucket_auto_granularity() {
    let docs: Vec<Document> = (1..=10).map(|i| doc! {"_id": i, "v": i}).collect();
    let out = aggregate(
        &[doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}],
        &docs,
    )
    .unwrap();
    // mongod scales the series by repeated division by ten, so 6.8 is 68 × 0.1.
    let (low, mid) = (68.0 * (1.0 / 10.0 / 10.0), 68.0 * (1.0 / 10.0));
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": low, "max": mid}, "count": 6},
            doc! {"_id": {"min": mid, "max": 15.0}, "count": 4},
        ]
    );
    let out = aggregate(
        &[doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "POWERSOF2"}}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": 0.5, "max": 8}, "count": 7},
            doc! {"_id": {"min": 8, "max": 16}, "count": 3},
        ]
    );
    let g = |granularity: &str, v: Bson| {
        code(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": granularity}},
            &[doc! {"v": v}],
        )
    };
    assert_eq!(g("E7", Bson::Int32(1)), 40257);
    assert_eq!(g("E6", Bson::from("a")), 40258);
    assert_eq!(g("E6", Bson::Double(f64::NAN)), 40259);
    assert_eq!(g("R5", Bson::Int32(-1)), 40260);
}

#[test]
fn bucket_auto_errors() {
    let b = |spec: Document| code(doc! {"$bucketAuto": spec}, &[]);
    assert_eq!(code(doc! {"$bucketAuto": "x"}, &[]), 40240);
    assert_eq!(b(doc! {"groupBy": "v", "buckets": 2}), 40239);
    assert_eq!(b(doc! {"groupBy": "$v", "buckets": "2"}), 40241);
    assert_eq!(b(doc! {"groupBy": "$v", "buckets": 2.5}), 40242);
    assert_eq!(b(doc! {"groupBy": "$v", "buckets": 0}), 40243);
    assert_eq!(b(doc! {"groupBy": "$v", "buckets": 2, "output": []}), 40244);
    assert_eq!(b(doc! {"groupBy": "$v", "buckets": 2, "foo": 1}), 40245);
    assert_eq!(b(doc! {"groupBy": "$v"}), 40246);
    assert_eq!(
        b(doc! {"groupBy": "$v", "buckets": 2, "granularity": 1}),
        40261
    );
}

#[test]
fn sort_by_count_manual_shape() {
    let docs = vec![
        doc! {"_id": 1, "tags": ["painting", "satire"]},
        doc! {"_id": 2, "tags": ["woodcut", "painting"]},
        doc! {"_id": 3, "tags": ["oil", "painting", "satire"]},
    ];
    let out = aggregate(
        &[doc! {"$unwind": "$tags"}, doc! {"$sortByCount": "$tags"}],
        &docs,
    )
    .unwrap();
    assert_eq!(out[0], doc! {"_id": "painting", "count": 3});
    assert_eq!(out[1], doc! {"_id": "satire", "count": 2});
    assert_eq!(out.len(), 4);
    assert_eq!(code(doc! {"$sortByCount": "tags"}, &[]), 40148);
    assert_eq!(code(doc! {"$sortByCount": {"a": 1}}, &[]), 40147);
    assert_eq!(code(doc! {"$sortByCount": 1}, &[]), 40149);
}

#[test]
fn facet_runs_each_sub_pipeline() {
    let docs: Vec<Document> = (1..=5)
        .map(|i| doc! {"_id": i, "even": i % 2 == 0})
        .collect();
    let out = aggregate(
        &[doc! {"$facet": {
            "count": [{"$count": "n"}],
            "evens": [{"$match": {"even": true}}, {"$project": {"_id": 1}}],
            "top": [{"$sort": {"_id": -1}}, {"$limit": 2}],
        }}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![doc! {
            "count": [{"n": 5}],
            "evens": [{"_id": 2}, {"_id": 4}],
            "top": [{"_id": 5, "even": false}, {"_id": 4, "even": true}],
        }]
    );
    // No input: one document of empty arrays.
    let out = aggregate(&[doc! {"$facet": {"a": [{"$skip": 0}]}}], &[]).unwrap();
    assert_eq!(out, vec![doc! {"a": []}]);
}

#[test]
fn facet_errors() {
    assert_eq!(code(doc! {"$facet": {}}, &[]), 40169);
    assert_eq!(code(doc! {"$facet": 1}, &[]), 40169);
    assert_eq!(code(doc! {"$facet": {"a": 1}}, &[]), 40170);
    assert_eq!(code(doc! {"$facet": {"a": [1]}}, &[]), 40171);
    assert_eq!(code(doc! {"$facet": {"a": []}}, &[]), 2);
    assert_eq!(code(doc! {"$facet": {"a": [{"$out": "x"}]}}, &[]), 40600);
    assert_eq!(
        code(
            doc! {"$facet": {"a": [{"$facet": {"b": [{"$skip": 0}]}}]}},
            &[]
        ),
        40600
    );
    assert_eq!(code(doc! {"$facet": {"$a": [{"$skip": 0}]}}, &[]), 16410);
    assert_eq!(code(doc! {"$facet": {"a.b": [{"$skip": 0}]}}, &[]), 16412);
    assert_eq!(
        code(doc! {"$facet": {"a": [{"$frobnicate": 1}]}}, &[]),
        40324
    );
}

#[test]
fn sample_picks_distinct_documents() {
    let docs: Vec<Document> = (0..20).map(|i| doc! {"_id": i}).collect();
    let out = aggregate(&[doc! {"$sample": {"size": 5}}], &docs).unwrap();
    assert_eq!(out.len(), 5);
    let mut ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 5);
    let all = aggregate(&[doc! {"$sample": {"size": 50}}], &docs).unwrap();
    assert_eq!(all.len(), 20);
    assert_eq!(code(doc! {"$sample": 1}, &[]), 28745);
    assert_eq!(code(doc! {"$sample": {"size": "1"}}, &[]), 28746);
    assert_eq!(code(doc! {"$sample": {"size": -1}}, &[]), 28747);
    assert_eq!(code(doc! {"$sample": {"size": 1, "x": 1}}, &[]), 28748);
    assert_eq!(code(doc! {"$sample": {}}, &[]), 28749);
}

#[test]
fn group_memory_limit_without_disk_use() {
    let docs: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "s": "x".repeat(100)})
        .collect();
    let pipeline = [doc! {"$group": {"_id": "$_id", "all": {"$push": "$s"}}}];
    let err = aggregate_in(&ctx(false, 4096), &pipeline, &docs).unwrap_err();
    assert_eq!(err.code.code(), 292);
    assert!(
        err.errmsg.contains("Exceeded memory limit for $group"),
        "{}",
        err.errmsg
    );
    assert_eq!(
        aggregate_in(&ctx(true, 4096), &pipeline, &docs)
            .unwrap()
            .len(),
        100
    );
    let auto = [doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 2}}];
    assert_eq!(
        aggregate_in(&ctx(false, 4096), &auto, &docs)
            .unwrap_err()
            .code
            .code(),
        292
    );
}

#[test]
fn unknown_stages_are_40324_and_search_stages_search_not_enabled() {
    for (stage, expected) in [
        ("$frobnicate", 40324),
        ("$search", 31082),
        ("$searchMeta", 31082),
        ("$vectorSearch", 31082),
    ] {
        let mut d = Document::new();
        d.insert(stage, doc! {});
        assert_eq!(code(d, &[]), expected, "{stage}");
    }
}

/// A pipeline, or a `$facet` sub-pipeline, of more than 1,000 stages is refused before it is
/// parsed (`Location7749501`, mongod's `internalPipelineLengthLimit`); 1,000 stages run.
#[test]
fn pipelines_longer_than_1000_stages_are_refused() {
    let skip = || doc! { "$skip": 0 };
    let ok: Vec<Document> = (0..1000).map(|_| skip()).collect();
    assert_eq!(aggregate(&ok, &[doc! { "a": 1 }]).unwrap().len(), 1);
    let long: Vec<Document> = (0..1001).map(|_| skip()).collect();
    let e = aggregate(&long, &[]).unwrap_err();
    assert_eq!(e.code.code(), 7_749_501);
    assert_eq!(
        e.errmsg,
        "Pipeline length must be no longer than 1000 stages."
    );
    let facet = doc! { "$facet": { "f": long } };
    assert_eq!(code(facet, &[]), 7_749_501);
}
