"""Runs one conformance file (compat/conformance/<command>[.<topic>].json) through pymongo.

A file is a JSON object (MongoDB Extended JSON v2, so {"$numberDecimal": "0.1"},
{"$numberLong": "5"} and the like keep their BSON types):

    {"command": "find",               # the command the file's rules are about
     "source": "where the rules come from (manual page, IDL file)",
     "cases": [
       {"rule": "an unknown top-level field is refused",
        "setup": [{"insert": "c", "documents": [{"_id": 1}]}],   # optional, each must succeed
        "command": {"find": "c", "random": 1},
        "db": "conformance",                                       # optional, the default
        "expect": {"ok": 0, "code": 40415, "codeName": "IDLUnknownField"},
        "errmsg": "BSON field 'find.random' is an unknown field",  # optional, a substring
        "absent": ["writeErrors"]}                                 # optional: paths not in the reply
     ]}

Every key of "expect" is a dotted path into the reply (array elements by index), and its value
must equal the reply's exactly: same BSON type, same value, documents with the same fields in
the same order (both sides are compared as encoded BSON). Before each case every database but
admin, local and config is dropped. Prints one line per case and a last line of counts; exits 1
on any failure.
"""
import os
import sys

import bson
from bson import json_util
from bson.codec_options import CodecOptions
from bson.son import SON
import pymongo

OPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL, document_class=SON)
RAW = CodecOptions(document_class=SON)

_MISSING = object()


def lookup(doc, path):
    cur = doc
    for part in path.split("."):
        if isinstance(cur, (dict, SON)) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def same(a, b):
    return bson.encode({"v": a}) == bson.encode({"v": b})


def show(v):
    return json_util.dumps(v, json_options=json_util.RELAXED_JSON_OPTIONS)


def fresh(client):
    for name in client.list_database_names():
        if name not in ("admin", "local", "config"):
            client.drop_database(name)


def run(client, case):
    fresh(client)
    db = client.get_database(case.get("db", "conformance"), codec_options=RAW)
    for cmd in case.get("setup", []):
        reply = db.command(SON(cmd), check=False)
        if reply.get("ok") != 1 or reply.get("writeErrors"):
            return f"setup {show(cmd)} answered {show(reply)}"
    reply = db.command(SON(case["command"]), check=False)
    problems = []
    for path, want in case.get("expect", {}).items():
        got = lookup(reply, path)
        if got is _MISSING:
            problems.append(f"{path} missing, want {show(want)}")
        elif not same(got, want):
            problems.append(f"{path} = {show(got)}, want {show(want)}")
    for path in case.get("absent", []):
        if lookup(reply, path) is not _MISSING:
            problems.append(f"{path} present, want it absent")
    if "errmsg" in case and case["errmsg"] not in str(reply.get("errmsg", "")):
        problems.append(f"errmsg {reply.get('errmsg')!r} lacks {case['errmsg']!r}")
    if problems:
        return "; ".join(problems) + f"\n      reply: {show(reply)}"
    return None


def main():
    path = os.environ.get("EBB_CONFORMANCE_CASE") or sys.argv[1]
    with open(path, encoding="utf-8") as f:
        spec = json_util.loads(f.read(), json_options=OPTS)
    client = pymongo.MongoClient(os.environ["EBB_URI"], document_class=SON)
    passed = failed = 0
    for i, case in enumerate(spec["cases"]):
        label = f"[{i}] {spec['command']}: {case['rule']}"
        try:
            problem = run(client, case)
        except Exception as e:  # a client-side failure is a failed case, not a crash
            problem = f"raised {type(e).__name__}: {e}"
        if problem:
            failed += 1
            print(f"FAIL {label}: {problem}")
        else:
            passed += 1
            print(f"ok   {label}")
    print(f"conformance {os.path.basename(path)}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
