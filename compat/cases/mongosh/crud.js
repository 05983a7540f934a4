// A CRUD session in mongosh, as the MongoDB manual's CRUD pages show it.
// Source: https://www.mongodb.com/docs/manual/crud/
function check(cond, what) {
  if (!cond) { throw new Error('check failed: ' + what); }
}
const coll = db.getSiblingDB('compat_crud').inventory;
coll.drop();

// insertOne / insertMany (https://www.mongodb.com/docs/manual/tutorial/insert-documents/)
const one = coll.insertOne({ item: 'canvas', qty: 100, tags: ['cotton'], size: { h: 28, w: 35.5, uom: 'cm' } });
check(one.acknowledged && one.insertedId !== undefined, 'insertOne');
const many = coll.insertMany([
  { item: 'journal', qty: 25, tags: ['blank', 'red'], size: { h: 14, w: 21, uom: 'cm' }, status: 'A' },
  { item: 'mat', qty: 85, tags: ['gray'], size: { h: 27.9, w: 35.5, uom: 'cm' }, status: 'A' },
  { item: 'mousepad', qty: 25, tags: ['gel', 'blue'], size: { h: 19, w: 22.85, uom: 'cm' }, status: 'P' },
  { item: 'notebook', qty: 50, tags: ['red', 'blank'], size: { h: 8.5, w: 11, uom: 'in' }, status: 'A' },
  { item: 'paper', qty: 100, tags: ['red', 'blank', 'plain'], size: { h: 8.5, w: 11, uom: 'in' }, status: 'D' },
  { item: 'planner', qty: 75, tags: ['blank', 'red'], size: { h: 22.85, w: 30, uom: 'cm' }, status: 'D' },
  { item: 'postcard', qty: 45, tags: ['blue'], size: { h: 10, w: 15.25, uom: 'cm' }, status: 'A' },
]);
check(Object.keys(many.insertedIds).length === 7, 'insertMany');

// Queries (https://www.mongodb.com/docs/manual/tutorial/query-documents/)
check(coll.find({ status: 'D' }).toArray().length === 2, 'equality');
check(coll.find({ status: { $in: ['A', 'D'] } }).toArray().length === 6, '$in');
check(coll.find({ status: 'A', qty: { $lt: 30 } }).toArray().length === 1, 'AND');
check(coll.find({ $or: [{ status: 'A' }, { qty: { $lt: 30 } }] }).toArray().length === 5, '$or');
check(coll.find({ 'size.uom': 'in' }).toArray().length === 2, 'dotted path');
check(coll.find({ tags: 'red' }).toArray().length === 4, 'array contains');
check(coll.find({ tags: ['red', 'blank'] }).toArray().length === 1, 'exact array');
const sorted = coll.find({}, { item: 1, _id: 0 }).sort({ qty: -1, item: 1 }).skip(1).limit(3).toArray();
check(sorted.length === 3 && sorted[0].item === 'paper' && sorted[0]._id === undefined, 'sort/skip/limit/projection: ' + EJSON.stringify(sorted));

// More than one batch.
coll.insertMany(Array.from({ length: 250 }, (_, i) => ({ _id: i, n: i })));
check(coll.find({ n: { $gte: 0 } }).batchSize(20).toArray().length === 250, 'several batches');

// Updates (https://www.mongodb.com/docs/manual/tutorial/update-documents/)
const u1 = coll.updateOne({ item: 'paper' }, { $set: { 'size.uom': 'cm', status: 'P' } });
check(u1.matchedCount === 1 && u1.modifiedCount === 1, 'updateOne');
const um = coll.updateMany({ qty: { $lt: 50 } }, { $set: { 'size.uom': 'in', status: 'P' } });
check(um.matchedCount === 3, 'updateMany: ' + EJSON.stringify(um));
const up = coll.updateOne({ item: 'sketchbook' }, { $set: { qty: 10 } }, { upsert: true });
check(up.upsertedCount === 1 && coll.findOne({ item: 'sketchbook' }).qty === 10, 'upsert');
const r = coll.replaceOne({ item: 'paper' }, { item: 'paper', instock: [{ warehouse: 'A', qty: 60 }] });
check(r.modifiedCount === 1 && coll.findOne({ item: 'paper' }).qty === undefined, 'replaceOne');
const fam = coll.findOneAndUpdate({ item: 'mat' }, { $inc: { qty: 5 } }, { returnDocument: 'after' });
check(fam.qty === 90, 'findOneAndUpdate');

// Deletes and counts (https://www.mongodb.com/docs/manual/tutorial/remove-documents/)
check(coll.deleteOne({ status: 'D' }).deletedCount === 1, 'deleteOne');
check(coll.deleteMany({ n: { $gte: 100 } }).deletedCount === 150, 'deleteMany');
check(coll.countDocuments({ n: { $exists: true } }) === 100, 'countDocuments');
check(coll.estimatedDocumentCount() === 108, 'estimatedDocumentCount: ' + coll.estimatedDocumentCount());
check(EJSON.stringify(coll.distinct('status').sort()) === '["A","P"]', 'distinct: ' + EJSON.stringify(coll.distinct('status')));

// Errors keep MongoDB's codes.
let dup = null;
try { coll.insertOne({ _id: 5 }); } catch (e) { dup = e; }
check(dup !== null && dup.code === 11000, 'duplicate key: ' + dup);
check(db.getSiblingDB('compat_crud').getCollectionNames().includes('inventory'), 'getCollectionNames');
check(coll.drop() === true, 'drop');
check(!db.getSiblingDB('compat_crud').getCollectionNames().includes('inventory'), 'dropped');
print('crud.js: all checks passed');
// expect: crud.js: all checks passed
