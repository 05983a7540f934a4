//! Request units: what a command is charged, estimated from the work it did
//! (`docs/cosmos-request-units.md` gives the formula and where its constants come from). The
//! work is counted by `crate::storage::tally`.

pub use crate::storage::tally::{Tally, Work, carry, counted, run};

/// The constants of the charge formula (`docs/cosmos-request-units.md`), settable with
/// `--cosmos-ru NAME=VALUE`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// A point read of a document of up to 1 KB (Microsoft: 1 RU).
    pub point_read: f64,
    /// Each KB read beyond the first of a point read, and each KB a query reads (Microsoft:
    /// 100 KB cost 10 RU, so 9 RU for 99 KB).
    pub read_kb: f64,
    /// A query's fixed cost (not published: what small queries are seen to cost).
    pub query: f64,
    /// Each document a query loads (not published).
    pub query_doc: f64,
    /// Each index entry a query reads (not published).
    pub index_read: f64,
    /// A write (insert, replace, delete) of a document of up to 1 KB (Microsoft: 5 RU).
    pub write: f64,
    /// Each KB written beyond the first of a document (Microsoft: 100 KB cost 50 RU, so 45 RU
    /// for 99 KB).
    pub write_kb: f64,
    /// Each index entry written beyond one per document (the `_id` one, in the write's cost).
    pub index_write: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            point_read: 1.0,
            read_kb: 9.0 / 99.0,
            query: 2.0,
            query_doc: 0.1,
            index_read: 0.01,
            write: 5.0,
            write_kb: 45.0 / 99.0,
            index_write: 0.5,
        }
    }
}

/// The names of the [`Rates`], as `--cosmos-ru` takes them.
pub const RATE_NAMES: [&str; 8] = [
    "point_read",
    "read_kb",
    "query",
    "query_doc",
    "index_read",
    "write",
    "write_kb",
    "index_write",
];

impl Rates {
    /// Sets the rate named `name` (one of [`RATE_NAMES`]).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!(
                "'{value}' is not a number of request units (0 or more)"
            ));
        }
        let slot = match name {
            "point_read" => &mut self.point_read,
            "read_kb" => &mut self.read_kb,
            "query" => &mut self.query,
            "query_doc" => &mut self.query_doc,
            "index_read" => &mut self.index_read,
            "write" => &mut self.write,
            "write_kb" => &mut self.write_kb,
            "index_write" => &mut self.index_write,
            _ => {
                return Err(format!(
                    "'{name}' is not a request-unit rate (one of {})",
                    RATE_NAMES.join(", ")
                ));
            }
        };
        *slot = value;
        Ok(())
    }

    /// The rates `settings` (`NAME=VALUE` pairs, later ones winning) make of the defaults.
    pub fn from_settings(settings: &[(String, f64)]) -> Result<Rates, String> {
        let mut rates = Rates::default();
        for (name, value) in settings {
            rates.set(name, *value)?;
        }
        Ok(rates)
    }

    /// The request units `work` costs, rounded to hundredths as Cosmos DB reports them.
    pub fn charge(&self, work: &Work) -> f64 {
        #[expect(
            clippy::cast_precision_loss,
            reason = "counts far below 2^52; an estimate"
        )]
        let f = |n: u64| n as f64;
        let kb = |bytes: u64| f(bytes) / 1024.0;
        let read = if work.docs_read == 0 && work.index_read == 0 && work.doc_scans == 0 {
            0.0
        } else if work.doc_scans == 0 && work.docs_read <= 1 && work.index_read <= 1 {
            // A point read: one key looked up, one document fetched.
            self.point_read + self.read_kb * (kb(work.bytes_read) - 1.0).max(0.0)
        } else {
            self.query
                + self.query_doc * f(work.docs_read)
                + self.read_kb * kb(work.bytes_read)
                + self.index_read * f(work.index_read)
        };
        let docs = work.docs_written.saturating_add(work.docs_deleted);
        let extra_kb = (kb(work.bytes_written) - f(work.docs_written)).max(0.0);
        let extra_index = work.index_written.saturating_sub(docs);
        let write =
            self.write * f(docs) + self.write_kb * extra_kb + self.index_write * f(extra_index);
        ((read + write) * 100.0).round() / 100.0
    }
}

impl Rates {
    /// [`Rates::charge`] for a command on a collection: at least a point read, which is what
    /// looking a key up costs even when nothing is found.
    pub fn charge_on_collection(&self, work: &Work) -> f64 {
        self.charge(work).max(self.point_read)
    }
}

/// Parses `--cosmos-ru NAME=VALUE`.
pub fn parse_setting(value: &str) -> Result<(String, f64), String> {
    let (name, number) = value
        .split_once('=')
        .ok_or_else(|| format!("'{value}' is not NAME=VALUE"))?;
    let number: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{number}' is not a number"))?;
    Rates::default().set(name.trim(), number)?;
    Ok((name.trim().to_owned(), number))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates() -> Rates {
        Rates::default()
    }

    /// Microsoft's published figures: a point read of 1 KB costs 1 RU and of 100 KB 10 RU; a
    /// write of 1 KB costs 5 RU and of 100 KB 50 RU.
    #[test]
    fn anchors_on_microsofts_figures() {
        let point = |bytes| Work {
            docs_read: 1,
            bytes_read: bytes,
            index_read: 1,
            ..Work::default()
        };
        assert!((rates().charge(&point(1024)) - 1.0).abs() < 1e-9);
        assert!((rates().charge(&point(100 * 1024)) - 10.0).abs() < 1e-9);
        assert!((rates().charge(&point(200)) - 1.0).abs() < 1e-9);
        let insert = |bytes| Work {
            docs_written: 1,
            bytes_written: bytes,
            index_written: 1,
            ..Work::default()
        };
        assert!((rates().charge(&insert(1024)) - 5.0).abs() < 1e-9);
        assert!((rates().charge(&insert(100 * 1024)) - 50.0).abs() < 1e-9);
        assert!((rates().charge(&insert(100)) - 5.0).abs() < 1e-9);
    }

    #[test]
    fn scans_cost_more_than_point_reads() {
        let scan = Work {
            docs_read: 100,
            bytes_read: 100 * 1024,
            doc_scans: 1,
            ..Work::default()
        };
        // 2 + 100 × 0.1 + 100 KB × 9/99 = 21.09
        assert!((rates().charge(&scan) - 21.09).abs() < 1e-9);
        // A query that finds nothing still costs its fixed part.
        let empty = Work {
            doc_scans: 1,
            ..Work::default()
        };
        assert!((rates().charge(&empty) - 2.0).abs() < 1e-9);
        // A command that read and wrote nothing costs nothing, unless it is on a collection:
        // then at least a point read (a lookup by `_id` that finds nothing).
        assert!(rates().charge(&Work::default()).abs() < 1e-9);
        assert!((rates().charge_on_collection(&Work::default()) - 1.0).abs() < 1e-9);
        assert!((rates().charge_on_collection(&scan) - 21.09).abs() < 1e-9);
    }

    #[test]
    fn secondary_index_entries_and_deletes_are_charged() {
        // An insert of a 1 KB document into a collection with two secondary indexes.
        let insert = Work {
            docs_written: 1,
            bytes_written: 1024,
            index_written: 3,
            ..Work::default()
        };
        assert!((rates().charge(&insert) - 6.0).abs() < 1e-9);
        // A delete by `_id`: a point read, then the document and its one index entry removed.
        let delete = Work {
            docs_read: 1,
            bytes_read: 1024,
            index_read: 1,
            docs_deleted: 1,
            index_written: 1,
            ..Work::default()
        };
        assert!((rates().charge(&delete) - 6.0).abs() < 1e-9);
    }

    #[test]
    fn rates_are_settable_by_name() {
        let r = Rates::from_settings(&[("write".into(), 10.0), ("query".into(), 3.0)]).unwrap();
        assert!((r.write - 10.0).abs() < 1e-9 && (r.query - 3.0).abs() < 1e-9);
        assert_eq!(parse_setting("write_kb=0.5"), Ok(("write_kb".into(), 0.5)));
        assert!(parse_setting("nope=1").is_err());
        assert!(parse_setting("write=-1").is_err());
        assert!(parse_setting("write=NaN").is_err());
        assert!(parse_setting("write").is_err());
    }
}
