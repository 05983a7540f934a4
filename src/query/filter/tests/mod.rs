//! The filter's tests, one file per concept (the tables of operators mongod documents).

use super::*;
use crate::error::ErrorCode;
use crate::query::testutil::regex;
use bson::{RawDocumentBuf, rawdoc};

fn matches(filter: &RawDocumentBuf, doc: &RawDocumentBuf) -> bool {
    Filter::compile(filter).unwrap().matches(doc)
}

fn collation(spec: &RawDocumentBuf) -> Option<Arc<Collation>> {
    Collation::parse(spec).unwrap().map(Arc::new)
}

fn check(cases: &[(RawDocumentBuf, RawDocumentBuf, bool)]) {
    for (filter, doc, want) in cases {
        let f = Filter::compile(filter).unwrap_or_else(|e| panic!("{filter:?}: {e:?}"));
        assert_eq!(f.matches(doc), *want, "{filter:?} on {doc:?}");
    }
}

fn bin(bytes: &[u8]) -> RawBson {
    RawBson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

fn dec(s: &str) -> RawBson {
    RawBson::Decimal128(s.parse().unwrap())
}

mod api;
mod arrays;
mod bits;
mod collation;
mod comparison;
mod errors;
mod expr;
mod regexes;
mod types;
