//! One query, every way: as planned and as a collection scan, through `find`, `count`,
//! counting pipelines and `distinct`.

use bson::{Bson, Document, doc};
use mongodb::Database;
use mongodb::options::Hint;

use crate::check::{
    Check, Coll, bytes_of, canonical, command, cursor, docs_diff, error_text, find_doc, num,
    plan_index, plan_stages, planner_explain, show_docs, show_values, stage_named, values_diff,
};
use crate::generate::{FIELDS, chance, natural, naturally, pick, random_projection, random_query};
use crate::{scale, strict};

// ---------------------------------------------------------------------------------------------
// One query, every way
// ---------------------------------------------------------------------------------------------

async fn check_query(check: &mut Check, coll: &Coll, q: &Document) {
    let db = &coll.db;
    let name = coll.name.as_str();
    check.note("queries");
    // Now and then a collation (strings compare case-insensitively): index-only plans must
    // still answer as scans do.
    let collation = chance(&mut check.rng, 10).then(|| doc! { "locale": "en", "strength": 2 });
    let col = |mut cmd: Document| {
        if let Some(c) = &collation {
            cmd.insert("collation", c.clone());
        }
        cmd
    };

    // `find`, whole documents.
    let batch = pick(&mut check.rng, &[2_i32, 5, 101]);
    let cmd = col(doc! { "find": name, "filter": q.clone(), "batchSize": batch });
    let got = cursor(db, cmd.clone()).await;
    let want = cursor(db, naturally(&cmd)).await;
    let find_explain = planner_explain(db, &col(doc! { "find": name, "filter": q.clone() })).await;
    let find_stages = plan_stages(&find_explain);
    if canonical(&got, false) != canonical(&want, false) {
        let (g, w) = docs_diff(&got, &want);
        check
            .fail(coll, "find", &cmd, g, w, Some(find_explain.clone()))
            .await;
    } else if got.as_ref().is_ok_and(|d| !d.is_empty()) {
        if find_stages.iter().any(|s| s == "OR") {
            check.note("find via OR union (non-empty)");
        } else if find_stages.iter().any(|s| s == "IXSCAN") {
            check.note("find via IXSCAN (non-empty)");
        }
    }

    // `find` with a projection of the chosen index's fields.
    let chosen = find_doc(&find_explain, "winningPlan")
        .and_then(plan_index)
        .and_then(|n| {
            coll.indexes
                .iter()
                .find(|s| s.get_str("name").ok() == Some(n.as_str()))
        });
    let projection = random_projection(&mut check.rng, chosen);
    let cmd = col(
        doc! { "find": name, "filter": q.clone(), "projection": projection.clone(), "batchSize": batch },
    );
    let got = cursor(db, cmd.clone()).await;
    let want = cursor(db, naturally(&cmd)).await;
    if canonical(&got, true) == canonical(&want, true) {
        let e = planner_explain(db, &cmd).await;
        if plan_stages(&e).iter().any(|s| s == "PROJECTION_COVERED") {
            let what = if got.as_ref().is_ok_and(|d| !d.is_empty()) {
                "find PROJECTION_COVERED (non-empty)"
            } else {
                "find PROJECTION_COVERED (empty)"
            };
            check.index_only(coll, what, &cmd);
        }
    } else {
        let (g, w) = docs_diff(&got, &want);
        check.fail(coll, "find projected", &cmd, g, w, None).await;
    }

    // With skip and limit (no sort: which documents is the plan's business, how many is not,
    // and each is one of the whole answer's).
    if let Ok(all) = &want {
        let skip = check.rng.below(4);
        let limit = 1 + check.rng.below(6);
        let mut cmd = cmd.clone();
        cmd.insert("skip", i64::try_from(skip).unwrap_or(0));
        cmd.insert("limit", i64::try_from(limit).unwrap_or(0));
        let got = cursor(db, cmd.clone()).await;
        let expect = all.len().saturating_sub(skip).min(limit);
        let pool = canonical(&want, true).unwrap_or_default();
        let fits = got.as_ref().is_ok_and(|g| {
            g.len() == expect && {
                let mut pool = pool.clone();
                canonical(&got, true).unwrap_or_default().iter().all(|d| {
                    pool.iter()
                        .position(|p| p == d)
                        .map(|i| pool.swap_remove(i))
                        .is_some()
                })
            }
        });
        if !fits {
            check
                .fail(
                    coll,
                    &format!("find projected, skip {skip} limit {limit}: {expect} of the whole answer wanted"),
                    &cmd,
                    show_docs(&got),
                    show_docs(&want),
                    None,
                )
                .await;
        }
    }

    // The same hinted to an index (neither sparse nor partial, so that it holds every
    // document): bounds on later key fields are checked entry by entry, and may still decide
    // the filter.
    let plain: Vec<&Document> = coll
        .indexes
        .iter()
        .filter(|s| !s.contains_key("sparse") && !s.contains_key("partialFilterExpression"))
        .collect();
    if !plain.is_empty() {
        let spec = pick(&mut check.rng, &plain);
        let index = spec.get_str("name").unwrap_or_default().to_owned();
        let projection = random_projection(&mut check.rng, Some(spec));
        let cmd = col(
            doc! { "find": name, "filter": q.clone(), "projection": projection, "hint": index.clone(), "batchSize": batch },
        );
        let got = cursor(db, cmd.clone()).await;
        let want = cursor(db, naturally(&cmd)).await;
        if canonical(&got, true) == canonical(&want, true) {
            let e = planner_explain(db, &cmd).await;
            if plan_stages(&e).iter().any(|s| s == "PROJECTION_COVERED")
                && got.as_ref().is_ok_and(|d| !d.is_empty())
            {
                check.index_only(
                    coll,
                    "find PROJECTION_COVERED, hinted index (non-empty)",
                    &cmd,
                );
            }
        } else {
            let (g, w) = docs_diff(&got, &want);
            check
                .fail(coll, "find projected, hinted index", &cmd, g, w, None)
                .await;
        }
        let cmd = col(doc! { "count": name, "query": q.clone(), "hint": index });
        let got = command(db, cmd.clone()).await.map(|r| num(&r, "n"));
        let want = command(db, naturally(&cmd)).await.map(|r| num(&r, "n"));
        if got != want {
            check
                .fail(
                    coll,
                    "count, hinted index",
                    &cmd,
                    format!("{got:?}"),
                    format!("{want:?}"),
                    None,
                )
                .await;
        } else if got.as_ref().is_ok_and(|n| n.unwrap_or(0) > 0) {
            let e = planner_explain(db, &cmd).await;
            if !plan_stages(&e).iter().any(|s| s == "FETCH") {
                check.index_only(coll, "count from keys, hinted index (n > 0)", &cmd);
            }
        }
    }

    // `count`, with skip and limit.
    let (skip, limit) = pick(
        &mut check.rng,
        &[(0, 0), (0, 0), (3, 0), (0, 5), (2, 4), (0, -3)],
    );
    let mut cmd = col(doc! { "count": name, "query": q.clone() });
    if skip > 0 {
        cmd.insert("skip", skip);
    }
    if limit != 0 {
        cmd.insert("limit", limit);
    }
    let got = command(db, cmd.clone()).await.map(|r| num(&r, "n"));
    let want = command(db, naturally(&cmd)).await.map(|r| num(&r, "n"));
    if got != want {
        check
            .fail(
                coll,
                "count",
                &cmd,
                format!("{got:?}"),
                format!("{want:?}"),
                None,
            )
            .await;
    } else if let Ok(Some(n)) = got {
        let e = command(
            db,
            doc! { "explain": cmd.clone(), "verbosity": "executionStats" },
        )
        .await
        .unwrap_or_default();
        let s = plan_stages(&e);
        let examined = find_doc(&e, "executionStats").and_then(|s| num(s, "totalDocsExamined"));
        let keys_only = !s.iter().any(|s| s == "FETCH" || s == "COLLSCAN");
        if keys_only {
            if examined != Some(0) {
                check
                    .fail(
                        coll,
                        "count from keys examined documents",
                        &cmd,
                        format!("{examined:?}"),
                        "0".to_owned(),
                        Some(e),
                    )
                    .await;
            } else if n > 0 {
                let what = if s.iter().any(|s| s == "COUNT_SCAN") {
                    "count COUNT_SCAN, 0 docs examined (n > 0)"
                } else {
                    "count keys only IXSCAN, 0 docs examined (n > 0)"
                };
                check.index_only(coll, what, &cmd);
            } else {
                check.index_only(coll, "count from keys (n = 0)", &cmd);
            }
        } else if n > 0 && s.iter().any(|s| s == "OR") {
            check.note("count via OR union (n > 0)");
        }
    }

    // The driver's `countDocuments` (`$match`, `$skip`, `$limit`, `$group {_id: 1, n: {$sum:
    // 1}}`).
    let c = db.collection::<Document>(name);
    let mut planned = c.count_documents(q.clone());
    let mut scanned = c.count_documents(q.clone()).hint(Hint::Keys(natural()));
    if collation.is_some() {
        let en = mongodb::options::Collation::builder()
            .locale("en")
            .strength(mongodb::options::CollationStrength::Secondary)
            .build();
        planned = planned.collation(en.clone());
        scanned = scanned.collation(en);
    }
    if skip > 0 {
        planned = planned.skip(u64::try_from(skip).unwrap_or(0));
        scanned = scanned.skip(u64::try_from(skip).unwrap_or(0));
    }
    if limit > 0 {
        planned = planned.limit(u64::try_from(limit).unwrap_or(0));
        scanned = scanned.limit(u64::try_from(limit).unwrap_or(0));
    }
    let got = planned.await.map_err(|e| error_text(&e));
    let want = scanned.await.map_err(|e| error_text(&e));
    if got != want {
        check
            .fail(
                coll,
                &format!("countDocuments skip {skip} limit {limit}"),
                &doc! { "countDocuments": name, "filter": q.clone() },
                format!("{got:?}"),
                format!("{want:?}"),
                None,
            )
            .await;
    }

    // Other pipelines that only count.
    let tail = match check.rng.below(4) {
        0 => vec![doc! { "$count": "n" }],
        1 => vec![doc! { "$group": { "_id": Bson::Null, "n": { "$sum": 2 } } }],
        2 => vec![
            doc! { "$skip": 1 },
            doc! { "$limit": 7 },
            doc! { "$group": { "_id": "k", "n": { "$sum": 1 }, "m": { "$sum": 0.5 } } },
        ],
        _ => vec![doc! { "$project": { "a": 1, "_id": 0 } }],
    };
    let mut pipeline = vec![doc! { "$match": q.clone() }];
    pipeline.extend(tail);
    let cmd = col(doc! { "aggregate": name, "pipeline": pipeline, "cursor": { "batchSize": 3 } });
    let got = cursor(db, cmd.clone()).await;
    let want = cursor(db, naturally(&cmd)).await;
    if canonical(&got, true) != canonical(&want, true) {
        let (g, w) = docs_diff(&got, &want);
        check.fail(coll, "aggregate", &cmd, g, w, None).await;
    } else if got.as_ref().is_ok_and(|d| !d.is_empty()) {
        let e = command(
            db,
            doc! { "explain": cmd.clone(), "verbosity": "executionStats" },
        )
        .await
        .unwrap_or_default();
        let s = plan_stages(&e);
        if !s.is_empty() && !s.iter().any(|s| s == "FETCH" || s == "COLLSCAN") {
            let examined = find_doc(&e, "executionStats").and_then(|s| num(s, "totalDocsExamined"));
            if examined == Some(0) || examined.is_none() {
                check.index_only(coll, "aggregate count from keys (non-empty)", &cmd);
            }
        }
    }

    // `distinct` on every field.
    for key in FIELDS {
        check_distinct(check, coll, q, key, collation.as_ref()).await;
    }
}

/// Whether `a` and `b` compare equal (as a collection scan's `$eq` decides, under `collation`),
/// through a scratch collection.
async fn server_equal(db: &Database, a: &Bson, b: &Bson, collation: Option<&Document>) -> bool {
    let scratch = db.collection::<Document>("scratch");
    if scratch
        .replace_one(doc! { "_id": 0 }, doc! { "_id": 0, "v": a.clone() })
        .upsert(true)
        .await
        .is_err()
    {
        return false;
    }
    let mut cmd =
        doc! { "count": "scratch", "query": { "v": { "$eq": b.clone() } }, "hint": natural() };
    if let Some(c) = collation {
        cmd.insert("collation", c.clone());
    }
    command(db, cmd)
        .await
        .is_ok_and(|r| num(&r, "n") == Some(1))
}

async fn check_distinct(
    check: &mut Check,
    coll: &Coll,
    q: &Document,
    key: &str,
    collation: Option<&Document>,
) {
    let db = &coll.db;
    let mut cmd = doc! { "distinct": coll.name.clone(), "key": key, "query": q.clone() };
    if let Some(c) = collation {
        cmd.insert("collation", c.clone());
    }
    let got = command(db, cmd.clone())
        .await
        .map(|r| r.get_array("values").cloned().unwrap_or_default());
    let want = command(db, naturally(&cmd))
        .await
        .map(|r| r.get_array("values").cloned().unwrap_or_default());
    let explain = planner_explain(db, &cmd).await;
    let s = plan_stages(&explain);
    let distinct_scan = s.iter().any(|s| s == "DISTINCT_SCAN");
    let (g, w) = match (&got, &want) {
        (Ok(g), Ok(w)) => (g, w),
        (Err(g), Err(w)) if g == w => return,
        _ => {
            check
                .fail(
                    coll,
                    &format!("distinct {key}"),
                    &cmd,
                    show_values(&got),
                    show_values(&want),
                    Some(explain),
                )
                .await;
            return;
        }
    };
    let differing: Vec<usize> = (0..g.len().max(w.len()))
        .filter(|&i| g.get(i).map(bytes_of) != w.get(i).map(bytes_of))
        .collect();
    if differing.is_empty() {
        if distinct_scan && s.iter().any(|s| s == "PROJECTION_COVERED") {
            let what = if g.is_empty() {
                "distinct DISTINCT_SCAN covered (empty)"
            } else {
                "distinct DISTINCT_SCAN covered (non-empty)"
            };
            check.index_only(coll, what, &cmd);
        } else if !g.is_empty() && distinct_scan {
            check.note("distinct DISTINCT_SCAN fetching (non-empty)");
        }
        return;
    }
    // Values that compare equal but differ in type: which one stands for them depends on
    // which document is met first, in the order the plan reads them.
    let mut representative = g.len() == w.len();
    for &i in &differing {
        if !representative {
            break;
        }
        representative = server_equal(db, &g[i], &w[i], collation).await;
    }
    let detail = values_diff(g, w);
    if representative && !distinct_scan {
        // An index scan (or a union of them) reads documents in key order, not in natural
        // order, as mongod does: another document's value may stand for equal ones.
        check.note("distinct: equal values, other type, index order (allowed)");
        return;
    }
    let compound = find_doc(&explain, "winningPlan")
        .and_then(|w| stage_named(w, "DISTINCT_SCAN"))
        .and_then(|d| d.get_document("keyPattern").ok())
        .is_some_and(|k| k.len() > 1);
    if representative && compound && !strict() {
        // Plan-dependent, as in mongod (see
        // `distinct_scan_on_compound_index_answers_an_equal_value`): under one value of its
        // first field, a compound index orders entries by its other fields, not by record id,
        // so DISTINCT_SCAN takes the type of another document than a collection scan's first.
        check.note("distinct: DISTINCT_SCAN on a compound index, other type (index order)");
        check.known.push(format!(
            "distinct {key} {q} on {}:{detail}",
            coll.describe()
        ));
        return;
    }
    let what = if representative {
        format!(
            "distinct {key}: DISTINCT_SCAN took another document's type for equal values:{detail}"
        )
    } else {
        format!("distinct {key}:{detail}")
    };
    check
        .fail(
            coll,
            &what,
            &cmd,
            show_values(&got),
            show_values(&want),
            Some(explain),
        )
        .await;
}

pub(crate) async fn query_round(check: &mut Check, coll: &Coll, queries: usize) {
    let focus = coll.focus();
    let partials = coll.partials();
    let keys = coll.keys();
    for _ in 0..queries * scale() {
        let q = random_query(&mut check.rng, &focus, &keys, &partials);
        check_query(check, coll, &q).await;
    }
}
