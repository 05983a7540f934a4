"""A CRUD session through pymongo, following PyMongo's tutorial and the MongoDB manual.

Sources: https://pymongo.readthedocs.io/en/stable/tutorial.html,
https://www.mongodb.com/docs/manual/crud/
"""
import os

import pymongo
from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

client = pymongo.MongoClient(os.environ["EBB_URI"])
db = client.compat_py
db.drop_collection("posts")
posts = db.posts

post_id = posts.insert_one({"author": "Mike", "text": "My first blog post!", "tags": ["mongodb", "python"]}).inserted_id
assert isinstance(post_id, ObjectId)
assert posts.find_one({"_id": post_id})["author"] == "Mike"
assert posts.find_one({"author": "Eliot"}) is None

result = posts.insert_many([{"_id": i, "author": "Eliot" if i % 3 else "Mike", "n": i} for i in range(500)])
assert result.inserted_ids == list(range(500))

# find with filter, sort, skip and limit over more than one batch
docs = list(posts.find({"n": {"$gte": 100}}).sort([("n", pymongo.DESCENDING)]).skip(10).limit(300).batch_size(64))
assert [d["n"] for d in docs] == list(range(489, 189, -1)), docs[:3]
assert len(list(posts.find({"author": "Eliot"}, batch_size=10))) == 333

# counts and distinct
assert posts.count_documents({}) == 501
assert posts.count_documents({"author": "Mike"}) == 168
assert posts.count_documents({"n": {"$lt": 50}}, skip=5, limit=10) == 10
assert posts.estimated_document_count() == 501
assert sorted(posts.distinct("author")) == ["Eliot", "Mike"]
assert sorted(posts.distinct("tags")) == ["mongodb", "python"]

# updates, upserts, replacement
r = posts.update_one({"_id": 1}, {"$set": {"seen": True}, "$inc": {"n": 1000}})
assert (r.matched_count, r.modified_count) == (1, 1)
assert posts.find_one({"_id": 1})["n"] == 1001
r = posts.update_many({"author": "Mike", "n": {"$lt": 30}}, {"$set": {"flag": 1}})
assert (r.matched_count, r.modified_count) == (10, 10), r.raw_result
r = posts.update_many({"author": "Mike", "n": {"$lt": 30}}, {"$set": {"flag": 1}})
assert (r.matched_count, r.modified_count) == (10, 0), r.raw_result
r = posts.update_one({"_id": "new"}, {"$set": {"n": -1}}, upsert=True)
assert r.upserted_id == "new" and posts.find_one({"_id": "new"}) == {"_id": "new", "n": -1}
r = posts.replace_one({"_id": 2}, {"replaced": True})
assert r.modified_count == 1 and posts.find_one({"_id": 2}) == {"_id": 2, "replaced": True}
r = posts.replace_one({"_id": "nope"}, {"x": 1}, upsert=True)
assert r.upserted_id == "nope"

# findAndModify in its driver forms
doc = posts.find_one_and_update({"_id": 3}, {"$inc": {"n": 1}}, return_document=ReturnDocument.AFTER)
assert doc["n"] == 4
doc = posts.find_one_and_update({"_id": 3}, {"$inc": {"n": 1}}, projection={"n": 1, "_id": 0})
assert doc == {"n": 4}
doc = posts.find_one_and_replace({"_id": 4}, {"z": 1}, return_document=ReturnDocument.AFTER)
assert doc == {"_id": 4, "z": 1}
doc = posts.find_one_and_delete({"author": "Eliot"}, sort=[("n", pymongo.DESCENDING)])
assert doc["n"] == 1001  # _id 1 was raised to 1001 above
doc = posts.find_one_and_update({"_id": "fresh"}, {"$set": {"v": 1}}, upsert=True, return_document=ReturnDocument.AFTER)
assert doc == {"_id": "fresh", "v": 1}

# deletes
assert posts.delete_one({"_id": 5}).deleted_count == 1
assert posts.delete_one({"_id": 5}).deleted_count == 0
assert posts.delete_many({"n": {"$gte": 400}}).deleted_count == 100

# errors with MongoDB's codes
try:
    posts.insert_one({"_id": 6})
    raise AssertionError("duplicate _id accepted")
except DuplicateKeyError as e:
    assert e.code == 11000 and e.details["keyValue"] == {"_id": 6}, e.details
try:
    posts.insert_many([{"_id": "a"}, {"_id": 6}, {"_id": "b"}], ordered=False)
    raise AssertionError("duplicate _id accepted")
except BulkWriteError as e:
    assert e.details["nInserted"] == 2 and e.details["writeErrors"][0]["index"] == 1, e.details
try:
    posts.insert_one({"_id": [1, 2]})
    raise AssertionError("array _id accepted")
except OperationFailure as e:
    assert e.code == 53, e.details
try:
    posts.find_one({"n": {"$frob": 1}})
    raise AssertionError("unknown operator accepted")
except OperationFailure as e:
    assert e.code == 2 and "unknown operator: $frob" in str(e), e.details

assert "posts" in db.list_collection_names()
posts.drop()
assert "posts" not in db.list_collection_names()
print("crud.py: all checks passed")
# expect: crud.py: all checks passed
