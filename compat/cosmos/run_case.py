"""Replays one Cosmos DB profile case (compat/cosmos/*.json, named by EBB_COSMOS_CASE) through
pymongo against the server EBB_URI names, with the rules compat/src/ttl.rs documents and
applies to the mongodb crate run (and compat/ttl/run_case.js to the mongosh run):

  {command, db?, expect}      run a command; its reply (or {ok: 0, code, codeName, errmsg})
                              must match expect
  {advanceMs}                 move the frozen test clock forward
  {expectIds?, expectCount?}  the _ids find({}) returns (as a set), countDocuments({})

{"$clockPlusMs": k} stands for the date k ms after the clock's current (frozen) instant.
Case JSON becomes BSON as in the other two runs: a plain integral number is an int32 (an
int64 beyond its range), any other number a double; type wrappers give their types.
Expectations: an object matches a document holding at least its keys, an array item by item,
a plain number any numeric type of that value, a wrapper only its type and value. Replies are
read with int32 as int, int64 as Int64 and dates as DatetimeMS, so types stay apart.

Prints "ebb-cosmos-case: PASS", or "ebb-cosmos-case: FAIL step N (...): what differed" and
exits 1.
"""
import decimal
import json
import math
import os
import sys

from bson import json_util
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId
import pymongo
from pymongo.errors import OperationFailure

WRAPPERS = ("$numberInt", "$numberLong", "$numberDouble", "$numberDecimal", "$date", "$oid",
            "$clockPlusMs")
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
CODEC = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)

now = None  # the frozen clock's instant, in ms, once known


class CaseError(Exception):
    pass


def is_wrapper(v):
    return isinstance(v, dict) and len(v) == 1 and next(iter(v)) in WRAPPERS


def plain_number(n):
    """A JSON number (int, or Decimal from the parser) as the other two runs convert it."""
    if isinstance(n, int):
        return n if INT32[0] <= n <= INT32[1] else Int64(n)
    f = float(n)
    integral = math.isfinite(f) and f == int(f) and not (f == 0 and math.copysign(1, f) < 0)
    if integral and INT32[0] <= f <= INT32[1]:
        return int(f)
    if integral and -(2.0**63) <= f < 2.0**63:
        return Int64(int(f))
    return f


def wrapper(key, inner):
    if key == "$numberInt":
        value = int(inner)
        if not INT32[0] <= value <= INT32[1]:
            raise CaseError(f"bad $numberInt: {inner}")
        return value
    if key == "$numberLong":
        return Int64(int(inner))
    if key == "$numberDouble":
        return float({"Infinity": "inf", "-Infinity": "-inf"}.get(inner, inner))
    if key == "$numberDecimal":
        return Decimal128(inner)
    if key == "$oid":
        return ObjectId(inner)
    if key == "$date":
        if isinstance(inner, dict) and "$numberLong" in inner:
            return DatetimeMS(int(inner["$numberLong"]))
        if isinstance(inner, int):
            return DatetimeMS(inner)
        parsed = json_util.loads(json.dumps({"$date": inner}))
        return DatetimeMS(parsed)
    if key == "$clockPlusMs":
        if now is None:
            raise CaseError("the clock's instant is not known yet")
        return DatetimeMS(now + int(inner))
    raise CaseError(f"unknown wrapper {key}")


def to_bson(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, decimal.Decimal)):
        return plain_number(v)
    if isinstance(v, list):
        return [to_bson(x) for x in v]
    if is_wrapper(v):
        key, inner = next(iter(v.items()))
        return wrapper(key, inner)
    return {k: to_bson(x) for k, x in v.items()}


def numeric(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, Decimal128):
        return float(v.to_decimal())
    return None


def show(v):
    return json_util.dumps(v, json_options=json_util.CANONICAL_JSON_OPTIONS)


def type_of(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, Int64):
        return "int64"
    if isinstance(v, int):
        return "int32"
    return type(v).__name__


def check(expected, actual, path):
    here = path or "reply"

    def differ():
        return CaseError(f"{here}: expected {json.dumps(expected, default=str)}, got {show(actual)}")

    if actual is _MISSING:
        raise CaseError(f"{here}: expected {json.dumps(expected, default=str)}, got nothing")
    if is_wrapper(expected):
        want = to_bson(expected)
        if type_of(want) != type_of(actual):
            raise differ()
        if isinstance(want, float):
            if not (want == actual or (math.isnan(want) and math.isnan(actual))):
                raise differ()
        elif isinstance(want, Decimal128):
            if str(want) != str(actual):
                raise differ()
        elif want != actual:
            raise differ()
        return
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise differ()
        for k, v in expected.items():
            check(v, actual.get(k, _MISSING), f"{path}.{k}" if path else k)
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise differ()
        for i, (e, a) in enumerate(zip(expected, actual)):
            check(e, a, f"{here}.{i}")
        return
    if isinstance(expected, bool):
        if not (isinstance(actual, bool) and actual == expected):
            raise differ()
        return
    if isinstance(expected, (int, decimal.Decimal)):
        if numeric(actual) != float(expected):
            raise differ()
        return
    if expected is None:
        if actual is not None:
            raise differ()
        return
    if not (isinstance(actual, str) and actual == expected):
        raise differ()


_MISSING = object()


def run_command(client, db_name, cmd):
    try:
        return client.get_database(db_name).command(cmd, codec_options=CODEC)
    except OperationFailure as e:
        details = e.details or {}
        return {"ok": 0.0, "code": e.code, "codeName": details.get("codeName"),
                "errmsg": details.get("errmsg", str(e))}


def id_key(v):
    n = numeric(v)
    if n is not None:
        return (0, n, "")
    if isinstance(v, str):
        return (1, 0, v)
    return (2, 0, show(v))


def run_step(client, spec, step):
    global now
    coll = client.get_database(spec["db"], codec_options=CODEC)[spec["collection"]]
    if "command" in step:
        cmd = to_bson(step["command"])
        reply = run_command(client, step.get("db", spec["db"]), cmd)
        if next(iter(step["command"])) == "ebbAdvanceClock" and isinstance(reply.get("now"), DatetimeMS):
            now = int(reply["now"])
        try:
            check(step["expect"], reply, "")
        except CaseError as e:
            text = show(reply)
            raise CaseError(f"{e} (reply: {text[:500]}{'…' if len(text) > 500 else ''})")
    elif "advanceMs" in step:
        reply = run_command(client, "admin", {"ebbAdvanceClock": Int64(step["advanceMs"])})
        if reply.get("frozen") is not True:
            raise CaseError(f"the clock is not frozen: {show(reply)}")
        if not isinstance(reply.get("now"), DatetimeMS):
            raise CaseError(f"ebbAdvanceClock answered {show(reply)}")
        now = int(reply["now"])
    else:
        if "expectIds" in step:
            want = sorted((to_bson(v) for v in step["expectIds"]), key=id_key)
            got = sorted((d.get("_id") for d in coll.find({})), key=id_key)
            if [id_key(v) for v in want] != [id_key(v) for v in got]:
                raise CaseError(f"find({{}}) _ids: expected {show(want)}, got {show(got)}")
        if "expectCount" in step:
            got = coll.count_documents({})
            if got != step["expectCount"]:
                raise CaseError(f"countDocuments({{}}): expected {step['expectCount']}, got {got}")


def describe(step, i):
    if "command" in step:
        what = f"command {next(iter(step['command']))}"
    elif "advanceMs" in step:
        what = f"advanceMs {step['advanceMs']}"
    else:
        what = "expect"
    note = step.get("note")
    return f"step {i + 1} ({what}; {note})" if note is not None else f"step {i + 1} ({what})"


def main():
    with open(os.environ["EBB_COSMOS_CASE"], encoding="utf-8") as f:
        spec = json.load(f, parse_float=decimal.Decimal)
    client = pymongo.MongoClient(os.environ["EBB_URI"])
    failure = None
    try:
        for i, step in enumerate(spec["steps"]):
            try:
                run_step(client, spec, step)
            except (CaseError, pymongo.errors.PyMongoError) as e:
                failure = f"{describe(step, i)}: {e}"
                break
    finally:
        client.close()
    if failure is None:
        print("ebb-cosmos-case: PASS")
    else:
        print(f"ebb-cosmos-case: FAIL {failure}")
        sys.exit(1)


if __name__ == "__main__":
    main()
