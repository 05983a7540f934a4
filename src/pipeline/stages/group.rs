//! `$group`: one document per distinct `_id` (equal under the command's collation), in the
//! order the keys first appear (in key order after a spill, see [`Groups`]), with each output
//! field's accumulator.

use std::collections::HashMap;
use std::sync::Arc;

use bson::raw::{CStr, cstr};
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::{Accumulator, State, value_bytes};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, computed};
use crate::query::{Collation, Expression, Variables, keystring};
use crate::sorter::{KeyedEntry, KeyedRuns};

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

    /// Groups `docs`, holding at most the blocking stages' memory limit: past it, mongod's 292
    /// without `allowDiskUse`, else the groups spill ([`Groups`]).
    pub fn group(
        &self,
        docs: impl Iterator<Item = CommandResult<Doc>>,
        ctx: &Context,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        self.grouped(docs, ctx)?.collect()
    }

    fn grouped<'a>(
        &'a self,
        docs: impl Iterator<Item = CommandResult<Doc>>,
        ctx: &Context,
    ) -> CommandResult<Box<dyn Iterator<Item = CommandResult<RawDocumentBuf>> + 'a>> {
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
        groups.into_output()
    }
}

/// The running groups of one `$group` (or `$bucket`): states by key, in first-seen order.
///
/// They are held to the blocking stages' memory limit. Past it, without `allowDiskUse`, mongod's
/// 292; with it, as mongod's `GroupProcessor::spill`, the groups are sorted by key (their key
/// strings, under the collation) and written as one run of `{k: <_id>, s: [<partial state>…]}`
/// ([`Accumulator::partial`]), and memory starts again empty. At the end the runs (and what is
/// still in memory) are merged by key and each group's partial states folded in input order
/// ([`Accumulator::merge_partial`]): the values are those of grouping in memory, and the groups
/// then come out in key order (first-seen order without a spill; mongod's order is unspecified
/// either way).
pub(crate) struct Groups<'g> {
    fields: &'g [(String, Accumulator)],
    collation: Option<&'g Arc<Collation>>,
    keys: Vec<RawBson>,
    states: Vec<Vec<State>>,
    index: HashMap<Vec<u8>, usize>,
    bytes: usize,
    max_bytes: usize,
    allow_disk_use: bool,
    runs: KeyedRuns,
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
            max_bytes: ctx.limits.max_bytes,
            allow_disk_use: ctx.limits.allow_disk_use,
            runs: KeyedRuns::new(ctx.limits.temp_dir.clone()),
        }
    }

    /// Adds `doc` to the group of `key`.
    pub(crate) fn add(&mut self, key: RawBson, doc: &RawDocument) -> CommandResult<()> {
        let ks = self.key_string(&key);
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
        if self.bytes > self.max_bytes {
            if !self.allow_disk_use {
                return Err(exceeded());
            }
            let entries = self.take_sorted();
            self.runs.write_run(entries)?;
        }
        Ok(())
    }

    /// How many runs the groups spilled.
    #[cfg(test)]
    pub(crate) fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    fn key_string(&self, key: &RawBson) -> Vec<u8> {
        match self.collation {
            Some(c) => keystring::to_key(collation_key(key, c).as_raw_bson_ref()),
            None => keystring::to_key(key.as_raw_bson_ref()),
        }
    }

    /// Empties memory: every group as a spill entry (key string, `{k, s}`), by key string.
    fn take_sorted(&mut self) -> Vec<KeyedEntry> {
        let mut slots: Vec<(Vec<u8>, usize)> = self.index.drain().collect();
        slots.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut groups: Vec<Option<(RawBson, Vec<State>)>> = std::mem::take(&mut self.keys)
            .into_iter()
            .zip(std::mem::take(&mut self.states))
            .map(Some)
            .collect();
        self.bytes = 0;
        let mut out = Vec::with_capacity(slots.len());
        for (ks, slot) in slots {
            let Some((key, states)) = groups.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            let mut partials = RawArrayBuf::new();
            for ((_, acc), state) in self.fields.iter().zip(states) {
                partials.push(acc.partial(state));
            }
            let mut entry = RawDocumentBuf::new();
            entry.append(cstr!("k"), key);
            entry.append(cstr!("s"), partials);
            out.push((ks, entry));
        }
        out
    }

    /// One document per group: `_id`, then each output field.
    pub(crate) fn finish(self) -> CommandResult<Vec<RawDocumentBuf>> {
        self.into_output()?.collect()
    }

    /// The groups' documents, as they are merged when the groups spilled.
    pub(crate) fn into_output(
        mut self,
    ) -> CommandResult<Box<dyn Iterator<Item = CommandResult<RawDocumentBuf>> + 'g>> {
        let fields = self.fields;
        if self.runs.is_empty() {
            let groups = self.keys.into_iter().zip(self.states);
            return Ok(Box::new(
                groups.map(move |(key, states)| output(fields, key, states)),
            ));
        }
        let memory = self.take_sorted();
        let mut merge = self.runs.merge(memory)?;
        // The group being merged: its key string, `_id` and states so far.
        let mut current: Option<(Vec<u8>, RawBson, Vec<State>)> = None;
        let mut done = false;
        Ok(Box::new(std::iter::from_fn(move || {
            if done {
                return None;
            }
            let step = (|| -> CommandResult<Option<RawDocumentBuf>> {
                loop {
                    let Some((ks, entry)) = merge.next_entry()? else {
                        return match current.take() {
                            Some((_, key, states)) => output(fields, key, states).map(Some),
                            None => Ok(None),
                        };
                    };
                    let finished = match current.take() {
                        Some((cks, key, states)) if cks != ks => Some((key, states)),
                        Some(same) => {
                            current = Some(same);
                            None
                        }
                        None => None,
                    };
                    if current.is_none() {
                        let key = entry
                            .get("k")
                            .ok()
                            .flatten()
                            .map(RawBson::from)
                            .ok_or_else(spill_error)?;
                        let states = fields
                            .iter()
                            .map(|(_, acc)| acc.start(&key))
                            .collect::<CommandResult<Vec<_>>>()?;
                        current = Some((ks, key, states));
                    }
                    let Some(RawBsonRef::Array(partials)) = entry.get("s").ok().flatten() else {
                        return Err(spill_error());
                    };
                    if let Some((_, _, states)) = &mut current {
                        for ((_, acc), (state, partial)) in
                            fields.iter().zip(states.iter_mut().zip(partials))
                        {
                            let partial = partial.map_err(|_| spill_error())?;
                            acc.merge_partial(state, partial)?;
                        }
                    }
                    if let Some((key, states)) = finished {
                        return output(fields, key, states).map(Some);
                    }
                }
            })();
            match step {
                Ok(Some(doc)) => Some(Ok(doc)),
                Ok(None) => {
                    done = true;
                    None
                }
                Err(e) => {
                    done = true;
                    Some(Err(e))
                }
            }
        })))
    }
}

/// A group's document: `_id`, then each output field.
fn output(
    fields: &[(String, Accumulator)],
    key: RawBson,
    states: Vec<State>,
) -> CommandResult<RawDocumentBuf> {
    let mut doc = RawDocumentBuf::new();
    doc.append(cstr!("_id"), key);
    for ((name, acc), state) in fields.iter().zip(states) {
        let value = acc.finish(state)?;
        if let Ok(name) = <&CStr>::try_from(name.as_str()) {
            doc.append(name, value);
        }
    }
    Ok(doc)
}

fn spill_error() -> CommandError {
    CommandError::internal("$group spill file: malformed entry")
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
        // Blocking, but the output is read as it is merged (after a spill, one group at a time).
        Box::new(
            std::iter::once_with(move || self.grouped(input, ctx)).flat_map(|r| -> Stream<'a> {
                match r {
                    Ok(groups) => Box::new(groups.map(|d| d.map(computed))),
                    Err(e) => Box::new(std::iter::once(Err(e))),
                }
            }),
        )
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

    /// Every accumulator, over seeded random documents.
    fn every_accumulator() -> RawDocumentBuf {
        rawdoc! {
            "_id": "$k",
            "sum": {"$sum": "$v"},
            "avg": {"$avg": "$v"},
            "count": {"$count": {}},
            "min": {"$min": "$v"},
            "max": {"$max": "$s"},
            "first": {"$first": "$v"},
            "last": {"$last": "$v"},
            "push": {"$push": "$v"},
            "set": {"$addToSet": "$s"},
            "merged": {"$mergeObjects": "$o"},
            "pop": {"$stdDevPop": "$v"},
            "samp": {"$stdDevSamp": "$v"},
            "firstN": {"$firstN": {"input": "$v", "n": 3}},
            "lastN": {"$lastN": {"input": "$v", "n": 3}},
            "minN": {"$minN": {"input": "$s", "n": 2}},
            "maxN": {"$maxN": {"input": "$v", "n": 4}},
            "top": {"$top": {"sortBy": {"v": 1}, "output": "$_id"}},
            "topN": {"$topN": {"n": 3, "sortBy": {"v": -1, "s": 1}, "output": ["$_id", "$v"]}},
            "bottom": {"$bottom": {"sortBy": {"s": 1}, "output": "$_id"}},
            "bottomN": {"$bottomN": {"n": 2, "sortBy": {"v": 1}, "output": "$_id"}},
            "median": {"$median": {"input": "$v", "method": "approximate"}},
            "pct": {"$percentile": {"input": "$v", "p": [0.1, 0.9], "method": "approximate"}},
        }
    }

    /// Documents with repeated keys (strings differing in case among them), numbers whose
    /// sums are exact (halves), ties, missing values, nulls and strings.
    fn random_docs(seed: u64, n: i32) -> Vec<RawDocumentBuf> {
        let mut x = seed;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let words = ["a", "A", "b", "B", "c", "é", "E"];
        (0..n)
            .map(|i| {
                let mut d = rawdoc! {"_id": i};
                let r = next(30);
                match r {
                    0..=19 => d.append(cstr!("k"), i32::try_from(r).unwrap()),
                    20..=27 => d.append(cstr!("k"), words[usize::try_from(r - 20).unwrap() % 7]),
                    _ => {}
                }
                match next(10) {
                    0 => {}
                    1 => d.append(cstr!("v"), RawBson::Null),
                    2 => d.append(cstr!("v"), "text"),
                    3..=5 => d.append(cstr!("v"), i32::try_from(next(20)).unwrap()),
                    _ => {
                        #[expect(clippy::cast_precision_loss, reason = "small")]
                        let h = next(40) as f64 / 2.0 - 5.0;
                        d.append(cstr!("v"), h);
                    }
                }
                if next(4) > 0 {
                    d.append(cstr!("s"), words[usize::try_from(next(7)).unwrap()]);
                }
                if next(3) == 0 {
                    let mut o = RawDocumentBuf::new();
                    let f = format!("f{}", next(5));
                    o.append(
                        <&CStr>::try_from(f.as_str()).unwrap(),
                        i32::try_from(next(9)).unwrap(),
                    );
                    d.append(cstr!("o"), o);
                }
                d.append(cstr!("pad"), "x".repeat(40));
                d
            })
            .collect()
    }

    fn run_group(
        group: &Group,
        docs: &[RawDocumentBuf],
        ctx: &Context,
    ) -> CommandResult<(Vec<bson::Document>, usize)> {
        let mut groups = Groups::new(group, ctx);
        for doc in docs {
            let key = group.id.evaluate(doc)?.unwrap_or(RawBson::Null);
            groups.add(key, doc)?;
        }
        let runs = groups.spilled_runs();
        let out = groups
            .finish()?
            .into_iter()
            .map(|d| bson::Document::try_from(d).unwrap())
            .collect();
        Ok((out, runs))
    }

    fn limited(max_bytes: usize, allow_disk_use: bool, dir: &std::path::Path) -> Context {
        Context::new(SortLimits {
            max_bytes,
            allow_disk_use,
            temp_dir: dir.to_path_buf(),
        })
    }

    fn close(a: &bson::Bson, b: &bson::Bson) -> bool {
        match (a, b) {
            (bson::Bson::Double(x), bson::Bson::Double(y)) => {
                (x - y).abs() <= 1e-9 * x.abs().max(1.0)
            }
            _ => a == b,
        }
    }

    /// Spilled or not, every accumulator gives the same values (the standard deviations to
    /// 1e-9, as their moments are combined); after a spill the groups come in key order.
    #[test]
    fn spilled_groups_equal_in_memory_groups() {
        let dir = tempfile::tempdir().unwrap();
        let vars = Arc::new(Variables::system_clock());
        let collation = Collation::parse(&rawdoc! {"locale": "en", "strength": 1})
            .unwrap()
            .map(Arc::new)
            .unwrap();
        for seed in [1_u64, 7, 42, 1234] {
            let docs = random_docs(seed, 1500);
            for collated in [false, true] {
                let mut group = Group::parse(&every_accumulator(), &vars).unwrap();
                if collated {
                    group.collate(&collation);
                }
                let (memory, runs) =
                    run_group(&group, &docs, &limited(usize::MAX, false, dir.path())).unwrap();
                assert_eq!(runs, 0);
                let (spilled, runs) =
                    run_group(&group, &docs, &limited(6_000, true, dir.path())).unwrap();
                assert!(runs > 10, "{runs} runs");
                assert_eq!(memory.len(), spilled.len());
                // Spilled groups are in key-string order.
                let ks: Vec<Vec<u8>> = spilled
                    .iter()
                    .map(|d| {
                        let id = RawBson::try_from(d.get("_id").unwrap().clone()).unwrap();
                        Groups::new(&group, &ctx()).key_string(&id)
                    })
                    .collect();
                assert!(ks.windows(2).all(|w| w[0] < w[1]));
                for m in &memory {
                    let s = spilled
                        .iter()
                        .find(|s| s.get("_id") == m.get("_id"))
                        .unwrap_or_else(|| panic!("group {:?} lost", m.get("_id")));
                    assert_eq!(m.keys().collect::<Vec<_>>(), s.keys().collect::<Vec<_>>());
                    for (k, v) in m {
                        assert!(
                            close(v, s.get(k).unwrap()),
                            "seed {seed} {k}: {v} vs {}",
                            s.get(k).unwrap()
                        );
                    }
                }
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Many runs are merged into fewer on the way (descriptors stay bounded), with the same
    /// result.
    #[test]
    fn many_group_runs_merge() {
        let dir = tempfile::tempdir().unwrap();
        let vars = Arc::new(Variables::system_clock());
        let group = Group::parse(&every_accumulator(), &vars).unwrap();
        let docs = random_docs(99, 3000);
        let (memory, _) =
            run_group(&group, &docs, &limited(usize::MAX, false, dir.path())).unwrap();
        let (spilled, runs) = run_group(&group, &docs, &limited(1_000, true, dir.path())).unwrap();
        assert!(runs < 64, "{runs} runs open");
        assert_eq!(memory.len(), spilled.len());
        for m in &memory {
            let s = spilled
                .iter()
                .find(|s| s.get("_id") == m.get("_id"))
                .unwrap();
            assert!(close(m.get("push").unwrap(), s.get("push").unwrap()));
            assert_eq!(m.get("first"), s.get("first"));
            assert_eq!(m.get("last"), s.get("last"));
            assert_eq!(m.get("topN"), s.get("topN"));
        }
    }

    #[test]
    fn the_limit_without_disk_use_is_mongods_error() {
        let dir = tempfile::tempdir().unwrap();
        let vars = Arc::new(Variables::system_clock());
        let group = Group::parse(&every_accumulator(), &vars).unwrap();
        let docs = random_docs(5, 1500);
        let err = run_group(&group, &docs, &limited(6_000, false, dir.path())).unwrap_err();
        assert_eq!(err.code.code(), 292);
        assert_eq!(
            err.errmsg,
            "Exceeded memory limit for $group, but didn't allow external sort. Pass \
             allowDiskUse:true to opt in."
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
