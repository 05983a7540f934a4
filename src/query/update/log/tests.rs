//! What operator, pipeline and replacement updates log, from the `$v: 2` entries mongod's update
//! node tests expect (`*_node_test.cpp`, `update_array_node_test.cpp`, `v2_log_builder_test.cpp`),
//! byte for byte, each also applied back to the pre-image with `apply_diff`; and a property test
//! over random documents and operator updates.

use bson::{Bson, DateTime, Document, RawArray, RawDocumentBuf, doc, rawdoc};
use proptest::prelude::*;

use crate::oplog::apply_diff;
use crate::query::filter::Filter;
use crate::query::update::{Logged, Update, UpdateContext};

fn show(d: &RawDocumentBuf) -> String {
    Document::try_from(d.as_ref()).map_or_else(|e| e.to_string(), |d| d.to_string())
}

/// Applies `update` (with `arrayFilters` and a statement filter when given) to `pre` both ways,
/// checking they give the same document.
fn run(
    update: &RawDocumentBuf,
    array_filters: Option<&RawArray>,
    query: Option<&RawDocumentBuf>,
    pre: &RawDocumentBuf,
) -> Option<(RawDocumentBuf, Logged)> {
    let update = Update::compile_with_array_filters(update, array_filters).unwrap();
    let filter = query.map(|q| Filter::compile(q).unwrap());
    let mut ctx = UpdateContext::at(1_000);
    ctx.filter = filter.as_ref();
    let logged = update.apply_logged(pre, &ctx).unwrap();
    let plain = update.apply_with(pre, &ctx).unwrap();
    assert_eq!(logged.as_ref().map(|l| &l.0), plain.as_ref());
    logged
}

/// The update logs `{$v: 2, diff: expected}`, which turns `pre` into the new document.
fn check_full(
    update: &RawDocumentBuf,
    array_filters: Option<&RawArray>,
    query: Option<&RawDocumentBuf>,
    pre: &RawDocumentBuf,
    expected: &RawDocumentBuf,
) {
    let Some((new, logged)) = run(update, array_filters, query, pre) else {
        panic!("{} changed nothing in {}", show(update), show(pre));
    };
    let Logged::Diff(o) = logged else {
        panic!("{} logged a replacement", show(update));
    };
    let want = rawdoc! {"$v": 2, "diff": expected.clone()};
    assert_eq!(
        o.as_bytes(),
        want.as_bytes(),
        "{} over {}: {} != {}",
        show(update),
        show(pre),
        show(&o),
        show(&want)
    );
    let diff = o.get_document("diff").unwrap();
    assert_eq!(apply_diff(pre, diff).unwrap(), new, "{}", show(update));
}

fn check(update: &RawDocumentBuf, pre: &RawDocumentBuf, expected: &RawDocumentBuf) {
    check_full(update, None, None, pre, expected);
}

fn check_filtered(
    update: &RawDocumentBuf,
    filters: &RawDocumentBuf,
    pre: &RawDocumentBuf,
    expected: &RawDocumentBuf,
) {
    let filters = filters.get_array("f").unwrap();
    check_full(update, Some(filters), None, pre, expected);
}

fn unchanged(update: &RawDocumentBuf, pre: &RawDocumentBuf) {
    assert!(run(update, None, None, pre).is_none(), "{}", show(update));
}

#[test]
fn set_logs_the_whole_new_value() {
    check(
        &rawdoc! {"$set": {"a": [1, 2, 3]}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [1, 2, 3]}},
    );
    check(
        &rawdoc! {"$set": {"a": {"b": 1, "c": 2}}},
        &rawdoc! {"_id": 1, "a": {"b": 1}},
        &rawdoc! {"u": {"a": {"b": 1, "c": 2}}},
    );
    // A different type is a change.
    check(
        &rawdoc! {"$set": {"a": 1.0}},
        &rawdoc! {"_id": 1, "a": 1},
        &rawdoc! {"u": {"a": 1.0}},
    );
}

#[test]
fn a_path_left_as_it_was_logs_nothing() {
    unchanged(&rawdoc! {"$set": {"a": 1}}, &rawdoc! {"_id": 1, "a": 1});
    check(
        &rawdoc! {"$set": {"a": 1, "b": 2}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1},
        &rawdoc! {"u": {"b": 2}},
    );
    check(
        &rawdoc! {"$unset": {"x": 1}, "$set": {"a": 2}},
        &rawdoc! {"_id": 1, "a": 1},
        &rawdoc! {"u": {"a": 2}},
    );
    check(
        &rawdoc! {"$setOnInsert": {"x": 1}, "$set": {"a": 2}},
        &rawdoc! {"_id": 1, "a": 1},
        &rawdoc! {"u": {"a": 2}},
    );
    check(
        &rawdoc! {"$inc": {"a": 0, "b": 1}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1},
        &rawdoc! {"u": {"b": 2}},
    );
    check(
        &rawdoc! {"$max": {"a": 0}, "$min": {"b": 0}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1},
        &rawdoc! {"u": {"b": 0}},
    );
}

#[test]
fn unset_deletes_or_nulls_an_array_element() {
    check(
        &rawdoc! {"$unset": {"a": ""}},
        &rawdoc! {"_id": 1, "a": [0, 1, 2], "b": 1},
        &rawdoc! {"d": {"a": false}},
    );
    check(
        &rawdoc! {"$unset": {"a.1": 1}},
        &rawdoc! {"_id": 1, "a": [0, 1, 2]},
        &rawdoc! {"sa": {"a": true, "u1": null}},
    );
    check(
        &rawdoc! {"$unset": {"a.b": 1, "a.c": 1}},
        &rawdoc! {"_id": 1, "a": {"c": 1, "b": 1, "d": 1}},
        &rawdoc! {"sa": {"d": {"b": false, "c": false}}},
    );
}

#[test]
fn created_paths_are_inserted_whole() {
    check(
        &rawdoc! {"$set": {"a.b.c": 1}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"a": {"b": {"c": 1}}}},
    );
    check(
        &rawdoc! {"$set": {"a.c": 2, "a.b": 1}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"a": {"b": 1, "c": 2}}},
    );
    check(
        &rawdoc! {"$set": {"a.b": 1}},
        &rawdoc! {"_id": 1, "a": {"c": 0}},
        &rawdoc! {"sa": {"i": {"b": 1}}},
    );
    check(
        &rawdoc! {"$set": {"a.b.c": 1, "a.x": 2}},
        &rawdoc! {"_id": 1, "a": {}},
        &rawdoc! {"sa": {"i": {"b": {"c": 1}, "x": 2}}},
    );
    check(
        &rawdoc! {"$inc": {"n": 5}, "$mul": {"m": 2}, "$max": {"x": 1}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"m": 0, "n": 5, "x": 1}},
    );
}

#[test]
fn array_elements_by_index() {
    check(
        &rawdoc! {"$set": {"a.1": 6}},
        &rawdoc! {"_id": 1, "a": [0, 1, 2]},
        &rawdoc! {"sa": {"a": true, "u1": 6}},
    );
    // Padding with nulls is the applier's: only the new element is logged.
    check(
        &rawdoc! {"$set": {"a.3": 9}},
        &rawdoc! {"_id": 1, "a": [1]},
        &rawdoc! {"sa": {"a": true, "u3": 9}},
    );
    check(
        &rawdoc! {"$set": {"a.0.b": 9}},
        &rawdoc! {"_id": 1, "a": [{"b": 1}]},
        &rawdoc! {"sa": {"a": true, "s0": {"u": {"b": 9}}}},
    );
    check(
        &rawdoc! {"$set": {"a.0.c": 9}},
        &rawdoc! {"_id": 1, "a": [{"b": 1}]},
        &rawdoc! {"sa": {"a": true, "s0": {"i": {"c": 9}}}},
    );
    check(
        &rawdoc! {"$set": {"a.3.b": 1}},
        &rawdoc! {"_id": 1, "a": []},
        &rawdoc! {"sa": {"a": true, "u3": {"b": 1}}},
    );
    // A document with numeric field names is not an array.
    check(
        &rawdoc! {"$set": {"a.0": 9}},
        &rawdoc! {"_id": 1, "a": {"0": 1}},
        &rawdoc! {"sa": {"u": {"0": 9}}},
    );
    check(
        &rawdoc! {"$set": {"a.10": 1, "a.2": 2}},
        &rawdoc! {"_id": 1, "a": [0, 0, 0]},
        &rawdoc! {"sa": {"a": true, "u2": 2, "u10": 1}},
    );
}

#[test]
fn push_appends_elements_or_logs_the_array() {
    check(
        &rawdoc! {"$push": {"a": 1}},
        &rawdoc! {"_id": 1, "a": [0]},
        &rawdoc! {"sa": {"a": true, "u1": 1}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [3, 4]}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"sa": {"a": true, "u2": 3, "u3": 4}},
    );
    check(
        &rawdoc! {"$push": {"a": 1}},
        &rawdoc! {"_id": 1, "a": []},
        &rawdoc! {"u": {"a": [1]}},
    );
    check(
        &rawdoc! {"$push": {"a": 1}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"a": [1]}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [0], "$position": 0}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [0, 1, 2]}},
    );
    // A position at the end is not an append; past it, it is.
    check(
        &rawdoc! {"$push": {"a": {"$each": [3], "$position": 2}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [1, 2, 3]}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [3], "$position": 5}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"sa": {"a": true, "u2": 3}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [3], "$sort": 1}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [1, 2, 3]}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [3], "$slice": -2}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [2, 3]}},
    );
    check(
        &rawdoc! {"$push": {"a": {"$each": [3], "$slice": 5}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"sa": {"a": true, "u2": 3}},
    );
    unchanged(
        &rawdoc! {"$push": {"a": {"$each": []}}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
    );
    // An empty `$each` with a `$sort` counts as a change of the whole array.
    check(
        &rawdoc! {"$push": {"a": {"$each": [], "$sort": 1}}, "$set": {"b": 1}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [1, 2]}, "i": {"b": 1}},
    );
    check(
        &rawdoc! {"$push": {"choices.first.votes": 1}},
        &rawdoc! {"_id": 1, "choices": {"first": {"choice": "b"}}},
        &rawdoc! {"schoices": {"sfirst": {"i": {"votes": [1]}}}},
    );
}

#[test]
fn other_array_operators_log_the_whole_array() {
    check(
        &rawdoc! {"$addToSet": {"a": 3}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [1, 2, 3]}},
    );
    check(
        &rawdoc! {"$addToSet": {"a.1": 1}},
        &rawdoc! {"_id": 1, "a": [1, []]},
        &rawdoc! {"sa": {"a": true, "u1": [1]}},
    );
    unchanged(
        &rawdoc! {"$addToSet": {"a": 2}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
    );
    check(
        &rawdoc! {"$pop": {"a": -1}},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"u": {"a": [2, 3]}},
    );
    unchanged(&rawdoc! {"$pop": {"a": 1}}, &rawdoc! {"_id": 1, "a": []});
    check(
        &rawdoc! {"$pull": {"a": {"$gt": 1}}},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"u": {"a": [1]}},
    );
    check(
        &rawdoc! {"$pullAll": {"a": [1, 3]}},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"u": {"a": [2]}},
    );
    unchanged(
        &rawdoc! {"$pull": {"a": 9}},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
    );
}

#[test]
fn arithmetic_and_bits() {
    check(
        &rawdoc! {"$inc": {"a": 1}, "$mul": {"b": 2}, "$bit": {"c": {"or": 4}}},
        &rawdoc! {"_id": 1, "a": 1, "b": 3, "c": 1},
        &rawdoc! {"u": {"a": 2, "b": 6, "c": 5}},
    );
    // int32 overflow widens to int64.
    check(
        &rawdoc! {"$inc": {"a": 1}},
        &rawdoc! {"_id": 1, "a": i32::MAX},
        &rawdoc! {"u": {"a": i64::from(i32::MAX) + 1}},
    );
    unchanged(
        &rawdoc! {"$bit": {"a": {"and": 7}}},
        &rawdoc! {"_id": 1, "a": 5},
    );
}

#[test]
fn current_date_is_always_logged() {
    // Same value as before, still logged (mongod's `$currentDate` never is a no-op).
    check(
        &rawdoc! {"$currentDate": {"a": true}, "$set": {"b": 2}},
        &rawdoc! {"_id": 1, "a": DateTime::from_millis(1_000), "b": 1},
        &rawdoc! {"u": {"a": DateTime::from_millis(1_000), "b": 2}},
    );
    check(
        &rawdoc! {"$currentDate": {"a": {"$type": "timestamp"}}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"a": bson::Timestamp { time: 1, increment: 1 }}},
    );
}

#[test]
fn rename_logs_the_destination_then_deletes_the_source() {
    check(
        &rawdoc! {"$rename": {"a": "b"}},
        &rawdoc! {"_id": 1, "a": 1},
        &rawdoc! {"d": {"a": false}, "i": {"b": 1}},
    );
    check(
        &rawdoc! {"$rename": {"a": "b"}},
        &rawdoc! {"_id": 1, "a": 1, "b": 2},
        &rawdoc! {"d": {"a": false}, "u": {"b": 1}},
    );
    // The same value already at the destination: logged all the same.
    check(
        &rawdoc! {"$rename": {"a": "b"}},
        &rawdoc! {"_id": 1, "a": 2, "b": 2},
        &rawdoc! {"d": {"a": false}, "u": {"b": 2}},
    );
    check(
        &rawdoc! {"$rename": {"a": "b"}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1_i64},
        &rawdoc! {"d": {"a": false}, "u": {"b": 1}},
    );
    check(
        &rawdoc! {"$rename": {"a.c": "b"}},
        &rawdoc! {"_id": 1, "a": {"c": {"d": 6}}, "b": 1},
        &rawdoc! {"u": {"b": {"d": 6}}, "sa": {"d": {"c": false}}},
    );
    check(
        &rawdoc! {"$rename": {"c.d": "a.b.c"}},
        &rawdoc! {"_id": 1, "a": {"b": {"c": 1, "d": 2}}, "b": 3, "c": {"d": 4}},
        &rawdoc! {"sa": {"sb": {"u": {"c": 4}}}, "sc": {"d": {"d": false}}},
    );
    check(
        &rawdoc! {"$rename": {"a": "c.r.d"}},
        &rawdoc! {"_id": 1, "a": 2, "b": 1, "c": {}},
        &rawdoc! {"d": {"a": false}, "sc": {"i": {"r": {"d": 2}}}},
    );
    check(
        &rawdoc! {"$rename": {"a": "b.c.d"}},
        &rawdoc! {"_id": 1, "a": [{"a": 2, "b": 1}]},
        &rawdoc! {"d": {"a": false}, "i": {"b": {"c": {"d": [{"a": 2, "b": 1}]}}}},
    );
    // Logged when the destination is reached: its sub-diff comes first.
    check(
        &rawdoc! {"$rename": {"a.b": "c.d"}},
        &rawdoc! {"_id": 1, "a": {"b": 1}, "c": {}},
        &rawdoc! {"sc": {"i": {"d": 1}}, "sa": {"d": {"b": false}}},
    );
    check(
        &rawdoc! {"$rename": {"a": "c"}, "$unset": {"b": 1}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1},
        &rawdoc! {"d": {"b": false, "a": false}, "i": {"c": 1}},
    );
    unchanged(
        &rawdoc! {"$rename": {"x": "y"}},
        &rawdoc! {"_id": 1, "a": 1},
    );
}

#[test]
fn positional_and_array_filters() {
    let query = rawdoc! {"a": 2};
    check_full(
        &rawdoc! {"$set": {"a.$": 5}},
        None,
        Some(&query),
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"sa": {"a": true, "u1": 5}},
    );
    // One element matched: its children log themselves.
    check_filtered(
        &rawdoc! {"$set": {"a.$[x]": 0}},
        &rawdoc! {"f": [{"x": 3}]},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"sa": {"a": true, "u2": 0}},
    );
    check(
        &rawdoc! {"$inc": {"a.$[].b": 1}},
        &rawdoc! {"_id": 1, "a": [{"b": 1}]},
        &rawdoc! {"sa": {"a": true, "s0": {"u": {"b": 2}}}},
    );
    // Several matched and several changed: the whole array.
    check_filtered(
        &rawdoc! {"$set": {"a.$[x]": 0}},
        &rawdoc! {"f": [{"x": {"$gte": 2}}]},
        &rawdoc! {"_id": 1, "a": [1, 2, 3]},
        &rawdoc! {"u": {"a": [1, 0, 0]}},
    );
    check(
        &rawdoc! {"$inc": {"a.$[].b": 1}},
        &rawdoc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]},
        &rawdoc! {"u": {"a": [{"b": 2}, {"b": 3}]}},
    );
    check(
        &rawdoc! {"$unset": {"a.$[]": 1}},
        &rawdoc! {"_id": 1, "a": [1, 2]},
        &rawdoc! {"u": {"a": [null, null]}},
    );
    // Several matched, one changed: that element, whole (update_array_node_test).
    check_filtered(
        &rawdoc! {"$set": {"a.$[i].b": 0}},
        &rawdoc! {"f": [{"i.c": 0}]},
        &rawdoc! {"_id": 1, "a": [{"c": 0, "b": 0}, {"c": 0}, {"c": 1}]},
        &rawdoc! {"sa": {"a": true, "u1": {"c": 0, "b": 0}}},
    );
    // Several matched, none changed: nothing.
    check(
        &rawdoc! {"$set": {"a.$[]": 1, "b": 2}},
        &rawdoc! {"_id": 1, "a": [1, 1], "b": 1},
        &rawdoc! {"u": {"b": 2}},
    );
    // Nested: the outer node decides for everything below it.
    check(
        &rawdoc! {"$set": {"a.$[].b.$[]": 0}},
        &rawdoc! {"_id": 1, "a": [{"b": [1, 0]}, {"b": [0, 0]}]},
        &rawdoc! {"sa": {"a": true, "u0": {"b": [0, 0]}}},
    );
    check(
        &rawdoc! {"$set": {"a.0.b.$[]": 0}},
        &rawdoc! {"_id": 1, "a": [{"b": [1, 2]}]},
        &rawdoc! {"sa": {"a": true, "s0": {"u": {"b": [0, 0]}}}},
    );
}

#[test]
fn leaves_are_logged_in_path_order() {
    // Not in the document's order.
    check(
        &rawdoc! {"$set": {"a": 2, "b": 2}},
        &rawdoc! {"_id": 1, "b": 1, "a": 1},
        &rawdoc! {"u": {"a": 2, "b": 2}},
    );
    check(
        &rawdoc! {"$set": {"z": 1, "y": 2}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"y": 2, "z": 1}},
    );
    check(
        &rawdoc! {"$set": {"z.a": 1, "y.a": 1}},
        &rawdoc! {"_id": 1, "z": {}, "y": {}},
        &rawdoc! {"sy": {"i": {"a": 1}}, "sz": {"i": {"a": 1}}},
    );
    // Component by component: `a` (of `a.x`) comes before `a-b`.
    check(
        &rawdoc! {"$set": {"a-b": 1, "a.x": 1}},
        &rawdoc! {"_id": 1},
        &rawdoc! {"i": {"a": {"x": 1}, "a-b": 1}},
    );
    check(
        &rawdoc! {"$set": {"a": 5, "n.x": 1}, "$unset": {"b": 1}, "$inc": {"c": 1}},
        &rawdoc! {"_id": 1, "a": 1, "b": 1, "n": {"x": 0}},
        &rawdoc! {"d": {"b": false}, "u": {"a": 5}, "i": {"c": 1}, "sn": {"u": {"x": 1}}},
    );
}

#[test]
fn update_object_node_cases() {
    check(
        &rawdoc! {"$set": {"a": 5, "b": 6, "c": 7, "d": 8}},
        &rawdoc! {"a": 0, "c": 0},
        &rawdoc! {"u": {"a": 5, "c": 7}, "i": {"b": 6, "d": 8}},
    );
    check(
        &rawdoc! {"$set": {"a.b": 6, "a.c": 7, "b.d": 8, "b.e": 9}},
        &rawdoc! {"a": {"b": 5, "c": 5}, "b": {"d": 5, "e": 5}},
        &rawdoc! {"sa": {"u": {"b": 6, "c": 7}}, "sb": {"u": {"d": 8, "e": 9}}},
    );
    check(
        &rawdoc! {"$set": {"a.b": 6, "a.c": 7, "b.d": 8, "b.e": 9}},
        &rawdoc! {"z": 0},
        &rawdoc! {"i": {"a": {"b": 6, "c": 7}, "b": {"d": 8, "e": 9}}},
    );
    check(
        &rawdoc! {"$set": {"a.b.c.d": 6, "a.b.c.e": 7, "a.f": 8}},
        &rawdoc! {"z": 0},
        &rawdoc! {"i": {"a": {"b": {"c": {"d": 6, "e": 7}}, "f": 8}}},
    );
    check(
        &rawdoc! {"$set": {"a": 5, "d": 6, "c": 7, "b": 8, "z": 9}},
        &rawdoc! {"z": 0, "a": 0},
        &rawdoc! {"u": {"a": 5, "z": 9}, "i": {"b": 8, "c": 7, "d": 6}},
    );
    check(
        &rawdoc! {"$set": {"a": 5, "b": 6, "c": 7}},
        &rawdoc! {"a": 5, "b": 0, "c": 7},
        &rawdoc! {"u": {"b": 6}},
    );
    // The positional child merged with the matched element's.
    check_full(
        &rawdoc! {"$set": {"a.0.b": 5, "a.$.c": 6}},
        None,
        Some(&rawdoc! {"a.b": 0}),
        &rawdoc! {"a": [{"b": 0, "c": 0}]},
        &rawdoc! {"sa": {"a": true, "s0": {"u": {"b": 5, "c": 6}}}},
    );
}

fn pipeline(stages: &RawDocumentBuf) -> Update {
    Update::compile_pipeline(stages.get_array("p").unwrap()).unwrap()
}

#[test]
fn pipelines_log_the_diff_of_the_images_or_a_replacement() {
    let pre = rawdoc! {"_id": 1, "a": 1, "s": "a string long enough for a diff to be smaller"};
    let update = pipeline(&rawdoc! {"p": [{"$set": {"a": 2}}]});
    let (new, logged) = update
        .apply_logged(&pre, &UpdateContext::at(0))
        .unwrap()
        .unwrap();
    let Logged::Diff(o) = logged else {
        panic!("a replacement");
    };
    assert_eq!(o, rawdoc! {"$v": 2, "diff": {"u": {"a": 2}}});
    assert_eq!(
        apply_diff(&pre, o.get_document("diff").unwrap()).unwrap(),
        new
    );
    // The diff of a pipeline is structural: a longer array is an array diff.
    let pre = rawdoc! {"_id": 1, "a": [1, 2], "s": "a string long enough for a diff to be smaller"};
    let update = pipeline(&rawdoc! {"p": [{"$set": {"a": {"$concatArrays": ["$a", [3]]}}}]});
    let (_, logged) = update
        .apply_logged(&pre, &UpdateContext::at(0))
        .unwrap()
        .unwrap();
    assert_eq!(
        logged,
        Logged::Diff(rawdoc! {"$v": 2, "diff": {"sa": {"a": true, "u2": 3}}})
    );
    // A diff not smaller than the new document: a replacement.
    let update = pipeline(&rawdoc! {"p": [{"$replaceWith": {"_id": 1, "z": 1}}]});
    let (new, logged) = update
        .apply_logged(&rawdoc! {"_id": 1, "a": 1}, &UpdateContext::at(0))
        .unwrap()
        .unwrap();
    assert_eq!(logged, Logged::Replacement);
    assert_eq!(new, rawdoc! {"_id": 1, "z": 1});
    // Unchanged: nothing.
    let update = pipeline(&rawdoc! {"p": [{"$set": {"a": 1}}]});
    assert!(
        update
            .apply_logged(&rawdoc! {"_id": 1, "a": 1}, &UpdateContext::at(0))
            .unwrap()
            .is_none()
    );
}

#[test]
fn replacements_log_the_new_document() {
    let update = Update::compile(&rawdoc! {"b": 1}).unwrap();
    let (new, logged) = update
        .apply_logged(&rawdoc! {"_id": 1, "a": 1}, &UpdateContext::at(0))
        .unwrap()
        .unwrap();
    assert_eq!(logged, Logged::Replacement);
    assert_eq!(new, rawdoc! {"_id": 1, "b": 1});
    assert!(
        update
            .apply_logged(&rawdoc! {"_id": 1, "b": 1}, &UpdateContext::at(0))
            .unwrap()
            .is_none()
    );
}

#[test]
fn errors_are_those_of_apply() {
    let update = Update::compile(&rawdoc! {"$inc": {"a": 1}}).unwrap();
    let pre = rawdoc! {"_id": 1, "a": "x"};
    let logged = update
        .apply_logged(&pre, &UpdateContext::at(0))
        .unwrap_err();
    let plain = update.apply_with(&pre, &UpdateContext::at(0)).unwrap_err();
    assert_eq!(logged.code, plain.code);
    assert_eq!(logged.errmsg, plain.errmsg);
}

// ---------------------------------------------------------------------------------------------
// Property: for random documents and operator updates, `apply_logged` gives what `apply_with`
// gives, and its diff applied to the pre-image is the new document, byte for byte.

const KEYS: [&str; 3] = ["a", "b", "c"];
const PARTS: [&str; 10] = ["b", "c", "0", "1", "3", "$", "$[]", "$[]", "$[x]", "$[y]"];
/// Statement filters, for the positional `$`.
const QUERIES: [&str; 3] = ["a", "b.b", "c"];

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        (-2..3_i32).prop_map(Bson::Int32),
        (-2..3_i64).prop_map(Bson::Int64),
        prop_oneof![Just(0.0), Just(1.5), Just(-2.0)].prop_map(Bson::Double),
        "[a-c]{0,2}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
    ]
}

/// Values whose paths the updates below often reach: arrays and documents with the fields
/// `b` and `c`.
fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            (
                proptest::option::of(inner.clone()),
                proptest::option::of(inner)
            )
                .prop_map(|(b, c)| {
                    let mut d = Document::new();
                    if let Some(b) = b {
                        d.insert("b", b);
                    }
                    if let Some(c) = c {
                        d.insert("c", c);
                    }
                    Bson::Document(d)
                }),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    proptest::collection::vec((0..KEYS.len(), value()), 0..5).prop_map(|fields| {
        let mut d = doc! {"_id": 1};
        for (k, v) in fields {
            d.insert(KEYS[k], v);
        }
        d
    })
}

fn path() -> impl Strategy<Value = String> {
    (
        0..KEYS.len(),
        proptest::collection::vec(0..PARTS.len(), 0..3),
    )
        .prop_map(|(first, rest)| {
            let mut path = KEYS[first].to_owned();
            for p in rest {
                path.push('.');
                path.push_str(PARTS[p]);
            }
            path
        })
}

/// One `(operator, path, argument)`.
fn operation() -> impl Strategy<Value = (&'static str, String, Bson)> {
    let int = (-3..4_i32).prop_map(Bson::Int32);
    prop_oneof![
        (path(), value()).prop_map(|(p, v)| ("$set", p, v)),
        path().prop_map(|p| ("$unset", p, Bson::Int32(1))),
        (path(), int.clone()).prop_map(|(p, v)| ("$inc", p, v)),
        (path(), int.clone()).prop_map(|(p, v)| ("$mul", p, v)),
        (path(), scalar()).prop_map(|(p, v)| ("$min", p, v)),
        (path(), scalar()).prop_map(|(p, v)| ("$max", p, v)),
        path().prop_map(|p| ("$currentDate", p, Bson::Boolean(true))),
        (path(), value()).prop_map(|(p, v)| ("$push", p, v)),
        (
            path(),
            proptest::collection::vec(scalar(), 0..3),
            proptest::option::of(-3..4_i64),
            proptest::option::of(-3..4_i32),
            any::<bool>()
        )
            .prop_map(|(p, each, position, slice, sort)| {
                let mut spec = doc! {"$each": each};
                if let Some(position) = position {
                    spec.insert("$position", position);
                }
                if let Some(slice) = slice {
                    spec.insert("$slice", slice);
                }
                if sort {
                    spec.insert("$sort", 1);
                }
                ("$push", p, Bson::Document(spec))
            }),
        (path(), scalar()).prop_map(|(p, v)| ("$addToSet", p, v)),
        (path(), prop_oneof![Just(1), Just(-1)]).prop_map(|(p, v)| ("$pop", p, Bson::Int32(v))),
        (path(), scalar()).prop_map(|(p, v)| ("$pull", p, v)),
        (path(), proptest::collection::vec(scalar(), 0..3)).prop_map(|(p, v)| (
            "$pullAll",
            p,
            Bson::Array(v)
        )),
        (path(), 0..8_i32).prop_map(|(p, v)| ("$bit", p, Bson::Document(doc! {"xor": v}))),
        (path(), path()).prop_map(|(p, to)| ("$rename", p, Bson::String(to))),
        (path(), scalar()).prop_map(|(p, v)| ("$setOnInsert", p, v)),
    ]
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn the_logged_diff_applies_to_the_new_document(
        pre in document(),
        operations in proptest::collection::vec(operation(), 1..5),
        query in (0..QUERIES.len(), 0..3_i32),
    ) {
        let mut update = Document::new();
        for (operator, path, arg) in operations {
            if !update.contains_key(operator) {
                update.insert(operator, Document::new());
            }
            if let Ok(fields) = update.get_document_mut(operator) {
                fields.insert(path, arg);
            }
        }
        let text = update.to_string();
        let update = raw(&update);
        // Only the filters the paths use (an unused one is an error).
        let mut filters = Vec::new();
        if text.contains("$[x]") {
            filters.push(Bson::Document(doc! {"x": {"$gte": 1}}));
        }
        if text.contains("$[y]") {
            filters.push(Bson::Document(doc! {"y.b": {"$exists": true}}));
        }
        let filters = raw(&doc! {"f": filters});
        let Ok(compiled) = Update::compile_with_array_filters(
            &update,
            Some(filters.get_array("f").unwrap()),
        ) else {
            return Ok(());
        };
        let pre = raw(&pre);
        let query = raw(&doc! {QUERIES[query.0]: {"$gte": query.1}});
        let filter = Filter::compile(&query).unwrap();
        let mut ctx = UpdateContext::at(1_000);
        ctx.filter = Some(&filter);
        let logged = compiled.apply_logged(&pre, &ctx);
        let plain = compiled.apply_with(&pre, &ctx);
        match (logged, plain) {
            (Err(a), Err(b)) => prop_assert_eq!(a.errmsg, b.errmsg),
            (Ok(None), Ok(None)) => {}
            (Ok(Some((new, logged))), Ok(Some(plain))) => {
                prop_assert_eq!(&new, &plain);
                let Logged::Diff(o) = logged else {
                    return Err(TestCaseError::fail(format!("{text}: a replacement")));
                };
                let diff = o.get_document("diff").unwrap();
                prop_assert!(!diff.is_empty(), "{}: empty diff over {}", text, show(&pre));
                let applied = apply_diff(&pre, diff)
                    .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                prop_assert_eq!(
                    applied.as_bytes(),
                    new.as_bytes(),
                    "{} over {}: {} gives {}, not {}",
                    text,
                    show(&pre),
                    show(&o),
                    show(&applied),
                    show(&new)
                );
                prop_assert!(crate::oplog::update_description(diff).is_ok());
            }
            (a, b) => {
                return Err(TestCaseError::fail(format!(
                    "{text}: apply_logged {:?} but apply_with {:?}",
                    a.map(|o| o.map(|(d, _)| show(&d))),
                    b.map(|o| o.map(|d| show(&d)))
                )));
            }
        }
    }
}
