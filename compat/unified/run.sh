#!/usr/bin/env bash
# Runs a suite of PyMongo's own tests (from the pymongo sdist on PyPI) against an already
# running Ebb, and applies the known-failures policy. See compat/unified/README.md.
#
#   compat/unified/run.sh [--uri mongodb://HOST:PORT | --host HOST --port PORT]
#                         [--suite crud|crud-replset|examples|retryable-writes|sessions|sessions-unified|causal|change-streams
#                          |retryable-writes-legacy|retryable-reads|retryable-reads-unified
#                          |transactions|transactions-unified|auth|auth-spec|crud-auth|ssl]
#                         [--async] [--junit PATH] [-- EXTRA PYTEST ARGS]
#
# --suite crud (the default): the drivers' unified CRUD spec tests, test/test_crud_unified.py,
#   known failures in compat/unified/known_failures.txt.
# --suite examples: the drivers' documentation examples, test/test_examples.py, known
#   failures in compat/unified/known_failures_examples.txt.
# --suite retryable-writes|sessions|sessions-unified|causal: test_retryable_writes_unified.py,
#   test_session.py, test_sessions_unified.py, test_causal_consistency.py, for a server
#   started with --replSet; known failures in compat/unified/known_failures_<suite>.txt.
#   So for retryable-writes-legacy (test_retryable_writes.py), retryable-reads
#   (test_retryable_reads.py), retryable-reads-unified (test_retryable_reads_unified.py),
#   transactions (test_transactions.py) and transactions-unified
#   (test_transactions_unified.py).
# The server address comes from the arguments, else $EBB_URI, else $EBB_HOST/$EBB_PORT,
# else 127.0.0.1:27017. This script starts no server.
#
# --suite auth|auth-spec|crud-auth: test_auth.py, test_auth_spec.py and the unified CRUD
#   suite, for a server started with --auth, logged in as DB_USER/DB_PASSWORD (from the
#   environment); --suite ssl: test_ssl.py, for a server started with --tlsMode requireTLS and
#   PyMongo's test certificates (the server check connects with them).
# Exit status: 0 when every failing test is listed in the suite's known-failures file,
# 1 when some failing test is not (a new failure), 2 when the suite could not be run
# (no server, download failed, pytest crashed or timed out, no test passed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
clients=${EBB_CLIENTS_DIR:-$root/.clients}
work="$clients/unified"

label=unified_crud
die() { echo "$label: $*" >&2; exit 2; }

uri=${EBB_URI:-}
host=${EBB_HOST:-}
port=${EBB_PORT:-}
suite_name=crud
async=0
junit=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --uri) uri=$2; shift 2 ;;
    --host) host=$2; uri=""; shift 2 ;;
    --port) port=$2; uri=""; shift 2 ;;
    --suite) suite_name=$2; shift 2 ;;
    --async) async=1; shift ;;
    --junit) junit=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [[ -n "$uri" ]]; then
  # PyMongo's test suite only takes a host and a port (DB_IP / DB_PORT): a single-host
  # mongodb:// URI is accepted and anything after the host list is ignored.
  [[ "$uri" =~ ^mongodb://([^/?,@]+)(/.*)?$ ]] || die "cannot use URI '$uri': need mongodb://HOST[:PORT]"
  hostport=${BASH_REMATCH[1]}
  if [[ "$hostport" =~ ^\[(.*)\]:([0-9]+)$ ]]; then host=${BASH_REMATCH[1]}; port=${BASH_REMATCH[2]}
  elif [[ "$hostport" =~ ^\[(.*)\]$ ]]; then host=${BASH_REMATCH[1]}; port=27017
  elif [[ "$hostport" == *:* ]]; then host=${hostport%:*}; port=${hostport##*:}
  else host=$hostport; port=27017
  fi
fi
host=${host:-127.0.0.1}
port=${port:-27017}
[[ "$port" =~ ^[0-9]+$ ]] || die "port '$port' is not a number"
# Each suite: its test file, its known-failures list, where its results go by default, and
# the word its lines start with.
case "$suite_name" in
  crud) file=test_crud_unified.py; known="$here/known_failures.txt"; results_name=results ;;
  # The same CRUD suite against a replica set of one (where its replica-set-only tests run).
  crud-replset) file=test_crud_unified.py; known="$here/known_failures.txt"
    results_name=results-crud-replset; label=unified_crud_replset ;;
  examples) file=test_examples.py; known="$here/known_failures_examples.txt"; results_name=results-examples
    label=test_examples ;;
  # Against a replica set of one (ebb --replSet): issue 13's suites.
  retryable-writes) file=test_retryable_writes_unified.py
    known="$here/known_failures_retryable_writes.txt"; results_name=results-retryable-writes
    label=retryable_writes ;;
  sessions) file=test_session.py; known="$here/known_failures_sessions.txt"
    results_name=results-sessions; label=sessions ;;
  sessions-unified) file=test_sessions_unified.py; known="$here/known_failures_sessions_unified.txt"
    results_name=results-sessions-unified; label=sessions_unified ;;
  causal) file=test_causal_consistency.py; known="$here/known_failures_causal.txt"
    results_name=results-causal; label=causal_consistency ;;
  retryable-writes-legacy) file=test_retryable_writes.py
    known="$here/known_failures_retryable_writes_legacy.txt"
    results_name=results-retryable-writes-legacy; label=retryable_writes_legacy ;;
  retryable-reads) file=test_retryable_reads.py; known="$here/known_failures_retryable_reads.txt"
    results_name=results-retryable-reads; label=retryable_reads ;;
  retryable-reads-unified) file=test_retryable_reads_unified.py
    known="$here/known_failures_retryable_reads_unified.txt"
    results_name=results-retryable-reads-unified; label=retryable_reads_unified ;;
  transactions) file=test_transactions.py; known="$here/known_failures_transactions.txt"
    results_name=results-transactions; label=transactions ;;
  transactions-unified) file=test_transactions_unified.py
    known="$here/known_failures_transactions_unified.txt"
    results_name=results-transactions-unified; label=transactions_unified ;;
  # Against a replica set of one: issue 15's change streams (PyMongo's API and prose tests and
  # the drivers' unified change-stream spec tests, all in test_change_stream.py).
  change-streams) file=test_change_stream.py; known="$here/known_failures_change_streams.txt"
    results_name=results-change-streams; label=change_streams ;;
  # Against a server started with --auth (issue 14); DB_USER/DB_PASSWORD name the user the
  # suite logs in as (PyMongo's harness creates it, as root, through the localhost exception
  # when it does not exist).
  auth) file=test_auth.py; known="$here/known_failures_auth.txt"; results_name=results-auth
    label=auth ;;
  auth-spec) file=test_auth_spec.py; known="$here/known_failures_auth_spec.txt"
    results_name=results-auth-spec; label=auth_spec ;;
  # The unified CRUD suite logged in as DB_USER (scripts/test: a readWrite user).
  crud-auth) file=test_crud_unified.py; known="$here/known_failures.txt"
    results_name=results-crud-auth; label=unified_crud_auth ;;
  # Against a server started with --tlsMode requireTLS and PyMongo's test certificates.
  ssl) file=test_ssl.py; known="$here/known_failures_ssl.txt"; results_name=results-ssl
    label=ssl ;;
  *) die "unknown suite '$suite_name' (crud, crud-replset, crud-auth, examples, retryable-writes, sessions, sessions-unified, causal, retryable-writes-legacy, retryable-reads, retryable-reads-unified, transactions, transactions-unified, change-streams, auth, auth-spec or ssl)" ;;
esac
if [[ $async -eq 1 ]]; then suite=test/asynchronous/$file; else suite=test/$file; fi

# --- the runner's venv: pymongo as pinned for the rest of compat/, plus pytest --------
pymongo_req=$(grep -E '^pymongo(\[[^]]*\])?==' "$root/compat/requirements.txt" | head -n1)
[[ -n "$pymongo_req" ]] || die "no pinned pymongo==X in compat/requirements.txt"
pymongo_version=${pymongo_req##*==}
venv="$work/venv"
venv_hash=$( (echo "$pymongo_req"; cat "$here/requirements.txt") | sha256sum | cut -d' ' -f1)
mkdir -p "$work"
if [[ ! -x "$venv/bin/python" ]] || [[ "$(cat "$work/venv.stamp" 2>/dev/null)" != "$venv_hash" ]]; then
  echo "$label: installing $pymongo_req and the test runner into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$pymongo_req" -r "$here/requirements.txt" \
    || die "pip install failed"
  echo "$venv_hash" > "$work/venv.stamp"
fi
py="$venv/bin/python"

# --- the sdist: downloaded once, checked against sdist.sha256, test/ extracted --------
sdist_name="pymongo-$pymongo_version.tar.gz"
sdist="$work/cache/$sdist_name"
want_sha=$(awk -v f="$sdist_name" '$2 == f { print $1 }' "$here/sdist.sha256")
if [[ ! -f "$sdist" ]]; then
  echo "$label: downloading the $sdist_name sdist from PyPI"
  mkdir -p "$work/cache"
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$work/cache" "pymongo==$pymongo_version" || die "pip download of $sdist_name failed"
  [[ -f "$sdist" ]] || die "pip download did not produce $sdist"
fi
got_sha=$(sha256sum "$sdist" | cut -d' ' -f1)
if [[ -z "$want_sha" ]]; then
  die "no checksum for $sdist_name in compat/unified/sdist.sha256; after checking it, add: $got_sha  $sdist_name"
fi
[[ "$got_sha" == "$want_sha" ]] || die "$sdist has sha256 $got_sha, compat/unified/sdist.sha256 says $want_sha"
# Only test/ and pyproject.toml (pytest's settings) are extracted: without the sdist's
# pymongo/ source tree beside test/, the suite imports the installed wheel (with its C
# extensions), the same build that the rest of compat/ uses.
src="$work/pymongo-$pymongo_version"
if [[ "$(cat "$src/.extracted" 2>/dev/null)" != "$got_sha" ]]; then
  rm -rf "$src"
  mkdir -p "$src"
  tar -xzf "$sdist" -C "$src" --strip-components=1 \
    "pymongo-$pymongo_version/test" "pymongo-$pymongo_version/pyproject.toml" || die "cannot extract $sdist"
  echo "$got_sha" > "$src/.extracted"
fi

# --- is a server there? ---------------------------------------------------------------
# (The TLS suite's server takes TLS clients only: it is asked with PyMongo's test certificates.)
certs=""
[[ "$suite_name" == ssl ]] && certs="$src/test/certificates"
"$py" - "$host" "$port" "$label" "$certs" <<'EOF' || die "no server answers at $host:$port (start Ebb first)"
import sys, pymongo
tls = {}
if sys.argv[4]:
    tls = dict(tls=True, tlsCAFile=f"{sys.argv[4]}/ca.pem", tlsCertificateKeyFile=f"{sys.argv[4]}/client.pem")
try:
    c = pymongo.MongoClient(sys.argv[1], int(sys.argv[2]), serverSelectionTimeoutMS=5000, directConnection=True, **tls)
    b = c.admin.command("buildInfo")
except pymongo.errors.PyMongoError as e:
    print(f"{sys.argv[3]}: {e.__class__.__name__}: {str(e)[:200]}", file=sys.stderr)
    sys.exit(1)
print(f"{sys.argv[3]}: server at {sys.argv[1]}:{sys.argv[2]} reports version {b.get('version')}")
EOF

# --- run ------------------------------------------------------------------------------
# With --junit, every result of this run goes beside that file, so that runs started at the same
# time (each with its own --junit) never overwrite one another's log or failure list.
if [[ -n "$junit" ]]; then
  results=$(dirname "$junit")
else
  results="$work/$results_name"
fi
mkdir -p "$results"
junit=${junit:-$results/junit.xml}
log="$results/pytest.log"
rm -f "$junit"
echo "$label: pytest $suite (log: $log)"
set +e
(
  cd "$src"
  # DB_IP/DB_PORT are how PyMongo's test/__init__.py finds the server. DISABLE_FLAKY
  # makes the result deterministic: under CI=... the suite would otherwise retry tests
  # it marks flaky.
  DB_IP="$host" DB_PORT="$port" DISABLE_FLAKY=1 \
    timeout "${EBB_UNIFIED_TIMEOUT:-1800}" "$py" -m pytest "$suite" \
      -o addopts="" -p no:cacheprovider -q -rN --junitxml="$junit" ${extra[@]+"${extra[@]}"}
) > "$log" 2>&1
rc=$?
set -e
tail -n 1 "$log" | sed 's/^/pytest: /'
case $rc in
  0|1) ;;
  124) die "pytest timed out after ${EBB_UNIFIED_TIMEOUT:-1800} s (see $log)" ;;
  *) tail -n 30 "$log" >&2; die "pytest exited $rc: the suite did not run (see $log)" ;;
esac
[[ -f "$junit" ]] || die "pytest wrote no $junit"

set +e
subset=0
[[ ${#extra[@]} -gt 0 ]] && subset=1
EBB_UNIFIED_SUBSET=$subset EBB_UNIFIED_LABEL=$label \
  "$py" "$here/summarize.py" "$junit" "$known" "$results/failures.txt"
rc=$?
set -e
[[ $rc -eq 3 ]] && die "no test of the run passed (see $log)"
exit $rc
