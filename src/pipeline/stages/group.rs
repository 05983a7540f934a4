//! `$group`: one document per distinct `_id` (equal under the command's collation), in the
//! order the keys first appear, with each output field's accumulator.

use std::collections::HashMap;
use std::sync::Arc;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::{Accumulator, State, value_bytes};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, blocking, computed};
use crate::query::{Collation, Expression, Variables, keystring};

/// `$group: {_id: <expression>, <field>: {<accumulator>: <argument>}, …}`.
pub struct Group {
    id: Expression,
    fields: Vec<(String, Accumulator)>,
    /// The command's collation: keys equal under it group together.
    collation: Option<Arc<Collation>>,
}

impl Group {
    /// Parses a `$group` specification.
    pub fn parse(spec: &RawDocument, vars: &Arc<Variables>) -> CommandResult<Group> {
        let mut id = None;
        let mut fields = Vec::new();
        for elem in spec {
            let (k, v) =
                elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str() == "_id" {
                id = Some(Expression::parse_in(v, vars)?);
                continue;
            }
            fields.push((
                k.as_str().to_owned(),
                Accumulator::parse(k.as_str(), v, vars)?,
            ));
        }
        let id = id.ok_or_else(|| {
            CommandError::new(
                ErrorCode::Location(15955),
                "a group specification must include an _id",
            )
        })?;
        Ok(Group::new(id, fields))
    }

    /// A group by `id` with these output fields.
    pub(crate) fn new(id: Expression, fields: Vec<(String, Accumulator)>) -> Group {
        Group {
            id,
            fields,
            collation: None,
        }
    }

    /// Groups `docs`, holding at most the blocking stages' memory limit without
    /// `allowDiskUse` (mongod's 292 past it).
    pub fn group(
        &self,
        docs: impl Iterator<Item = CommandResult<Doc>>,
        ctx: &Context,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        let mut groups = Groups::new(self, ctx);
        for item in docs {
            let (doc, _) = item?;
            let key = self
                .id
                .evaluate(&doc)
                .map_err(aggregation_error)?
                .unwrap_or(RawBson::Null);
            groups.add(key, &doc).map_err(aggregation_error)?;
        }
        groups.finish()
    }
}

/// The running groups of one `$group` (or `$bucket`): states by key, in first-seen order.
pub(crate) struct Groups<'g> {
    fields: &'g [(String, Accumulator)],
    collation: Option<&'g Arc<Collation>>,
    keys: Vec<RawBson>,
    states: Vec<Vec<State>>,
    index: HashMap<Vec<u8>, usize>,
    bytes: usize,
    max_bytes: Option<usize>,
}

impl<'g> Groups<'g> {
    pub(crate) fn new(group: &'g Group, ctx: &Context) -> Groups<'g> {
        Groups::with_fields(&group.fields, group.collation.as_ref(), ctx)
    }

    pub(crate) fn with_fields(
        fields: &'g [(String, Accumulator)],
        collation: Option<&'g Arc<Collation>>,
        ctx: &Context,
    ) -> Groups<'g> {
        Groups {
            fields,
            collation,
            keys: Vec::new(),
            states: Vec::new(),
            index: HashMap::new(),
            bytes: 0,
            max_bytes: (!ctx.limits.allow_disk_use).then_some(ctx.limits.max_bytes),
        }
    }

    /// Adds `doc` to the group of `key`.
    pub(crate) fn add(&mut self, key: RawBson, doc: &RawDocument) -> CommandResult<()> {
        let ks = match self.collation {
            Some(c) => keystring::to_key(collation_key(&key, c).as_raw_bson_ref()),
            None => keystring::to_key(key.as_raw_bson_ref()),
        };
        let slot = if let Some(&slot) = self.index.get(&ks) {
            slot
        } else {
            let states = self
                .fields
                .iter()
                .map(|(_, acc)| acc.start(&key))
                .collect::<CommandResult<Vec<_>>>()?;
            self.bytes = self
                .bytes
                .saturating_add(ks.len() + value_bytes(Some(&key)) + 64);
            self.index.insert(ks, self.keys.len());
            self.keys.push(key);
            self.states.push(states);
            self.keys.len() - 1
        };
        let Some(states) = self.states.get_mut(slot) else {
            return Err(CommandError::internal("group slot out of range"));
        };
        for ((_, acc), state) in self.fields.iter().zip(states.iter_mut()) {
            let before = state.bytes();
            acc.process(state, doc)?;
            self.bytes = self
                .bytes
                .saturating_add(state.bytes())
                .saturating_sub(before);
        }
        if let Some(max) = self.max_bytes
            && self.bytes > max
        {
            return Err(exceeded());
        }
        Ok(())
    }

    /// One document per group: `_id`, then each output field.
    pub(crate) fn finish(self) -> CommandResult<Vec<RawDocumentBuf>> {
        let mut out = Vec::with_capacity(self.keys.len());
        for (key, states) in self.keys.into_iter().zip(self.states) {
            let mut doc = RawDocumentBuf::new();
            doc.append(bson::raw::cstr!("_id"), key);
            for ((name, acc), state) in self.fields.iter().zip(states) {
                let value = acc.finish(state)?;
                if let Ok(name) = <&CStr>::try_from(name.as_str()) {
                    doc.append(name, value);
                }
            }
            out.push(doc);
        }
        Ok(out)
    }
}

/// mongod's error for a `$group` past its memory limit without `allowDiskUse` (callers add
/// aggregation's prefix, [`aggregation_error`]).
pub(crate) fn exceeded() -> CommandError {
    CommandError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        "Exceeded memory limit for $group, but didn't allow external sort. Pass \
         allowDiskUse:true to opt in.",
    )
}

impl Stage for Group {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || Ok(self.group(input, ctx)?.into_iter().map(computed).collect()))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(collation.clone());
        for (_, acc) in &mut self.fields {
            acc.set_collation(Some(collation.clone()));
        }
    }
}

/// `v` with every string (at any depth) replaced by the hex digits of its collation sort key, so
/// that values equal under the collation have equal keystrings.
pub(crate) fn collation_key(v: &RawBson, c: &Collation) -> RawBson {
    use std::fmt::Write;
    match v {
        RawBson::String(s) | RawBson::Symbol(s) => {
            let mut hex = String::new();
            for b in c.sort_key(s) {
                let _ = write!(hex, "{b:02x}");
            }
            RawBson::String(hex)
        }
        RawBson::Document(d) => {
            let mut out = RawDocumentBuf::new();
            for (k, v) in d.iter().map_while(Result::ok) {
                out.append(k, collation_key(&RawBson::from(v), c));
            }
            RawBson::Document(out)
        }
        RawBson::Array(a) => {
            let mut out = RawArrayBuf::new();
            for v in a.into_iter().map_while(Result::ok) {
                out.push(collation_key(&RawBson::from(v), c));
            }
            RawBson::Array(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;
    use crate::sorter::SortLimits;

    pub(crate) fn ctx() -> Context {
        Context::new(SortLimits {
            max_bytes: crate::sorter::DEFAULT_MAX_SORT_BYTES,
            allow_disk_use: true,
            temp_dir: std::env::temp_dir(),
        })
    }

    #[test]
    fn group_sums_and_counts() {
        let docs = vec![
            rawdoc! {"k": "a", "v": 1},
            rawdoc! {"k": "a", "v": 2.5},
            rawdoc! {"k": "b", "v": 3},
        ];
        let spec = rawdoc! {"_id": "$k", "total": {"$sum": "$v"}, "n": {"$sum": 1}, "avg": {"$avg": "$v"}, "max": {"$max": "$v"}};
        let vars = Arc::new(Variables::system_clock());
        let group = Group::parse(&spec, &vars).unwrap();
        let out = group
            .group(docs.into_iter().map(|d| Ok(computed(d))), &ctx())
            .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].get_str("_id").unwrap(), "a");
        assert_eq!(out[0].get_f64("total").unwrap(), 3.5);
        assert_eq!(out[0].get_i32("n").unwrap(), 2);
        assert_eq!(out[0].get_f64("avg").unwrap(), 1.75);
        assert_eq!(out[0].get_f64("max").unwrap(), 2.5);
        assert_eq!(out[1].get_i32("total").unwrap(), 3);
    }
}
