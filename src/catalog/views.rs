//! Views: named aggregation pipelines over a collection or another view of the same database,
//! as mongod keeps them in `<db>.system.views`.
//!
//! Each definition is one record in the `catalog` keyspace under [`VIEW_PREFIX`], keyed like a
//! collection record (`db \0 name`), and held in memory beside the collections. A view and a
//! collection never share a name: both are created, renamed and dropped under the catalog's
//! `ddl` lock, which checks both maps.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use tracing::info;

use super::{Catalog, corrupt};
use crate::error::{CommandError, ErrorCode};
use crate::storage::{Batch, Keyspace, Snapshot, StorageError};

/// `0x09` db `\0` name: a view's definition (`{db, name, viewOn, pipeline}`).
pub(super) const VIEW_PREFIX: u8 = 0x09;

/// mongod's `ViewGraph::kMaxViewDepth`: the most views a chain (from the top view down to its
/// collection) may hold.
pub const MAX_VIEW_DEPTH: usize = 20;

/// A view's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// Database name.
    pub db: String,
    /// The view's name.
    pub name: String,
    /// The collection or view it reads, in the same database.
    pub view_on: String,
    /// Its stages, in order.
    pub pipeline: Vec<RawDocumentBuf>,
    /// Its default collation, as mongod reports it (every field filled in); `None` for the
    /// simple collation.
    pub collation: Option<RawDocumentBuf>,
}

impl View {
    /// The pipeline as an array.
    pub fn pipeline_array(&self) -> RawArrayBuf {
        let mut a = RawArrayBuf::new();
        for stage in &self.pipeline {
            a.push(stage.clone());
        }
        a
    }

    /// What `listCollections` shows as its `options`.
    pub fn options(&self) -> RawDocumentBuf {
        let mut options =
            rawdoc! { "viewOn": self.view_on.as_str(), "pipeline": self.pipeline_array() };
        if let Some(c) = &self.collation {
            options.append(bson::raw::cstr!("collation"), c.clone());
        }
        options
    }

    fn record(&self) -> RawDocumentBuf {
        let mut record = rawdoc! {
            "db": self.db.as_str(),
            "name": self.name.as_str(),
            "viewOn": self.view_on.as_str(),
            "pipeline": self.pipeline_array(),
        };
        if let Some(c) = &self.collation {
            record.append(bson::raw::cstr!("collation"), c.clone());
        }
        record
    }

    /// The view's document in `system.views`, as mongod keeps it: `{_id: "db.name", viewOn,
    /// pipeline, collation?}`.
    fn definition(&self) -> RawDocumentBuf {
        let mut doc = rawdoc! {
            "_id": format!("{}.{}", self.db, self.name),
            "viewOn": self.view_on.as_str(),
            "pipeline": self.pipeline_array(),
        };
        if let Some(c) = &self.collation {
            doc.append(bson::raw::cstr!("collation"), c.clone());
        }
        doc
    }

    fn from_record(doc: &RawDocument) -> Result<Self, StorageError> {
        let text = |k: &str| doc.get_str(k).map(str::to_owned).map_err(corrupt);
        let mut pipeline = Vec::new();
        for stage in doc.get_array("pipeline").map_err(corrupt)? {
            match stage.map_err(corrupt)? {
                RawBsonRef::Document(d) => pipeline.push(d.to_owned()),
                _ => return Err(corrupt("a view's stage is not a document")),
            }
        }
        Ok(View {
            db: text("db")?,
            name: text("name")?,
            view_on: text("viewOn")?,
            pipeline,
            collation: doc.get_document("collation").ok().map(ToOwned::to_owned),
        })
    }
}

/// A view resolved down to the collection it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedView {
    /// The collection at the bottom of the chain (which may not exist).
    pub collection: String,
    /// Every view's stages, the bottom view's first.
    pub pipeline: Vec<RawDocumentBuf>,
    /// The views' default collation (they all have the same); `None` for the simple one.
    pub collation: Option<RawDocumentBuf>,
}

/// Every view, by database and name.
pub(super) type ViewNames = BTreeMap<(String, String), Arc<View>>;

fn view_key(db: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + db.len() + name.len());
    key.push(VIEW_PREFIX);
    key.extend_from_slice(db.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

/// Reads every stored view.
pub(super) fn load(snapshot: &dyn Snapshot) -> Result<ViewNames, StorageError> {
    let mut views = ViewNames::new();
    let end = [VIEW_PREFIX + 1];
    for entry in snapshot.range(
        Keyspace::Catalog,
        Bound::Included(&[VIEW_PREFIX][..]),
        Bound::Excluded(&end[..]),
        false,
    ) {
        let (_, value) = entry?;
        let view = View::from_record(RawDocument::from_bytes(&value).map_err(corrupt)?)?;
        views.insert((view.db.clone(), view.name.clone()), Arc::new(view));
    }
    Ok(views)
}

/// Checks that adding (or redefining) `candidate` among `views` leaves no cycle and no chain
/// of more than [`MAX_VIEW_DEPTH`] views, with mongod's errors (`ViewGraph::insertAndValidate`).
pub(super) fn check_graph(views: &ViewNames, candidate: &View) -> Result<(), CommandError> {
    let db = candidate.db.as_str();
    let view_on = |name: &str| -> Option<&str> {
        if name == candidate.name {
            Some(candidate.view_on.as_str())
        } else {
            views
                .get(&(db.to_owned(), name.to_owned()))
                .map(|v| v.view_on.as_str())
        }
    };
    // Down from the candidate: its chain of views, which must not come back to it.
    let mut chain = vec![candidate.name.as_str()];
    let mut below = 1_usize;
    let mut current = candidate.view_on.as_str();
    loop {
        chain.push(current);
        if current == candidate.name {
            let mut msg = format!("View cycle detected: {db}.{current}");
            for name in chain.iter().rev() {
                msg = format!("{msg} => {db}.{name}");
            }
            return Err(CommandError::new(ErrorCode::GraphContainsCycle, msg));
        }
        let Some(next) = view_on(current) else { break };
        below += 1;
        if below > MAX_VIEW_DEPTH + 1 {
            return Err(depth_exceeded());
        }
        current = next;
    }
    // Up: the longest chain of views that reach the candidate.
    let mut above = 0_usize;
    for ((vdb, name), _) in views.range((db.to_owned(), String::new())..) {
        if vdb != db {
            break;
        }
        let mut steps = 0_usize;
        let mut at = name.as_str();
        while at != candidate.name && steps <= MAX_VIEW_DEPTH {
            let Some(next) = view_on(at) else { break };
            steps += 1;
            at = next;
        }
        if at == candidate.name && name != &candidate.name {
            above = above.max(steps);
        }
    }
    if above + below > MAX_VIEW_DEPTH {
        return Err(depth_exceeded());
    }
    // A view and the views next to it (the one it reads, those that read it) share a
    // collation (`ViewGraph::_validateChildren`/`_validateParents`).
    let key = |name: &str| (db.to_owned(), name.to_owned());
    if let Some(child) = views.get(&key(&candidate.view_on))
        && child.name != candidate.name
        && child.collation != candidate.collation
    {
        return Err(collation_mismatch(db, &candidate.name, &child.name));
    }
    for ((vdb, name), parent) in views.range(key("")..) {
        if vdb != db {
            break;
        }
        if parent.view_on == candidate.name
            && name != &candidate.name
            && parent.collation != candidate.collation
        {
            return Err(collation_mismatch(db, &candidate.name, name));
        }
    }
    Ok(())
}

fn collation_mismatch(db: &str, view: &str, other: &str) -> CommandError {
    CommandError::new(
        ErrorCode::OptionNotSupportedOnView,
        format!(
            "View {db}.{view} has a collation that does not match the collation of view {db}.{other}"
        ),
    )
}

fn depth_exceeded() -> CommandError {
    CommandError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth limit exceeded; maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// `name` in `db` resolved through `views` down to a collection: `None` if it is no view.
pub(super) fn resolve_in(
    views: &ViewNames,
    db: &str,
    name: &str,
) -> Result<Option<ResolvedView>, CommandError> {
    let mut pipeline: Vec<RawDocumentBuf> = Vec::new();
    let mut collation = None;
    let mut current = name.to_owned();
    for depth in 0..=MAX_VIEW_DEPTH {
        let Some(view) = views.get(&(db.to_owned(), current.clone())) else {
            return Ok((depth > 0).then_some(ResolvedView {
                collection: current,
                pipeline,
                collation,
            }));
        };
        if depth == MAX_VIEW_DEPTH {
            break;
        }
        if depth == 0 {
            collation.clone_from(&view.collation);
        }
        pipeline.splice(0..0, view.pipeline.iter().cloned());
        current.clone_from(&view.view_on);
    }
    Err(CommandError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth too deep or view cycle detected; maximum depth is {MAX_VIEW_DEPTH}"),
    ))
}

/// mongod's refusal of a write or a command that needs a collection, on a view.
pub fn not_a_collection(db: &str, name: &str) -> CommandError {
    CommandError::new(
        ErrorCode::CommandNotSupportedOnView,
        format!("Namespace {db}.{name} is a view, not a collection"),
    )
}

fn namespace_exists(db: &str, name: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NamespaceExists,
        format!("Collection {db}.{name} already exists."),
    )
}

impl Catalog {
    fn views_read(&self) -> std::sync::RwLockReadGuard<'_, ViewNames> {
        self.views
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn views_write(&self) -> std::sync::RwLockWriteGuard<'_, ViewNames> {
        self.views
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The view `db.name`, if there is one.
    pub fn view(&self, db: &str, name: &str) -> Option<Arc<View>> {
        self.views_read()
            .get(&(db.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Whether `db.name` is a view. Asked before every write: with no view at all it costs a
    /// read lock and no allocation.
    pub fn is_view(&self, db: &str, name: &str) -> bool {
        let views = self.views_read();
        !views.is_empty() && views.contains_key(&(db.to_owned(), name.to_owned()))
    }

    /// The views of `db`, sorted by name.
    pub fn views(&self, db: &str) -> Vec<Arc<View>> {
        self.views_read()
            .range((db.to_owned(), String::new())..)
            .take_while(|((d, _), _)| d == db)
            .map(|(_, v)| Arc::clone(v))
            .collect()
    }

    /// Databases that hold at least one view.
    pub(super) fn view_databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self.views_read().keys().map(|(db, _)| db.clone()).collect();
        dbs.dedup();
        dbs
    }

    /// `db.name` resolved down to the collection it reads; `None` if it is not a view.
    pub fn resolve_view(&self, db: &str, name: &str) -> Result<Option<ResolvedView>, CommandError> {
        resolve_in(&self.views_read(), db, name)
    }

    /// Creates the view `view` (its pipeline already checked). Returns the commit ticket.
    pub fn create_view(&self, view: View) -> Result<u64, CommandError> {
        super::validate_writable(&view.db, &view.name)?;
        let _ddl = self.ddl();
        if self.get(&view.db, &view.name).is_some() || self.is_view(&view.db, &view.name) {
            return Err(namespace_exists(&view.db, &view.name));
        }
        check_graph(&self.views_read(), &view)?;
        self.open_database(&view.db)?;
        self.put_view(view, "created view")
    }

    /// Redefines the view `db.name`: a new `viewOn`, a new pipeline, or both (`None` keeps
    /// that half). `NamespaceNotFound` if it is not a view.
    pub fn modify_view(
        &self,
        db: &str,
        name: &str,
        view_on: Option<String>,
        pipeline: Option<Vec<RawDocumentBuf>>,
    ) -> Result<u64, CommandError> {
        let _ddl = self.ddl();
        let Some(old) = self.view(db, name) else {
            return Err(CommandError::new(
                ErrorCode::NamespaceNotFound,
                "ns does not exist",
            ));
        };
        let mut view = (*old).clone();
        if let Some(v) = view_on {
            view.view_on = v;
        }
        if let Some(p) = pipeline {
            view.pipeline = p;
        }
        check_graph(&self.views_read(), &view)?;
        self.put_view(view, "modified view")
    }

    fn put_view(&self, view: View, what: &'static str) -> Result<u64, CommandError> {
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Catalog,
            view_key(&view.db, &view.name),
            view.record().into_bytes(),
        );
        // Logged as mongod logs its durable view catalog: a write to `db.system.views`.
        if self.oplog().is_some() {
            let definition = view.definition();
            let ns = format!("{}.system.views", view.db);
            let id = format!("{}.{}", view.db, view.name);
            let op = if self.is_view(&view.db, &view.name) {
                crate::oplog::log::update_op(
                    &ns,
                    system_views_uuid(&view.db),
                    &definition,
                    RawBsonRef::String(&id),
                )
            } else {
                crate::oplog::log::insert_op(
                    &ns,
                    system_views_uuid(&view.db),
                    &definition,
                    RawBsonRef::String(&id),
                )
            };
            self.log_op(&mut batch, &op);
        }
        let ticket = self.store.commit(batch)?;
        info!(namespace = %format!("{}.{}", view.db, view.name), view_on = %view.view_on, "{what}");
        self.views_write()
            .insert((view.db.clone(), view.name.clone()), Arc::new(view));
        Ok(ticket)
    }

    /// Adds the oplog entry of the drop of view `db.name` (a delete from `db.system.views`).
    fn log_view_drop(&self, batch: &mut Batch, db: &str, name: &str) {
        if self.oplog().is_some() {
            let id = format!("{db}.{name}");
            let op = crate::oplog::log::delete_op(
                &format!("{db}.system.views"),
                system_views_uuid(db),
                RawBsonRef::String(&id),
            );
            self.log_op(batch, &op);
        }
    }

    /// Drops the view `db.name`; `None` if there is no such view.
    pub fn drop_view(&self, db: &str, name: &str) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        if !self.is_view(db, name) {
            return Ok(None);
        }
        let mut batch = Batch::new();
        batch.delete(Keyspace::Catalog, view_key(db, name));
        self.log_view_drop(&mut batch, db, name);
        let ticket = self.store.commit(batch)?;
        self.views_write().remove(&(db.to_owned(), name.to_owned()));
        info!(namespace = %format!("{db}.{name}"), "dropped view");
        Ok(Some(ticket))
    }

    /// Drops every view of `db` in one commit (`dropDatabase`); `None` if it had none.
    pub fn drop_views(&self, db: &str) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        let names: Vec<String> = self.views(db).iter().map(|v| v.name.clone()).collect();
        if names.is_empty() {
            return Ok(None);
        }
        let mut batch = Batch::new();
        for name in &names {
            batch.delete(Keyspace::Catalog, view_key(db, name));
            self.log_view_drop(&mut batch, db, name);
        }
        let ticket = self.store.commit(batch)?;
        let mut views = self.views_write();
        for name in names {
            views.remove(&(db.to_owned(), name));
        }
        Ok(Some(ticket))
    }
}

/// The UUID of `db.system.views` in the oplog: Ebb keeps views in its catalog, so it is made
/// from the database's name (stable, and distinct from every collection's).
fn system_views_uuid(db: &str) -> [u8; 16] {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{db}.system.views").as_bytes());
    let mut uuid = [0_u8; 16];
    uuid.copy_from_slice(&digest[..16]);
    uuid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, on: &str) -> View {
        View {
            db: "t".into(),
            name: name.into(),
            view_on: on.into(),
            pipeline: vec![rawdoc! { "$match": { "v": name } }],
            collation: None,
        }
    }

    fn graph(views: &[View]) -> ViewNames {
        views
            .iter()
            .map(|v| ((v.db.clone(), v.name.clone()), Arc::new(v.clone())))
            .collect()
    }

    #[test]
    fn a_view_on_itself_is_a_cycle() {
        let e = check_graph(&ViewNames::new(), &view("a", "a")).unwrap_err();
        assert_eq!(e.code, ErrorCode::GraphContainsCycle);
        assert_eq!(e.errmsg, "View cycle detected: t.a => t.a => t.a");
    }

    #[test]
    fn a_longer_cycle_names_its_path_as_mongod_does() {
        // v4 reads v1; redefining v1 over v4 closes the loop.
        let views = graph(&[view("v1", "src"), view("v4", "v1")]);
        let e = check_graph(&views, &view("v1", "v4")).unwrap_err();
        assert_eq!(e.code, ErrorCode::GraphContainsCycle);
        assert_eq!(
            e.errmsg,
            "View cycle detected: t.v1 => t.v1 => t.v4 => t.v1"
        );
    }

    #[test]
    fn chains_hold_twenty_views_and_not_twenty_one() {
        let mut views = vec![view("v1", "c")];
        for i in 2..=MAX_VIEW_DEPTH {
            views.push(view(&format!("v{i}"), &format!("v{}", i - 1)));
        }
        let names = graph(&views);
        check_graph(&names, views.last().unwrap()).unwrap();
        let e = check_graph(&names, &view("v21", "v20")).unwrap_err();
        assert_eq!(e.code, ErrorCode::ViewDepthLimitExceeded);
        assert_eq!(e.errmsg, "View depth limit exceeded; maximum depth is 20");
        // Inserting below the chain counts the views above too.
        let e = check_graph(&names, &view("c", "base")).unwrap_err();
        assert_eq!(e.code, ErrorCode::ViewDepthLimitExceeded);
    }

    #[test]
    fn views_next_to_each_other_share_a_collation() {
        let mut fr = view("a", "coll");
        fr.collation = Some(rawdoc! { "locale": "fr" });
        let names = graph(&[fr.clone()]);
        let e = check_graph(&names, &view("b", "a")).unwrap_err();
        assert_eq!(e.code, ErrorCode::OptionNotSupportedOnView);
        assert_eq!(
            e.errmsg,
            "View t.b has a collation that does not match the collation of view t.a"
        );
        let mut b = view("b", "a");
        b.collation.clone_from(&fr.collation);
        check_graph(&names, &b).unwrap();
        // Redefining the lower view away from the collation of one reading it.
        let names = graph(&[fr, b]);
        let e = check_graph(&names, &view("a", "coll")).unwrap_err();
        assert_eq!(e.code, ErrorCode::OptionNotSupportedOnView);
        // The collation comes from the top view.
        let r = resolve_in(&names, "t", "b").unwrap().unwrap();
        assert_eq!(r.collation, Some(rawdoc! { "locale": "fr" }));
    }

    #[test]
    fn resolution_prepends_each_views_stages() {
        let names = graph(&[view("a", "coll"), view("b", "a"), view("c", "b")]);
        let r = resolve_in(&names, "t", "c").unwrap().unwrap();
        assert_eq!(r.collection, "coll");
        let order: Vec<String> = r
            .pipeline
            .iter()
            .map(|s| {
                s.get_document("$match")
                    .unwrap()
                    .get_str("v")
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert!(resolve_in(&names, "t", "coll").unwrap().is_none());
        assert!(resolve_in(&names, "other", "c").unwrap().is_none());
    }

    #[test]
    fn resolution_stops_at_a_stored_cycle() {
        // Only a damaged store holds one; resolution must still end.
        let names = graph(&[view("a", "b"), view("b", "a")]);
        let e = resolve_in(&names, "t", "a").unwrap_err();
        assert_eq!(e.code, ErrorCode::ViewDepthLimitExceeded);
    }
}
