// Replays one TTL case file (compat/ttl/*.json, named by EBB_TTL_CASE) in mongosh, step by step,
// with the rules compat/src/ttl.rs documents and applies to the mongodb crate run:
//   {command, db?, expect}      run a command; its reply (or {ok: 0, code, codeName, errmsg})
//                               must match expect
//   {advanceMs}                 move the frozen test clock forward
//   {expectIds?, expectCount?}  the _ids find({}) returns (as a set), countDocuments({})
// {"$clockPlusMs": k} stands for the date k ms after the clock's current (frozen) instant.
// Prints "ebb-ttl-case: PASS", or "ebb-ttl-case: FAIL step N (...): what differed" and exits 1.
//
// Usage: EBB_TTL_CASE=case.json mongosh <uri> --quiet --norc --file run_case.js

const WRAPPERS = ['$numberInt', '$numberLong', '$numberDouble', '$numberDecimal', '$date', '$oid', '$clockPlusMs'];
const NUMERIC = ['Int32', 'Double', 'Long', 'Decimal128'];

const casePath = process.env.EBB_TTL_CASE;
const spec = JSON.parse(fs.readFileSync(casePath, 'utf8'));
let now = null; // the frozen clock's instant, in ms, once known

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isWrapper(v) {
  return isObject(v) && Object.keys(v).length === 1 && WRAPPERS.includes(Object.keys(v)[0]);
}

// Replaces every {$clockPlusMs: k} with a canonical $date, so EJSON can read the rest.
function substitute(v) {
  if (Array.isArray(v)) return v.map(substitute);
  if (!isObject(v)) return v;
  if (isWrapper(v) && '$clockPlusMs' in v) {
    if (now === null) throw new Error("the clock's instant is not known yet");
    return { $date: { $numberLong: String(now + v.$clockPlusMs) } };
  }
  const out = {};
  for (const k of Object.keys(v)) out[k] = substitute(v[k]);
  return out;
}

// Case JSON to BSON values, as the mongodb crate run converts it.
function toBson(v) {
  return EJSON.parse(JSON.stringify(substitute(v)), { relaxed: false });
}

function bsonType(v) {
  if (v === null || v === undefined) return String(v);
  if (typeof v === 'number') return 'number';
  if (v instanceof Date) return 'Date';
  if (typeof v === 'object' && v._bsontype) return v._bsontype;
  return typeof v;
}

function numericValue(v) {
  if (typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && NUMERIC.includes(v._bsontype)) return Number(v.toString());
  return undefined;
}

function show(v) {
  try {
    return EJSON.stringify(v, { relaxed: false });
  } catch (e) {
    return String(v);
  }
}

// The same matching rules as check() in compat/src/ttl.rs.
function check(expected, actual, path) {
  const here = path === '' ? 'reply' : path;
  const differ = () => new Error(`${here}: expected ${JSON.stringify(expected)}, got ${show(actual)}`);
  if (actual === undefined) {
    throw new Error(`${here}: expected ${JSON.stringify(expected)}, got nothing`);
  }
  if (isWrapper(expected)) {
    const want = toBson(expected);
    if (want instanceof Date) {
      if (!(actual instanceof Date) || actual.getTime() !== want.getTime()) throw differ();
      return;
    }
    if (bsonType(want) !== bsonType(actual)) throw differ();
    if (want._bsontype === 'Double') {
      const a = want.valueOf();
      const b = actual.valueOf();
      if (!(a === b || (Number.isNaN(a) && Number.isNaN(b)))) throw differ();
      return;
    }
    if (want.toString() !== actual.toString()) throw differ();
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) throw differ();
    expected.forEach((e, i) => check(e, actual[i], `${here}.${i}`));
    return;
  }
  if (isObject(expected)) {
    if (!isObject(actual) || actual._bsontype || actual instanceof Date) throw differ();
    for (const k of Object.keys(expected)) {
      check(expected[k], actual[k], path === '' ? k : `${path}.${k}`);
    }
    return;
  }
  if (typeof expected === 'number') {
    if (numericValue(actual) !== expected) throw differ();
    return;
  }
  if (actual !== expected) throw differ();
}

// _id order: numbers by value, then strings, then the rest by their text.
function idOrder(a, b) {
  const rank = (v) => (numericValue(v) !== undefined ? 0 : typeof v === 'string' ? 1 : 2);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return numericValue(a) - numericValue(b);
  const sa = ra === 1 ? a : show(a);
  const sb = rb === 1 ? b : show(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

function runCommand(dbName, cmd) {
  try {
    // promoteValues: false keeps int32, int64 and double apart, so typed expectations are exact.
    // (Assigned before returning: mongosh's implicit await must happen inside the try.)
    const reply = db.getSiblingDB(dbName).runCommand(cmd, { promoteValues: false });
    return reply;
  } catch (e) {
    // (With promoteValues: false the error's code arrives as an Int32 object.)
    if (e && numericValue(e.code) !== undefined) {
      return { ok: 0, code: numericValue(e.code), codeName: e.codeName, errmsg: e.errmsg || e.message };
    }
    throw e;
  }
}

function describe(step, i) {
  let what = 'expect';
  if ('command' in step) what = `command ${Object.keys(step.command)[0]}`;
  else if ('advanceMs' in step) what = `advanceMs ${step.advanceMs}`;
  return step.note === undefined ? `step ${i + 1} (${what})` : `step ${i + 1} (${what}; ${step.note})`;
}

function runStep(step) {
  const coll = db.getSiblingDB(spec.db).getCollection(spec.collection);
  if ('command' in step) {
    const cmd = toBson(step.command);
    const reply = runCommand(step.db === undefined ? spec.db : step.db, cmd);
    if (Object.keys(step.command)[0] === 'ebbAdvanceClock' && reply.now instanceof Date) {
      now = reply.now.getTime();
    }
    try {
      check(step.expect, reply, '');
    } catch (e) {
      const text = show(reply);
      throw new Error(`${e.message} (reply: ${text.length > 500 ? text.slice(0, 500) + '…' : text})`);
    }
  } else if ('advanceMs' in step) {
    const reply = runCommand("admin", { ebbAdvanceClock: NumberLong(String(step.advanceMs)) });
    if (reply.frozen !== true) throw new Error(`the clock is not frozen: ${show(reply)}`);
    if (!(reply.now instanceof Date)) throw new Error(`ebbAdvanceClock answered ${show(reply)}`);
    now = reply.now.getTime();
  } else {
    if (step.expectIds !== undefined) {
      const want = step.expectIds.map(toBson).sort(idOrder);
      const got = coll.find({}).toArray().map((d) => d._id).sort(idOrder);
      const same = want.length === got.length && want.every((w, i) => idOrder(w, got[i]) === 0);
      if (!same) {
        throw new Error(`find({}) _ids: expected ${show(want)}, got ${show(got)}`);
      }
    }
    if (step.expectCount !== undefined) {
      const got = coll.countDocuments({});
      if (got !== step.expectCount) {
        throw new Error(`countDocuments({}): expected ${step.expectCount}, got ${got}`);
      }
    }
  }
}

let failure = null;
for (let i = 0; i < spec.steps.length && failure === null; i++) {
  try {
    runStep(spec.steps[i]);
  } catch (e) {
    failure = `${describe(spec.steps[i], i)}: ${e && e.message ? e.message : e}`;
  }
}
if (failure === null) {
  print('ebb-ttl-case: PASS');
} else {
  print(`ebb-ttl-case: FAIL ${failure}`);
  quit(1);
}
