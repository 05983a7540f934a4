//! Provisioned throughput ("offers"): how many request units a second a database or a
//! collection may spend, as Cosmos DB's extension commands set it (`customAction`
//! `CreateDatabase`, `CreateCollection`, `UpdateDatabase`, `UpdateCollection`).
//!
//! Each database created by `CreateDatabase`, and each collection given a throughput or a shard
//! key, has a record in the catalog's storage ([`crate::catalog::offer_key`]): written in the
//! commit that creates the collection, removed in the commit that drops it (or its database),
//! moved by a rename. Nothing is cached: every read goes to the store, so what a restart
//! reloads is what was answered before it.

use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf, rawdoc};

use crate::catalog::Catalog;

/// What a budget of request units belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Throughput shared by the collections of a database that have none of their own.
    Database(String),
    /// A collection's own (dedicated) throughput: `(db, collection)`.
    Collection(String, String),
}

/// The throughput a command's request units count against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// Whose budget it is.
    pub scope: Scope,
    /// Request units a second provisioned (for autoscale, the most it scales to).
    pub ru_per_second: u32,
    /// Whether it is autoscale (scales between 10% and 100% of `ru_per_second`).
    pub autoscale: bool,
}

/// Cosmos DB's default throughput for a collection created without one.
pub const DEFAULT_RU_PER_SECOND: u32 = 400;

/// Provisioned throughput: manual (`offerThroughput`) or autoscale
/// (`autoScaleSettings.maxThroughput`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// Request units a second (for autoscale, the most it scales to).
    pub ru_per_second: u32,
    /// Whether it is autoscale.
    pub autoscale: bool,
    /// The highest value ever provisioned (Cosmos DB's floor for a decrease derives from it).
    pub highest: u32,
}

impl Offer {
    /// A new manual or autoscale offer of `ru_per_second`.
    pub fn new(ru_per_second: u32, autoscale: bool) -> Offer {
        Offer {
            ru_per_second,
            autoscale,
            highest: ru_per_second,
        }
    }

    /// What `provisionedThroughput` reports: the manual value, or for autoscale the 10% it
    /// scales down to.
    pub fn provisioned(&self) -> u32 {
        if self.autoscale {
            self.ru_per_second / 10
        } else {
            self.ru_per_second
        }
    }
}

/// The profile's record of a database or a collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Its own throughput, if it has one (a collection without one shares its database's).
    pub offer: Option<Offer>,
    /// A collection's shard key path (`shardKey`), as given.
    pub shard_key: Option<String>,
}

impl Record {
    /// The record as stored.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut doc = RawDocumentBuf::new();
        if let Some(offer) = self.offer {
            doc.append(bson::raw::cstr!("ru"), i64::from(offer.ru_per_second));
            doc.append(bson::raw::cstr!("autoscale"), offer.autoscale);
            doc.append(bson::raw::cstr!("highest"), i64::from(offer.highest));
        }
        if let Some(key) = &self.shard_key {
            doc.append(bson::raw::cstr!("shardKey"), key.as_str());
        }
        doc.into_bytes()
    }

    /// A stored record; `None` if it does not read as one (never written by this build).
    pub fn from_bytes(bytes: &[u8]) -> Option<Record> {
        let doc = RawDocument::from_bytes(bytes).ok()?;
        let offer = match doc.get_i64("ru") {
            Ok(ru) => {
                let ru_per_second = u32::try_from(ru).ok()?;
                Some(Offer {
                    ru_per_second,
                    autoscale: doc.get_bool("autoscale").ok()?,
                    highest: doc
                        .get_i64("highest")
                        .ok()
                        .and_then(|h| u32::try_from(h).ok())
                        .unwrap_or(ru_per_second),
                })
            }
            Err(_) => None,
        };
        let shard_key = doc.get_str("shardKey").ok().map(str::to_owned);
        Some(Record { offer, shard_key })
    }
}

/// The offers of every database and collection, read from the catalog's storage.
#[derive(Debug)]
pub struct Offers {
    catalog: Arc<Catalog>,
}

impl Offers {
    /// The offers kept in `catalog`.
    pub fn new(catalog: Arc<Catalog>) -> Offers {
        Offers { catalog }
    }

    /// The record of database `db` (`collection` `None`) or of collection `db.collection`.
    pub fn record(&self, db: &str, collection: Option<&str>) -> Option<Record> {
        match self.catalog.offer(db, collection) {
            Ok(bytes) => bytes.and_then(|b| Record::from_bytes(&b)),
            Err(e) => {
                tracing::error!(error = %e, "reading a Cosmos DB offer");
                None
            }
        }
    }

    /// The budget that commands on `db.collection` (or on `db` alone, when `collection` is
    /// `None`) spend: the collection's dedicated throughput if it has one, else its
    /// database's shared throughput, else the default a collection gets when it is created
    /// without one, implicitly too (400 RU/s, its own: "This type of configuration also
    /// applies when creating new collections via the `insert()` function", Microsoft's page of
    /// extension commands).
    pub fn budget(&self, db: &str, collection: Option<&str>) -> Budget {
        if let Some(c) = collection
            && let Some(offer) = self.record(db, Some(c)).and_then(|r| r.offer)
        {
            return Budget {
                scope: Scope::Collection(db.to_owned(), c.to_owned()),
                ru_per_second: offer.ru_per_second,
                autoscale: offer.autoscale,
            };
        }
        if let Some(offer) = self.record(db, None).and_then(|r| r.offer) {
            return Budget {
                scope: Scope::Database(db.to_owned()),
                ru_per_second: offer.ru_per_second,
                autoscale: offer.autoscale,
            };
        }
        Budget {
            scope: match collection {
                Some(c) => Scope::Collection(db.to_owned(), c.to_owned()),
                None => Scope::Database(db.to_owned()),
            },
            ru_per_second: DEFAULT_RU_PER_SECOND,
            autoscale: false,
        }
    }
}

/// `autoScaleSettings` as `Get*` replies show it.
pub fn autoscale_settings(offer: &Offer) -> RawDocumentBuf {
    rawdoc! { "maxThroughput": i32::try_from(offer.ru_per_second).unwrap_or(i32::MAX) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        for record in [
            Record::default(),
            Record {
                offer: Some(Offer::new(1000, false)),
                shard_key: None,
            },
            Record {
                offer: Some(Offer {
                    ru_per_second: 4000,
                    autoscale: true,
                    highest: 20000,
                }),
                shard_key: Some("a.b".into()),
            },
        ] {
            assert_eq!(Record::from_bytes(&record.to_bytes()), Some(record));
        }
        assert_eq!(Record::from_bytes(b"junk"), None);
    }

    fn offers() -> Offers {
        let store = Arc::new(crate::storage::GroupCommit::new(Arc::new(
            crate::storage::MemoryStorage::new(),
        )));
        Offers::new(Arc::new(Catalog::open(store).unwrap()))
    }

    fn put(offers: &Offers, db: &str, collection: Option<&str>, record: &Record) {
        let bytes = record.to_bytes();
        offers
            .catalog
            .change_offer(db, collection, |_, _| Ok(Some(bytes)))
            .unwrap();
    }

    #[test]
    fn budget_is_the_collection_s_then_the_database_s_then_the_default() {
        let offers = offers();
        let dedicated = |db: &str, c: &str, ru, autoscale| Budget {
            scope: Scope::Collection(db.into(), c.into()),
            ru_per_second: ru,
            autoscale,
        };
        // Nothing provisioned (a collection created by an insert): 400 RU/s of its own.
        assert_eq!(
            offers.budget("d", Some("c")),
            dedicated("d", "c", 400, false)
        );
        put(
            &offers,
            "d",
            None,
            &Record {
                offer: Some(Offer::new(20000, true)),
                shard_key: None,
            },
        );
        let shared = Budget {
            scope: Scope::Database("d".into()),
            ru_per_second: 20000,
            autoscale: true,
        };
        assert_eq!(offers.budget("d", Some("c")), shared);
        assert_eq!(offers.budget("d", None), shared);
        // A shard key alone gives no throughput of its own.
        put(
            &offers,
            "d",
            Some("k"),
            &Record {
                offer: None,
                shard_key: Some("a".into()),
            },
        );
        assert_eq!(offers.budget("d", Some("k")), shared);
        put(
            &offers,
            "d",
            Some("c"),
            &Record {
                offer: Some(Offer::new(1000, false)),
                shard_key: None,
            },
        );
        assert_eq!(
            offers.budget("d", Some("c")),
            dedicated("d", "c", 1000, false)
        );
        assert_eq!(
            offers.budget("other", None).ru_per_second,
            DEFAULT_RU_PER_SECOND
        );
    }

    #[test]
    fn autoscale_provisions_a_tenth() {
        assert_eq!(Offer::new(20000, true).provisioned(), 2000);
        assert_eq!(Offer::new(1200, false).provisioned(), 1200);
    }
}
