// The mongosh half of an aggregation example's generated script (see compat/src/aggregation.rs).
// The runner prepends `const CASE = EJSON.parse(<the case as canonical extended JSON>)`, with
// {db, collection (null: db.aggregate), collections: [{name, docs}], indexes: [{collection,
// spec}], pipeline, options, resultCollection (null or a name)}.
// Setup failures throw (mongosh exits 1). The aggregate's outcome is printed on one line,
// "ebb-agg-case: " + canonical extended JSON of {ok: [documents]} or {error: {code, codeName,
// errmsg}}, and the runner compares it with the case's expectation.

const target = db.getSiblingDB(CASE.db);

for (const c of CASE.collections) {
  if (c.docs.length === 0) {
    target.createCollection(c.name);
  } else {
    target.getCollection(c.name).insertMany(c.docs);
  }
}
for (const i of CASE.indexes) {
  const reply = target.runCommand({ createIndexes: i.collection, indexes: [i.spec] });
  if (reply.ok !== 1) throw new Error(`createIndexes on ${i.collection}: ${EJSON.stringify(reply)}`);
}

// promoteValues: false keeps int32, int64 and double apart, so the comparison is exact.
const options = Object.assign({}, CASE.options, { promoteValues: false });
let outcome;
try {
  const cursor = CASE.collection === null
    ? target.aggregate(CASE.pipeline, options)
    : target.getCollection(CASE.collection).aggregate(CASE.pipeline, options);
  // (Assigned inside the try: mongosh's implicit await must happen here.)
  const docs = cursor.toArray();
  outcome = { ok: docs };
} catch (e) {
  if (e === null || e === undefined || e.code === undefined) throw e;
  outcome = {
    error: {
      code: Number(e.code),
      codeName: String(e.codeName),
      errmsg: String(e.errmsg || e.message),
    },
  };
}
if (outcome.ok !== undefined && CASE.resultCollection !== null) {
  const docs = target.getCollection(CASE.resultCollection)
    .find({}, {}, { promoteValues: false })
    .sort({ _id: 1 })
    .toArray();
  outcome = { ok: docs };
}
print('ebb-agg-case: ' + EJSON.stringify(outcome, { relaxed: false }));
