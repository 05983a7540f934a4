//! Random writes between rounds, `validate`, and making the collections under test.

use bson::{Bson, Document, doc};
use mongodb::Database;

use crate::check::{Check, Coll};
use crate::common::TestResult;
use crate::common::rng::Rng;
use crate::generate::{FIELDS, chance, dec, pick, random_indexes, random_query, value};

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

/// The same number in another type (or another representation of it), if `v` is a number.
fn retyped(rng: &mut Rng, v: &Bson) -> Option<Bson> {
    Some(match v {
        Bson::Int32(n) => {
            if chance(rng, 50) {
                Bson::Int64(i64::from(*n))
            } else {
                Bson::Double(f64::from(*n))
            }
        }
        Bson::Int64(n) => match i32::try_from(*n) {
            Ok(small) if chance(rng, 50) => Bson::Int32(small),
            _ => dec(&n.to_string()),
        },
        Bson::Double(f) if *f == 0.0 => {
            if f.is_sign_negative() {
                pick(rng, &[Bson::Double(0.0), Bson::Int32(0), dec("-0")])
            } else {
                Bson::Double(-0.0)
            }
        }
        Bson::Double(f) if f.is_nan() => dec("NaN"),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 1e9 => {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "checked integral and small"
            )]
            let n = *f as i64;
            if chance(rng, 50) {
                Bson::Int64(n)
            } else {
                dec(&format!("{n}.0"))
            }
        }
        Bson::Double(f) if f.is_infinite() => dec(if *f > 0.0 { "Infinity" } else { "-Infinity" }),
        Bson::Decimal128(d) => {
            let s = d.to_string();
            match s.as_str() {
                "1.0" => dec("1.00"),
                "1.00" => Bson::Int32(1),
                "1" => dec("1.0"),
                "2" | "2.0" => Bson::Double(2.0),
                "-0" | "0" | "0.0" | "-0.0" => Bson::Double(-0.0),
                "NaN" => Bson::Double(f64::NAN),
                "Infinity" => Bson::Double(f64::INFINITY),
                "0.5" => Bson::Double(0.5),
                "1.5" => Bson::Double(1.5),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// `n` random writes; returns how many the server refused.
pub(crate) async fn mutate(check: &mut Check, coll: &mut Coll, n: usize) -> TestResult<usize> {
    let c = coll.db.collection::<Document>(&coll.name);
    let mut refused = 0;
    for _ in 0..n {
        let rng = &mut check.rng;
        let id = i32::try_from(rng.below(usize::try_from(coll.next_id).unwrap_or(1))).unwrap_or(0);
        let field = pick(rng, &FIELDS);
        let arrays = coll.arrays.contains(&field);
        let result = match rng.below(12) {
            0..=2 => c
                .update_one(
                    doc! { "_id": id },
                    doc! { "$set": { field: value(rng, arrays) } },
                )
                .await
                .map(|_| ()),
            3 | 4 => {
                // The same number in another type: a key kept, its value changed.
                let Some(d) = c.find_one(doc! { "_id": id }).await? else {
                    continue;
                };
                let current = match field {
                    "d.x" => d.get_document("d").ok().and_then(|d| d.get("x")).cloned(),
                    f => d.get(f).cloned(),
                };
                let Some(new) = current.and_then(|v| retyped(rng, &v)) else {
                    continue;
                };
                check.note("writes: same number, other type");
                c.update_one(doc! { "_id": id }, doc! { "$set": { field: new } })
                    .await
                    .map(|_| ())
            }
            5 => {
                let by = pick(
                    rng,
                    &[Bson::Double(1.0), Bson::Int64(1), Bson::Int32(1), dec("1")],
                );
                let filter = if chance(rng, 70) {
                    doc! { "_id": id, field: { "$type": "number" } }
                } else {
                    doc! { field: { "$type": "number" }, "_id": { "$gte": id, "$lt": id + 20 } }
                };
                c.update_many(filter, doc! { "$mul": { field: by } })
                    .await
                    .map(|_| ())
            }
            6 => c
                .update_one(doc! { "_id": id }, doc! { "$unset": { field: 1 } })
                .await
                .map(|_| ()),
            7 => {
                let d = coll.new_doc(rng, id);
                c.replace_one(doc! { "_id": id }, d).await.map(|_| ())
            }
            8 => c.delete_one(doc! { "_id": id }).await.map(|_| ()),
            9 => {
                let d = coll.new_doc(rng, coll.next_id);
                coll.next_id += 1;
                c.insert_one(d).await.map(|_| ())
            }
            10 => {
                let q = random_query(rng, &coll.focus(), &coll.keys(), &[]);
                let v = value(rng, arrays);
                c.update_many(q, doc! { "$set": { field: v } })
                    .await
                    .map(|_| ())
            }
            _ => {
                let d = coll.new_doc(rng, id);
                c.replace_one(doc! { "_id": id }, d)
                    .upsert(true)
                    .await
                    .map(|_| ())
            }
        };
        if result.is_err() {
            refused += 1;
        }
    }
    Ok(refused)
}

pub(crate) async fn assert_valid(coll: &Coll) -> TestResult {
    let v = coll
        .db
        .run_command(doc! { "validate": coll.name.clone(), "full": true })
        .await?;
    assert!(
        v.get_bool("valid")?,
        "validate {} ({}): {v}",
        coll.name,
        coll.describe()
    );
    Ok(())
}

/// How a collection under test is made.
pub(crate) struct Setup {
    pub(crate) name: &'static str,
    /// Fields that may hold arrays (their indexes become multikey).
    pub(crate) arrays: Vec<&'static str>,
    pub(crate) docs: usize,
    /// An index besides the random ones (a TTL index).
    pub(crate) extra_index: Option<Document>,
    /// Whether the indexes are built over the loaded documents (else maintained as they come).
    pub(crate) index_after: bool,
    pub(crate) decorate: fn(&mut Rng, &mut Document),
}

impl Setup {
    pub(crate) fn new(name: &'static str, arrays: Vec<&'static str>, docs: usize) -> Setup {
        Setup {
            name,
            arrays,
            docs,
            extra_index: None,
            index_after: false,
            decorate: |_, _| {},
        }
    }
}

pub(crate) async fn create(check: &mut Check, db: &Database, setup: Setup) -> TestResult<Coll> {
    let n = 2 + check.rng.below(3);
    let indexes = random_indexes(&mut check.rng, n);
    let mut coll = Coll {
        db: db.clone(),
        name: setup.name.to_owned(),
        arrays: setup.arrays,
        indexes: indexes.clone(),
        next_id: 0,
        ttl: setup.extra_index.is_some(),
        extra: setup.extra_index.clone(),
        decorate: setup.decorate,
    };
    let mut all = indexes;
    all.extend(setup.extra_index);
    let build = doc! { "createIndexes": setup.name, "indexes": all };
    if !setup.index_after {
        db.run_command(build.clone()).await?;
    }
    let c = db.collection::<Document>(setup.name);
    let mut batch = Vec::new();
    for _ in 0..setup.docs {
        batch.push(coll.new_doc(&mut check.rng, coll.next_id));
        coll.next_id += 1;
    }
    // Some documents may be refused (parallel arrays under a compound index): unordered.
    let _ = c.insert_many(batch).ordered(false).await;
    if setup.index_after {
        // (Parallel arrays may refuse the build: then those indexes are made first, and the
        // documents that cannot be indexed are refused instead.)
        if db.run_command(build.clone()).await.is_err() {
            c.delete_many(doc! {}).await?;
            db.run_command(build).await?;
            let mut batch = Vec::new();
            for id in 0..coll.next_id {
                batch.push(coll.new_doc(&mut check.rng, id));
            }
            let _ = c.insert_many(batch).ordered(false).await;
        }
    }
    eprintln!("{}", coll.describe());
    Ok(coll)
}
