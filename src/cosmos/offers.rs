//! Provisioned throughput ("offers"): how many request units a second a database or a
//! collection may spend, as Cosmos DB's extension commands set it (`customAction`
//! `CreateDatabase`, `CreateCollection`, `UpdateDatabase`, `UpdateCollection`).

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

/// The offers of every database and collection.
#[derive(Debug, Default)]
pub struct Offers {}

impl Offers {
    /// The budget that commands on `db.collection` (or on `db` alone, when `collection` is
    /// `None`) spend.
    pub fn budget(&self, db: &str, collection: Option<&str>) -> Budget {
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
