//! Each rewrite on parsed pipelines (the shape before and after), and random pipelines over
//! random documents giving the same results with and without the rewrites.

use bson::{Bson, Document, RawDocumentBuf, doc};
use proptest::prelude::*;

use super::optimize;
use crate::pipeline::stages::tests::aggregate;

fn raw(stages: &[Document]) -> Vec<RawDocumentBuf> {
    stages
        .iter()
        .map(|d| RawDocumentBuf::try_from(d).unwrap())
        .collect()
}

fn optimized(stages: &[Document]) -> Vec<Document> {
    optimize(&raw(stages))
        .iter()
        .map(|d| Document::try_from(d.as_ref()).unwrap())
        .collect()
}

#[test]
fn match_moves_ahead_of_sort() {
    assert_eq!(
        optimized(&[doc! {"$sort": {"a": 1}}, doc! {"$match": {"b": 2}}]),
        [doc! {"$match": {"b": 2}}, doc! {"$sort": {"a": 1}}]
    );
}

#[test]
fn adjacent_matches_merge() {
    assert_eq!(
        optimized(&[
            doc! {"$match": {"a": 1}},
            doc! {"$match": {"b": 2}},
            doc! {"$match": {"c": 3}},
        ]),
        [doc! {"$match": {"$and": [{"a": 1}, {"b": 2}, {"c": 3}]}}]
    );
}

#[test]
fn match_splits_around_what_a_stage_modifies() {
    // The condition on `b` goes ahead of $addFields; the one on `a` (which it sets) stays.
    assert_eq!(
        optimized(&[
            doc! {"$addFields": {"a": {"$add": ["$x", 1]}}},
            doc! {"$match": {"a": 5, "b": {"$gt": 1}}},
        ]),
        [
            doc! {"$match": {"b": {"$gt": 1}}},
            doc! {"$addFields": {"a": {"$add": ["$x", 1]}}},
            doc! {"$match": {"a": 5}},
        ]
    );
    // An $and's members split the same way; a dotted set changes its top-level field.
    assert_eq!(
        optimized(&[
            doc! {"$set": {"a.c": 1}},
            doc! {"$match": {"$and": [{"a.b": 1}, {"z": 2}], "y": 3}},
        ]),
        [
            doc! {"$match": {"z": 2, "y": 3}},
            doc! {"$set": {"a.c": 1}},
            doc! {"$match": {"a.b": 1}},
        ]
    );
    // $unset, $unwind and $lookup modify their fields only.
    for stage in [
        doc! {"$unset": ["a", "c"]},
        doc! {"$unwind": "$a"},
        doc! {"$unwind": {"path": "$c", "includeArrayIndex": "a"}},
        doc! {"$lookup": {"from": "o", "localField": "x", "foreignField": "y", "as": "a"}},
    ] {
        assert_eq!(
            optimized(&[stage.clone(), doc! {"$match": {"a": 1, "b": 2}}]),
            [doc! {"$match": {"b": 2}}, stage, doc! {"$match": {"a": 1}}]
        );
    }
}

#[test]
fn match_moves_through_projections_it_does_not_depend_on() {
    // Inclusion: only plainly included fields (and `_id`) are unchanged.
    assert_eq!(
        optimized(&[
            doc! {"$project": {"a": 1, "b": {"$toUpper": "$s"}, "c.d": 1}},
            doc! {"$match": {"a": 1, "_id": 2, "b": "X", "c.d": 3}},
        ]),
        [
            doc! {"$match": {"a": 1, "_id": 2}},
            doc! {"$project": {"a": 1, "b": {"$toUpper": "$s"}, "c.d": 1}},
            doc! {"$match": {"b": "X", "c.d": 3}},
        ]
    );
    // `_id: 0` changes `_id`.
    assert_eq!(
        optimized(&[
            doc! {"$project": {"_id": 0, "a": 1}},
            doc! {"$match": {"_id": 1}}
        ]),
        [
            doc! {"$project": {"_id": 0, "a": 1}},
            doc! {"$match": {"_id": 1}}
        ]
    );
    // Exclusion: only the excluded fields change.
    assert_eq!(
        optimized(&[doc! {"$project": {"x": 0}}, doc! {"$match": {"a": 1}}]),
        [doc! {"$match": {"a": 1}}, doc! {"$project": {"x": 0}}]
    );
    // $expr reads the fields it names; $$ROOT reads everything.
    assert_eq!(
        optimized(&[
            doc! {"$set": {"x": 1}},
            doc! {"$match": {"$expr": {"$gt": ["$a", "$b.c"]}}},
        ]),
        [
            doc! {"$match": {"$expr": {"$gt": ["$a", "$b.c"]}}},
            doc! {"$set": {"x": 1}}
        ]
    );
    let stays = [
        doc! {"$set": {"x": 1}},
        doc! {"$match": {"$expr": {"$eq": ["$$ROOT", {}]}}},
    ];
    assert_eq!(optimized(&stays), stays);
}

#[test]
fn match_stays_behind_stages_that_change_the_documents() {
    for stage in [
        doc! {"$group": {"_id": "$a"}},
        doc! {"$replaceRoot": {"newRoot": "$a"}},
        doc! {"$limit": 3},
        doc! {"$skip": 3},
        doc! {"$facet": {"x": [{"$match": {}}]}},
    ] {
        let p = [stage, doc! {"$match": {"b": 1}}];
        assert_eq!(optimized(&p), p);
    }
    // A $text query or $where is never moved.
    let p = [doc! {"$set": {"x": 1}}, doc! {"$match": {"$where": "true"}}];
    assert_eq!(optimized(&p), p);
}

#[test]
fn match_moves_as_far_as_it_can_then_into_the_front() {
    assert_eq!(
        optimized(&[
            doc! {"$match": {"k": 1}},
            doc! {"$set": {"x": 1}},
            doc! {"$sort": {"x": 1}},
            doc! {"$unset": "y"},
            doc! {"$match": {"a": 1, "x": 2}},
        ]),
        [
            doc! {"$match": {"$and": [{"k": 1}, {"a": 1}]}},
            doc! {"$set": {"x": 1}},
            doc! {"$match": {"x": 2}},
            doc! {"$sort": {"x": 1}},
            doc! {"$unset": "y"},
        ]
    );
}

#[test]
fn long_pipelines_move_a_match_all_the_way_or_run_as_given() {
    let sets: Vec<Document> = (0..999)
        .map(|i| doc! {"$set": {format!("f{i}"): i}})
        .collect();
    let mut p = sets.clone();
    p.push(doc! {"$match": {"a": 1}});
    let mut want = vec![doc! {"$match": {"a": 1}}];
    want.extend(sets.iter().cloned());
    assert_eq!(optimized(&p), want);
    // Past mongod's 1000 stages, nothing is rewritten.
    let mut p = sets;
    p.push(doc! {"$set": {"g": 1}});
    p.push(doc! {"$match": {"a": 1}});
    assert_eq!(optimized(&p), p);
}

#[test]
fn sort_takes_the_limits_after_it() {
    assert_eq!(
        optimized(&[
            doc! {"$sort": {"a": 1}},
            doc! {"$skip": 10},
            doc! {"$limit": 5},
        ]),
        [
            doc! {"$sort": {"a": 1}},
            doc! {"$limit": 15_i64},
            doc! {"$skip": 10},
        ]
    );
    assert_eq!(
        optimized(&[
            doc! {"$sort": {"a": 1}},
            doc! {"$project": {"a": 1}},
            doc! {"$limit": 5},
            doc! {"$set": {"b": 1}},
            doc! {"$limit": 3},
            doc! {"$group": {"_id": null}},
            doc! {"$limit": 1},
        ]),
        [
            doc! {"$sort": {"a": 1}},
            doc! {"$limit": 3_i64},
            doc! {"$project": {"a": 1}},
            doc! {"$set": {"b": 1}},
            doc! {"$group": {"_id": null}},
            doc! {"$limit": 1},
        ]
    );
    // Already a top-k: unchanged.
    let p = [doc! {"$sort": {"a": 1}}, doc! {"$limit": 2_i64}];
    assert_eq!(optimized(&p), p);
}

#[test]
fn skip_moves_ahead_of_one_to_one_stages() {
    assert_eq!(
        optimized(&[
            doc! {"$group": {"_id": "$a"}},
            doc! {"$project": {"a": 1}},
            doc! {"$set": {"b": 1}},
            doc! {"$skip": 2},
            doc! {"$skip": 1},
        ]),
        [
            doc! {"$group": {"_id": "$a"}},
            doc! {"$skip": 3_i64},
            doc! {"$project": {"a": 1}},
            doc! {"$set": {"b": 1}},
        ]
    );
    let p = [doc! {"$unwind": "$a"}, doc! {"$skip": 2}];
    assert_eq!(optimized(&p), p);
}

#[test]
fn skips_and_limits_coalesce() {
    assert_eq!(
        optimized(&[
            doc! {"$group": {"_id": "$a"}},
            doc! {"$skip": 2},
            doc! {"$skip": 3},
            doc! {"$limit": 10},
            doc! {"$limit": 4},
        ]),
        [
            doc! {"$group": {"_id": "$a"}},
            doc! {"$skip": 5_i64},
            doc! {"$limit": 4_i64},
        ]
    );
    // An overflowing sum stays two stages.
    let p = [
        doc! {"$group": {"_id": "$a"}},
        doc! {"$skip": i64::MAX},
        doc! {"$skip": 1},
    ];
    assert_eq!(optimized(&p), p);
}

// Random pipelines over random documents: the same results with and without the rewrites.

fn value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        (-3..4_i32).prop_map(|i| Some(Bson::Int32(i))),
        (-3..4_i32).prop_map(|i| Some(Bson::Double(f64::from(i) + 0.5))),
        "[ab]{0,1}".prop_map(|s| Some(Bson::String(s))),
        Just(Some(Bson::Null)),
        Just(None),
        prop::collection::vec(-2..3_i32, 0..3).prop_map(|v| Some(Bson::from(v))),
        (-2..3_i32).prop_map(|i| Some(Bson::Document(doc! {"x": i}))),
        (-2..3_i32).prop_map(|i| Some(Bson::from(vec![
            Bson::Int32(i),
            Bson::Document(doc! {"x": i})
        ]))),
    ]
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec(value(), 3).prop_map(|vs| {
        let mut d = Document::new();
        for (f, v) in ["a", "b", "c"].iter().zip(vs) {
            if let Some(v) = v {
                d.insert(*f, v);
            }
        }
        d
    })
}

fn field() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a", "b", "c", "_id", "a.x", "b.x"])
}

fn top_field() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a", "b", "c"])
}

fn condition() -> impl Strategy<Value = Document> {
    prop_oneof![
        (field(), -2..3_i32).prop_map(|(f, n)| doc! {f: n}),
        (field(), -2..3_i32).prop_map(|(f, n)| doc! {f: {"$gte": n}}),
        (field(), any::<bool>()).prop_map(|(f, b)| doc! {f: {"$exists": b}}),
        field().prop_map(|f| doc! {f: null}),
        (field(), field()).prop_map(|(f, g)| doc! {"$or": [{f: 1}, {g: {"$lt": 0}}]}),
        (top_field(), -2..3_i32).prop_map(|(f, n)| doc! {"$expr": {"$gt": [format!("${f}"), n]}}),
    ]
}

fn stage() -> impl Strategy<Value = Document> {
    prop_oneof![
        3 => prop::collection::vec(condition(), 1..4).prop_map(|cs| {
            if cs.len() == 1 {
                doc! {"$match": cs[0].clone()}
            } else {
                doc! {"$match": {"$and": cs}}
            }
        }),
        1 => (field(), top_field()).prop_map(|(f, g)| doc! {"$addFields": {f: {"$ifNull": [format!("${g}"), 7]}}}),
        1 => (top_field(), -2..3_i32).prop_map(|(f, n)| doc! {"$set": {f: n}}),
        1 => field().prop_map(|f| doc! {"$unset": f}),
        1 => (top_field(), top_field()).prop_map(|(f, g)| doc! {"$project": {f: 1, g: 1}}),
        1 => (top_field(), any::<bool>()).prop_map(|(f, id)| doc! {"$project": {"_id": i32::from(id), f: 1}}),
        1 => top_field().prop_map(|f| doc! {"$project": {f: 0}}),
        1 => (top_field(), top_field()).prop_map(|(f, g)| doc! {"$project": {f: 1, "z": format!("${g}")}}),
        1 => (field(), prop::sample::select(vec![1, -1])).prop_map(|(f, d)| doc! {"$sort": {f: d}}),
        1 => (0..4_i32).prop_map(|n| doc! {"$skip": n}),
        1 => (1..5_i32).prop_map(|n| doc! {"$limit": n}),
        1 => (top_field(), any::<bool>()).prop_map(|(f, keep)| doc! {"$unwind": {"path": format!("${f}"), "preserveNullAndEmptyArrays": keep}}),
        1 => top_field().prop_map(|f| doc! {"$group": {"_id": format!("${f}"), "n": {"$sum": 1}}}),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn rewrites_never_change_results(
        docs in prop::collection::vec(document(), 0..12),
        pipeline in prop::collection::vec(stage(), 1..7),
    ) {
        let docs: Vec<Document> = docs
            .into_iter()
            .enumerate()
            .map(|(i, mut d)| {
                d.insert("_id", i32::try_from(i).unwrap());
                d
            })
            .collect();
        let rewritten = optimized(&pipeline);
        // A pipeline the rewrites spare some work may no longer fail; one that ran must give
        // the same documents in the same order.
        if let Ok(want) = aggregate(&pipeline, &docs) {
            let got = aggregate(&rewritten, &docs);
            prop_assert!(got.is_ok(), "{:?} failed: {:?}", rewritten, got);
            prop_assert_eq!(got.unwrap(), want, "{:?} became {:?}", pipeline, rewritten);
        }
    }
}
