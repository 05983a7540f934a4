//! Administrative and diagnostic commands: what tools and shells ask a server about itself.

use std::sync::atomic::Ordering;

use bson::raw::{CStr, cstr};
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use ebb_wire::{Compressor, MAX_BSON_OBJECT_SIZE};

use super::COMMANDS;
use super::args::{truthy, wrong_type};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::{Metrics, ServerState};

fn key(name: &str) -> CommandResult<&CStr> {
    <&CStr>::try_from(name).map_err(|e| CommandError::bad_value(e.to_string()))
}

pub(super) fn build_info(state: &ServerState) -> RawDocumentBuf {
    let mut version_array = RawArrayBuf::new();
    // A Cosmos DB account reports the API version it serves (`crate::cosmos::identity`).
    let version = if let Some(cosmos) = &state.cosmos {
        for part in cosmos.identity.version_array {
            version_array.push(part);
        }
        cosmos.identity.version
    } else {
        for part in crate::MONGODB_VERSION
            .split('.')
            .chain(std::iter::once("0"))
        {
            version_array.push(part.parse::<i32>().unwrap_or(0));
        }
        crate::MONGODB_VERSION
    };
    rawdoc! {
        "version": version,
        "gitVersion": format!("ebb-{}", crate::EBB_VERSION),
        "modules": RawArrayBuf::new(),
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "versionArray": version_array,
        "openssl": { "running": "disabled", "compiled": "disabled" },
        "buildEnvironment": {
            "distmod": "ebb",
            "distarch": std::env::consts::ARCH,
            "target_arch": std::env::consts::ARCH,
            "target_os": std::env::consts::OS,
        },
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": super::limit_i32(MAX_BSON_OBJECT_SIZE),
        "storageEngines": RawArrayBuf::new(),
        "ebbVersion": crate::EBB_VERSION,
        "ok": 1.0,
    }
}

/// A server parameter: name, value, and whether it could be set at runtime / startup.
struct Parameter {
    name: &'static str,
    value: fn(&ServerState) -> RawBson,
    runtime: bool,
    startup: bool,
}

/// The parameters `getParameter` reports, sorted by name. Only parameters whose value is true of
/// Ebb are listed.
static PARAMETERS: &[Parameter] = &[
    Parameter {
        name: "authenticationMechanisms",
        // What saslStart accepts (mongod's default list, less what Ebb does not have).
        value: |_| {
            let mut list = RawArrayBuf::new();
            list.push("MONGODB-X509");
            for m in crate::auth::scram::Mechanism::ALL {
                list.push(m.name());
            }
            RawBson::Array(list)
        },
        runtime: false,
        startup: true,
    },
    Parameter {
        name: "cursorTimeoutMillis",
        value: |_| RawBson::Int64(600_000),
        runtime: false,
        startup: false,
    },
    Parameter {
        name: "enableTestCommands",
        value: |s| RawBson::Boolean(s.config.enable_test_commands),
        runtime: false,
        startup: true,
    },
    Parameter {
        name: "featureCompatibilityVersion",
        value: |_| RawBson::Document(rawdoc! { "version": "7.0" }),
        runtime: false,
        startup: false,
    },
    Parameter {
        // Set at startup by `--internal-query-max-blocking-sort-memory-usage-bytes` (Ebb has
        // no `setParameter`); an int in mongod.
        name: "internalQueryMaxBlockingSortMemoryUsageBytes",
        value: |s| {
            RawBson::Int32(i32::try_from(s.config.max_blocking_sort_bytes).unwrap_or(i32::MAX))
        },
        runtime: false,
        startup: true,
    },
    Parameter {
        name: "logLevel",
        value: |_| RawBson::Int32(0),
        runtime: false,
        startup: false,
    },
    Parameter {
        name: "maxBSONDepth",
        value: |_| RawBson::Int32(200),
        runtime: false,
        startup: false,
    },
    Parameter {
        name: "quiet",
        value: |_| RawBson::Boolean(false),
        runtime: false,
        startup: false,
    },
    Parameter {
        name: "requireApiVersion",
        value: |_| RawBson::Boolean(false),
        runtime: false,
        startup: false,
    },
];

pub(super) fn get_parameter(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let mut all = false;
    let mut show_details = false;
    match req.body.get("getParameter").ok().flatten() {
        Some(RawBsonRef::String("*")) => all = true,
        Some(RawBsonRef::Document(opts)) => {
            for elem in opts {
                let (k, v) =
                    elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                match k.as_str() {
                    "showDetails" => show_details = truthy("getParameter.showDetails", v)?,
                    "allParameters" => all = truthy("getParameter.allParameters", v)?,
                    other => {
                        return Err(CommandError::unknown_field(&format!(
                            "getParameter.{other}"
                        )));
                    }
                }
            }
        }
        _ => {}
    }
    let mut reply = RawDocumentBuf::new();
    for p in PARAMETERS {
        if !all && req.body.get(p.name).ok().flatten().is_none() {
            continue;
        }
        let value = (p.value)(state);
        if show_details {
            let mut d = RawDocumentBuf::new();
            d.append(cstr!("value"), value);
            d.append(cstr!("settableAtRuntime"), p.runtime);
            d.append(cstr!("settableAtStartup"), p.startup);
            reply.append(key(p.name)?, d);
        } else {
            reply.append(key(p.name)?, value);
        }
    }
    if reply.is_empty() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "no option found to get",
        ));
    }
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

pub(super) fn get_cmd_line_opts(state: &ServerState) -> RawDocumentBuf {
    let mut argv = RawArrayBuf::new();
    for arg in &state.config.argv {
        argv.push(arg.as_str());
    }
    let config = &state.config;
    // mongod lists the parsed options by section, in name order.
    let mut net = rawdoc! {
        "bindIp": config.bind.as_str(),
        "port": i32::from(state.local_addr.port()),
        "maxIncomingConnections": i64::try_from(config.max_connections).unwrap_or(i64::MAX),
    };
    // `net.tls`, with the options given (mongod lists those only), in name order.
    if config.tls_mode != crate::config::TlsMode::Disabled {
        let mut tls = RawDocumentBuf::new();
        if let Some(path) = &config.tls_ca_file {
            tls.append(cstr!("CAFile"), path.display().to_string());
        }
        if config.tls_allow_connections_without_certificates {
            tls.append(cstr!("allowConnectionsWithoutCertificates"), true);
        }
        if let Some(path) = &config.tls_certificate_key_file {
            tls.append(cstr!("certificateKeyFile"), path.display().to_string());
        }
        tls.append(cstr!("mode"), config.tls_mode.name());
        net.append(cstr!("tls"), tls);
    }
    let mut parsed = rawdoc! { "net": net };
    if let Some(name) = &config.repl_set {
        parsed.append(cstr!("replication"), rawdoc! { "replSet": name.as_str() });
    }
    if config.auth {
        parsed.append(cstr!("security"), rawdoc! { "authorization": "enabled" });
    }
    parsed.append(
        cstr!("storage"),
        rawdoc! { "dbPath": config.data_dir.display().to_string() },
    );
    rawdoc! {
        "argv": argv,
        "parsed": parsed,
        "ok": 1.0,
    }
}

/// First value of a `key: value` line in a `/proc`-style file.
fn proc_field(path: &str, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == field).then(|| v.trim().to_owned())
    })
}

fn os_release(field: &str) -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix(&format!("{field}="))
                    .map(|v| v.trim_matches('"').to_owned())
            })
        })
        .unwrap_or_default()
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

pub(super) fn host_info() -> RawDocumentBuf {
    let mem_kb = proc_field("/proc/meminfo", "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<i64>().ok())
        .unwrap_or(0);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    rawdoc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": hostname(),
            "cpuAddrSize": 64,
            "memSizeMB": mem_kb / 1024,
            "memLimitMB": mem_kb / 1024,
            "numCores": i32::try_from(cores).unwrap_or(i32::MAX),
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": {
            "type": if cfg!(target_os = "linux") { "Linux" } else { std::env::consts::OS },
            "name": os_release("PRETTY_NAME"),
            "version": kernel.trim(),
        },
        "extra": {
            "cpuFrequencyMHz": proc_field("/proc/cpuinfo", "cpu MHz").unwrap_or_default(),
            "cpuString": proc_field("/proc/cpuinfo", "model name").unwrap_or_default(),
        },
        "ok": 1.0,
    }
}

/// A mongod-style structured log line (the form `getLog` returns and shells parse).
fn log_line(state: &ServerState, id: i32, msg: &str, tag: &str) -> String {
    let escape = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        r#"{{"t":{{"$date":"{}"}},"s":"W","c":"CONTROL","id":{id},"ctx":"initandlisten","msg":"{}","tags":["{tag}"]}}"#,
        state.started_at.try_to_rfc3339_string().unwrap_or_default(),
        escape(msg),
    )
}

pub(super) fn get_log(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let value = req.body.get("getLog").ok().flatten();
    match value {
        Some(RawBsonRef::String("*")) => {
            let mut names = RawArrayBuf::new();
            names.push("startupWarnings");
            Ok(rawdoc! { "names": names, "ok": 1.0 })
        }
        Some(RawBsonRef::String("startupWarnings")) => {
            let mut log = RawArrayBuf::new();
            for (i, w) in state.startup_warnings.iter().enumerate() {
                log.push(log_line(
                    state,
                    22_120 + i32::try_from(i).unwrap_or(0),
                    w,
                    "startupWarnings",
                ));
            }
            Ok(rawdoc! {
                "totalLinesWritten": i32::try_from(state.startup_warnings.len()).unwrap_or(i32::MAX),
                "log": log,
                "ok": 1.0,
            })
        }
        Some(RawBsonRef::String(other)) => Err(CommandError::new(
            ErrorCode::OperationFailed,
            format!("no RamLog named: {other}"),
        )),
        Some(other) => Err(CommandError::type_mismatch(format!(
            "Argument to getLog must be of type String; found {} of type {}",
            super::args::display(other),
            super::type_name(other.element_type()),
        ))),
        None => Err(CommandError::bad_value("getLog requires an argument")),
    }
}

pub(super) fn list_commands(state: &ServerState) -> RawDocumentBuf {
    let mut sorted: Vec<_> = COMMANDS.iter().filter(|c| c.available(state)).collect();
    sorted.sort_by_key(|c| c.name);
    let mut commands = RawDocumentBuf::new();
    for c in sorted {
        let Ok(name) = <&CStr>::try_from(c.name) else {
            continue;
        };
        commands.append(
            name,
            rawdoc! {
                "help": c.help,
                "requiresAuth": c.requires_auth,
                "secondaryOk": c.secondary_ok,
                "adminOnly": c.admin_only,
                "apiVersions": if c.api_v1 {
                    let mut v = RawArrayBuf::new();
                    v.push("1");
                    v
                } else {
                    RawArrayBuf::new()
                },
                "deprecatedApiVersions": RawArrayBuf::new(),
            },
        );
    }
    rawdoc! { "commands": commands, "ok": 1.0 }
}

/// Resident and virtual memory in MiB, from `/proc/self/statm`.
fn memory_mb() -> (i32, i32) {
    const PAGE: u64 = 4096;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut fields = statm
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let virt = fields.next().unwrap_or(0) * PAGE / (1024 * 1024);
    let resident = fields.next().unwrap_or(0) * PAGE / (1024 * 1024);
    (
        i32::try_from(resident).unwrap_or(i32::MAX),
        i32::try_from(virt).unwrap_or(i32::MAX),
    )
}

pub(super) fn server_status(state: &ServerState) -> RawDocumentBuf {
    let m = &state.metrics;
    let uptime = state.started.elapsed();
    let current = m.connections_current.load(Ordering::Relaxed);
    let available = i64::try_from(state.config.max_connections).unwrap_or(i64::MAX) - current;
    let (resident, virt) = memory_mb();
    let status = rawdoc! {
        "host": format!("{}:{}", hostname(), state.local_addr.port()),
        "version": state.cosmos.as_ref().map_or(crate::MONGODB_VERSION, |c| c.identity.version),
        "process": "ebb",
        "pid": i64::from(std::process::id()),
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": i64::try_from(uptime.as_millis()).unwrap_or(i64::MAX),
        "uptimeEstimate": i64::try_from(uptime.as_secs()).unwrap_or(i64::MAX),
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": i32::try_from(current).unwrap_or(i32::MAX),
            "available": i32::try_from(available).unwrap_or(i32::MAX),
            "totalCreated": Metrics::read(&m.connections_total),
            "rejected": Metrics::read(&m.connections_rejected),
            "active": i32::try_from(m.connections_active.load(Ordering::Relaxed)).unwrap_or(0),
        },
        "network": {
            "bytesIn": Metrics::read(&m.bytes_in),
            "bytesOut": Metrics::read(&m.bytes_out),
            "physicalBytesIn": Metrics::read(&m.bytes_in),
            "physicalBytesOut": Metrics::read(&m.bytes_out),
            "numRequests": Metrics::read(&m.requests),
            "compression": compression(m),
        },
        "opcounters": {
            "insert": Metrics::read(&m.op_insert),
            "query": Metrics::read(&m.op_query),
            "update": Metrics::read(&m.op_update),
            "delete": Metrics::read(&m.op_delete),
            "getmore": Metrics::read(&m.op_getmore),
            "command": Metrics::read(&m.op_command),
        },
        "transportSecurity": transport_security(state),
        "mem": { "bits": 64, "resident": resident, "virtual": virt, "supported": true },
        "metrics": {
            "ttl": {
                "deletedDocuments": i64::try_from(state.ttl_metrics.deleted.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
                "passes": i64::try_from(state.ttl_metrics.passes.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
            },
            "cursor": {
                "open": { "total": i64::try_from(state.cursors.len()).unwrap_or(i64::MAX) },
            },
        },
        "storageEngine": storage_engine(state.config.in_memory),
        "ebb": { "storage": storage_garbage(state) },
        "ok": 1.0,
    };
    // The block cache, in the fields of mongod's `wiredTiger.cache` that tools read.
    let status = match state.catalog.store().storage().cache() {
        Some(cache) => insert_before(&status, "ebb", cstr!("wiredTiger"), wired_tiger(&cache)),
        None => status,
    };
    let status = match &state.replset {
        // A replica set member reports `repl`: what `hello` reports of the set.
        Some(rs) => {
            let mut repl = RawDocumentBuf::new();
            super::handshake::append_replset_info(&mut repl, rs, state, cstr!("isWritablePrimary"));
            repl.append(cstr!("rbid"), 1);
            let mut out = RawDocumentBuf::new();
            for elem in status.iter_elements().map_while(Result::ok) {
                if elem.key().as_str() == "storageEngine" {
                    if let Some(t) = super::oplog_collection::oplog_truncation(state) {
                        out.append(cstr!("oplogTruncation"), t);
                    }
                    out.append(cstr!("repl"), repl.clone());
                }
                if let Ok(value) = elem.value() {
                    out.append(elem.key(), value);
                }
            }
            out
        }
        None => status,
    };
    match &state.cosmos {
        // The Cosmos DB profile reports its request units before `ok`.
        Some(cosmos) => {
            let mut out = RawDocumentBuf::new();
            for elem in status.iter_elements().map_while(Result::ok) {
                if elem.key().as_str() == "ok" {
                    out.append(cstr!("cosmos"), crate::cosmos::server_status(cosmos));
                }
                if let Ok(value) = elem.value() {
                    out.append(elem.key(), value);
                }
            }
            out
        }
        None => status,
    }
}

/// `doc` with `name: value` inserted before its field `key` (at the end without one).
fn insert_before(
    doc: &RawDocumentBuf,
    key: &str,
    name: &bson::raw::CStr,
    value: RawDocumentBuf,
) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut value = Some(value);
    for elem in doc.iter_elements().map_while(Result::ok) {
        if elem.key().as_str() == key
            && let Some(v) = value.take()
        {
            out.append(name, v);
        }
        if let Ok(v) = elem.value() {
            out.append(elem.key(), v);
        }
    }
    if let Some(v) = value {
        out.append(name, v);
    }
    out
}

/// `serverStatus.wiredTiger`: the engine's block cache under the names of mongod's
/// `wiredTiger.cache` (a block is `WiredTiger`'s page here). Only what the engine counts exactly:
/// it does not count the blocks a scan finds in the cache, so there is no "pages requested
/// from the cache" nor hit rate (docs/storage.md, "The block cache").
fn wired_tiger(cache: &crate::storage::CacheStatus) -> RawDocumentBuf {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    rawdoc! {
        "cache": {
            "maximum bytes configured": count(cache.capacity),
            "bytes currently in the cache": count(cache.used),
            "tracked dirty bytes in the cache": count(cache.unflushed),
            "pages read into cache": count(cache.read_in),
        },
    }
}

/// `serverStatus.transportSecurity`: TLS connections accepted since start, by protocol version
/// (TLS 1.0 and 1.1 are never accepted; every accepted connection has a known version).
fn transport_security(state: &ServerState) -> RawDocumentBuf {
    let (tls12, tls13) = state.tls.as_ref().map_or((0, 0), |tls| {
        (Metrics::read(&tls.tls12), Metrics::read(&tls.tls13))
    });
    rawdoc! { "1.0": 0_i64, "1.1": 0_i64, "1.2": tls12, "1.3": tls13, "unknown": 0_i64 }
}

/// `serverStatus.ebb.storage`: what deletion left behind and what removes it (docs/storage.md,
/// "Garbage and compaction"). Per keyspace, the garbage entries written since start and the
/// debt (written since its last compaction), and the hidden entries scans stepped over since
/// (which make a compaction due once they cost as much as one).
fn storage_garbage(state: &ServerState) -> RawDocumentBuf {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let status = state.catalog.store().storage().ledger().status();
    let mut garbage = RawDocumentBuf::new();
    for (ks, written, debt) in &status.keyspaces {
        let waste = status
            .scan_waste
            .iter()
            .find(|(k, _)| k == ks)
            .map_or(0, |(_, w)| *w);
        garbage.append(
            bson::raw::CString::try_from(ks.name()).unwrap_or_else(|_| cstr!("?").to_owned()),
            rawdoc! {
                "tombstones": count(written.tombstones),
                "supersededVersions": count(written.superseded),
                "expiredDocuments": count(written.expired),
                "sinceCompaction": count(debt.total()),
                "scannedOver": count(waste),
            },
        );
    }
    rawdoc! {
        "dropsPending": count(state.catalog.drops_pending().unwrap_or(0)),
        "compactions": count(status.compactions),
        "bytesFreed": count(status.bytes_freed),
        "expiredDropped": count(state.catalog.store().storage().expired_dropped()),
        "garbage": garbage,
    }
}

/// `serverStatus.storageEngine`, with mongod's fields in mongod's order (its `StorageSSS`
/// section). Ebb keeps no oplog, so the oldest timestamp crash recovery needs is mongod's
/// "none", `Timestamp(0, 0)`; drops take effect at once (no drop-pending idents); there are
/// no transactions, so no snapshot read concern. The durable store is fjall; `--in-memory`
/// is mongod's non-persistent `inMemory` engine's counterpart.
fn storage_engine(in_memory: bool) -> RawDocumentBuf {
    rawdoc! {
        "name": if in_memory { "inMemory" } else { "fjall" },
        "supportsCommittedReads": true,
        "oldestRequiredTimestampForCrashRecovery": bson::Timestamp { time: 0, increment: 0 },
        "supportsPendingDrops": false,
        "dropPendingIdents": 0_i64,
        "supportsSnapshotReadConcern": false,
        "readOnly": false,
        "persistent": !in_memory,
        "backupCursorOpen": false,
    }
}

fn compression(m: &Metrics) -> RawDocumentBuf {
    let mut doc = RawDocumentBuf::new();
    for c in [Compressor::Snappy, Compressor::Zstd, Compressor::Zlib] {
        let n = &m.compression[usize::from(c.id())];
        let Ok(name) = <&CStr>::try_from(c.name()) else {
            continue;
        };
        doc.append(
            name,
            rawdoc! {
                "compressor": {
                    "bytesIn": Metrics::read(&n.compressor_in),
                    "bytesOut": Metrics::read(&n.compressor_out),
                },
                "decompressor": {
                    "bytesIn": Metrics::read(&n.decompressor_in),
                    "bytesOut": Metrics::read(&n.decompressor_out),
                },
            },
        );
    }
    doc
}

/// The test-only `ebbAdvanceClock: <ms>` (optionally `freeze: true|false`, applied first):
/// moves the server's clock forward; a frozen clock stands still between calls. The dispatcher
/// only routes here when the server runs with `--enable-test-commands`.
pub(super) fn advance_clock(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let ms = match req.body.get("ebbAdvanceClock").ok().flatten() {
        Some(RawBsonRef::Int32(n)) => i64::from(n),
        Some(RawBsonRef::Int64(n)) => n,
        #[expect(clippy::cast_possible_truncation, reason = "checked to be integral")]
        Some(RawBsonRef::Double(d)) if d.fract() == 0.0 => d as i64,
        Some(other) => return Err(wrong_type("ebbAdvanceClock", other, " 'long'")),
        None => {
            return Err(CommandError::bad_value(
                "ebbAdvanceClock needs a number of milliseconds",
            ));
        }
    };
    if ms < 0 {
        return Err(CommandError::bad_value("the clock only moves forward"));
    }
    if let Some(freeze) = req.body.get("freeze").ok().flatten() {
        state
            .clock
            .freeze(truthy("ebbAdvanceClock.freeze", freeze)?);
    }
    state.clock.advance(ms);
    Ok(rawdoc! {
        "now": bson::DateTime::from_millis(state.now_ms()),
        "frozen": state.clock.is_frozen(),
        "ok": 1.0,
    })
}

/// `shutdown` (`src/mongo/db/commands/shutdown.idl`: `force` a bool, `timeoutSecs` a safeInt64,
/// strict). Both concern replica sets (stepping down, quiesce mode) and change nothing on a
/// standalone server: it stops accepting, interrupts running commands at their next safe point
/// (they answer `InterruptedAtShutdown`), makes every commit durable and exits. Without
/// authentication mongod takes the command only from localhost. No reply is sent: the
/// connection closes.
/// `rotateCertificates`: reads the TLS key, chain and CA files again for new connections (open
/// ones keep theirs), and logs the client's `message`. Without TLS there is nothing to rotate.
pub(super) fn rotate_certificates(req: &Request<'_>, state: &ServerState) -> CommandResult {
    if let Some(tls) = &state.tls {
        tls.rotate()?;
        tracing::info!("Successfully rotated X509 certificates.");
    }
    let message = req.body.get_str("message").ok().unwrap_or_default();
    tracing::info!(message, "Certificate rotation completed successfully");
    Ok(rawdoc! { "ok": 1.0 })
}

pub(super) fn shutdown(
    _req: &Request<'_>,
    ctx: &mut crate::dispatch::ConnCtx,
    state: &ServerState,
) -> CommandResult {
    // `force` and `timeoutSecs` (checked by the command table) change nothing on a standalone
    // server, whose shutdown waits for no secondary.
    if !ctx.peer.ip().is_loopback() {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            "shutdown must run from localhost when running db without auth",
        ));
    }
    tracing::info!(remote = %ctx.peer, "shutdown command received");
    ctx.closing = true;
    state.shutdown.cancel();
    Ok(rawdoc! { "ok": 1.0 })
}
