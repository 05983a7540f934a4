//! Server configuration, from the command line or built by tests.

use std::path::PathBuf;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON object a line, as mongod writes its log.
    Json,
}

/// mongod's `--tlsMode`: whether connections may, or must, use TLS. `allowTLS` and `preferTLS`
/// differ in mongod only for the connections it opens to other members; Ebb opens none, so both
/// serve TLS and plain-text clients on the one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TlsMode {
    /// No TLS: a client that starts a TLS handshake is closed.
    #[default]
    #[value(name = "disabled")]
    Disabled,
    /// TLS and plain-text clients alike.
    #[value(name = "allowTLS")]
    AllowTls,
    /// TLS and plain-text clients alike.
    #[value(name = "preferTLS")]
    PreferTls,
    /// TLS only: a plain-text client is closed at its first message.
    #[value(name = "requireTLS")]
    RequireTls,
}

impl TlsMode {
    /// The name mongod gives the mode (`getCmdLineOpts`).
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// Which product the server behaves as (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Profile {
    /// MongoDB: what Ebb is without a profile.
    #[default]
    #[value(name = "mongodb")]
    MongoDb,
    /// An Azure Cosmos DB for MongoDB (RU) account, as `crate::cosmos` describes.
    #[value(name = "cosmos")]
    Cosmos,
}

/// The API version a Cosmos DB for MongoDB (RU) account serves (`--cosmos-server-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, clap::ValueEnum)]
pub enum CosmosVersion {
    /// API 4.2.
    #[value(name = "4.2")]
    V4_2,
    /// API 5.0.
    #[value(name = "5.0")]
    V5_0,
    /// API 6.0.
    #[value(name = "6.0")]
    V6_0,
    /// API 7.0.
    #[default]
    #[value(name = "7.0")]
    V7_0,
}

impl CosmosVersion {
    /// The version as written on the command line and in Cosmos DB's pages (`"4.2"`).
    pub fn name(self) -> &'static str {
        match self {
            CosmosVersion::V4_2 => "4.2",
            CosmosVersion::V5_0 => "5.0",
            CosmosVersion::V6_0 => "6.0",
            CosmosVersion::V7_0 => "7.0",
        }
    }
}

/// Whether the Cosmos DB profile throttles past a budget (`--cosmos-throttle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Switch {
    /// On.
    #[default]
    #[value(name = "on")]
    On,
    /// Off.
    #[value(name = "off")]
    Off,
}

/// Everything the server is started with.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "ebb",
    version,
    about = "A MongoDB-compatible document database with Cosmos DB's TTL model"
)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one field per command-line switch, as mongod's options"
)]
pub struct Config {
    /// Address to listen on (mongod's `--bind_ip`).
    #[arg(long, alias = "bind_ip", default_value = "127.0.0.1")]
    pub bind: String,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 27017)]
    pub port: u16,
    /// Where the durable store lives.
    #[arg(long, alias = "dbpath", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Keep everything in memory instead (nothing survives a restart).
    #[arg(long)]
    pub in_memory: bool,
    /// The durable store's block cache, in GB (mongod's `--wiredTigerCacheSizeGB`); by
    /// default, as `WiredTiger`'s: half of the memory less 1 GB, at least 256 MB. The memory is
    /// taken only as data is read into it.
    #[arg(long = "cache-size-gb", alias = "wiredTigerCacheSizeGB", value_name = "GB", value_parser = cache_size_gb)]
    pub cache_size_gb: Option<f64>,
    /// Whether a command that reads a large collection scan to its end (a count, an
    /// aggregation's input, `distinct`) may read its two halves on two threads while another
    /// core is idle.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub split_scans: bool,
    /// Whether, while one client has the server to itself, a write waiting to be durable runs
    /// the journal's `fdatasync` on its own thread (saving two thread wake-ups) rather than
    /// handing it to the sync thread. With more clients active, writes always share the sync
    /// thread's group commits.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_sync: bool,
    /// Most connections open at once; more are accepted and closed at once, as mongod does
    /// past `maxIncomingConnections`.
    #[arg(long, alias = "maxConns", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Enables test-only commands (`ebbAdvanceClock`). Never on a server with real data.
    #[arg(long)]
    pub enable_test_commands: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seconds to let in-flight requests finish on SIGINT/SIGTERM before closing anyway.
    #[arg(long, default_value_t = 10)]
    pub shutdown_timeout_secs: u64,
    /// Bytes of documents a blocking sort may hold in memory (mongod's
    /// `internalQueryMaxBlockingSortMemoryUsageBytes`, reported by `getParameter`); past it a
    /// sort spills to temporary files, or fails when the command set `allowDiskUse: false`.
    #[arg(
        long = "internal-query-max-blocking-sort-memory-usage-bytes",
        default_value_t = crate::sorter::DEFAULT_MAX_SORT_BYTES
    )]
    pub max_blocking_sort_bytes: usize,
    /// Runs as the primary of a one-member replica set of this name (mongod's `--replSet`),
    /// initiated on its own: `hello` reports the set, replies carry `$clusterTime`.
    #[arg(long = "replSet", alias = "repl-set", value_name = "NAME")]
    pub repl_set: Option<String>,
    /// The `host:port` the replica set's member is known by (in `hello.hosts`, `me`,
    /// `primary`), for a server reached through another address (containers, NAT). By default,
    /// the address and port it listens on.
    #[arg(long, value_name = "HOST:PORT", requires = "repl_set", value_parser = host_and_port)]
    pub advertise_host: Option<String>,
    /// The most bytes, in MiB, the replica set member's oplog keeps (mongod's `--oplogSize`,
    /// `replication.oplogSizeMB` in its configuration file); by default 5% of the data
    /// directory's free disk space, within 990 MB and 50 GB (for `--in-memory`, 5% of the
    /// physical memory, within 50 MB and 50 GB). Ignored without `--replSet`, as by mongod.
    #[arg(long = "oplogSizeMB", alias = "oplogSize", value_name = "MB", value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub oplog_size_mb: Option<u64>,
    /// The hours an oplog entry stays at least, whatever the oplog's size (mongod's
    /// `--oplogMinRetentionHours`; 0, the default: none). Ignored without `--replSet`.
    #[arg(long = "oplogMinRetentionHours", value_name = "HOURS", value_parser = min_retention_hours)]
    pub oplog_min_retention_hours: Option<f64>,
    /// Whether clients connect with TLS (mongod's `--tlsMode`).
    #[arg(long = "tlsMode", value_enum, default_value_t = TlsMode::Disabled)]
    pub tls_mode: TlsMode,
    /// The server's private key and certificate chain, in one PEM file (mongod's
    /// `--tlsCertificateKeyFile`); needed by every mode but `disabled`.
    #[arg(long = "tlsCertificateKeyFile", value_name = "PATH")]
    pub tls_certificate_key_file: Option<PathBuf>,
    /// The certificate authorities, in PEM, that client certificates must chain to (mongod's
    /// `--tlsCAFile`); needed by every mode but `disabled`, as mongod 7.0 needs a chain of trust.
    #[arg(long = "tlsCAFile", value_name = "PATH")]
    pub tls_ca_file: Option<PathBuf>,
    /// Lets clients connect without a certificate; one that presents a certificate must still
    /// present a valid one (mongod's `--tlsAllowConnectionsWithoutCertificates`).
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    pub tls_allow_connections_without_certificates: bool,
    /// Access control (mongod's `--auth`): every command but those mongod runs for anyone needs
    /// a logged-in user with the privileges it needs. With no user yet, a client on the
    /// loopback interface may create the first one (the localhost exception).
    #[arg(long)]
    pub auth: bool,
    /// Behave as another product on the wire: `cosmos` is a local Azure Cosmos DB for
    /// MongoDB (RU) account (see `crate::cosmos`). Without it, Ebb is a MongoDB server.
    #[arg(long, value_enum, default_value_t = Profile::MongoDb)]
    pub profile: Profile,
    /// The Cosmos DB profile's account name: the one user, and the connection string's
    /// `appName=@ACCOUNT@`.
    #[arg(long, value_name = "ACCOUNT", default_value = "localhost")]
    pub cosmos_account: String,
    /// The Cosmos DB profile's account key: the user's password. By default a fixed
    /// development key, printed at start.
    #[arg(long, value_name = "KEY")]
    pub cosmos_key: Option<String>,
    /// The API version the Cosmos DB profile serves: what `hello`/`buildInfo` report and which
    /// features are refused.
    #[arg(long, value_enum, value_name = "VERSION", default_value_t = CosmosVersion::V7_0)]
    pub cosmos_server_version: CosmosVersion,
    /// Whether the Cosmos DB profile answers `16500 TooManyRequests` past a budget of
    /// request units (`off` for functional tests).
    #[arg(long, value_enum, value_name = "on|off", default_value_t = Switch::On)]
    pub cosmos_throttle: Switch,
    /// How long, in seconds, the Cosmos DB profile retries a throttled request inside the
    /// server before answering 16500 (Cosmos DB's server-side retry; 0: answer at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub cosmos_server_retries: u64,
    /// A constant of the Cosmos DB profile's request-charge formula (see
    /// `docs/cosmos-request-units.md`): `point_read`, `read_kb`, `query`, `query_doc`,
    /// `index_read`, `write`, `write_kb` or `index_write`, in request units. Repeatable.
    #[arg(long = "cosmos-ru", value_name = "NAME=VALUE", value_parser = crate::cosmos::ru::parse_setting)]
    pub cosmos_ru: Vec<(String, f64)>,
    /// The arguments the process was started with (`getCmdLineOpts.argv`).
    #[arg(skip)]
    pub argv: Vec<String>,
    /// Test-only switch, never on the command line: the Cosmos DB profile without its TLS and
    /// access control (a plain port, no user), so that tests of what the profile answers can
    /// speak raw bytes. The profile's own connection is tested without it.
    #[arg(skip)]
    pub cosmos_plain: bool,
    /// Benchmark-only switch, never on the command line: in replica-set mode, writes no oplog
    /// (`local.oplog.rs` stays empty, change streams are refused as on a standalone), so that
    /// `benches/change_streams.rs` can weigh what logging every change costs. Breaks change
    /// streams and `local.oplog.rs`; nothing else should set it.
    #[arg(skip)]
    pub bench_without_oplog: bool,
}

/// Checks `--oplogMinRetentionHours`: a number of hours, 0 or more.
/// The memory this process may use: the physical memory (`/proc/meminfo`'s `MemTotal`), or the
/// limit of its control group when lower (cgroup v2's `memory.max`, as in a container); 0 when
/// unknown.
pub fn physical_memory() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let kb = line.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?;
                kb.trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kb| kb.saturating_mul(1024));
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    match limit {
        Some(limit) if limit > 0 && (total == 0 || limit < total) => limit,
        _ => total,
    }
}

fn cache_size_gb(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        // mongod's bounds for `--wiredTigerCacheSizeGB`: 0.25 to 10000.
        Ok(gb) if (0.25..=10_000.0).contains(&gb) => Ok(gb),
        _ => Err(format!(
            "'{value}' is not a cache size in GB (0.25 to 10000)"
        )),
    }
}

impl Config {
    /// The block cache of the durable store, in bytes: `--cache-size-gb`, or `WiredTiger`'s
    /// default for `memory` bytes of memory (half of it less 1 GB, at least 256 MB).
    pub fn cache_bytes(&self, memory: u64) -> u64 {
        const GB: f64 = 1_073_741_824.0;
        match self.cache_size_gb {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked to be 0.25 to 10000 GB"
            )]
            Some(gb) => (gb * GB) as u64,
            None => (memory.saturating_sub(1 << 30) / 2).max(256 << 20),
        }
    }
}

fn min_retention_hours(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(h) if h >= 0.0 && h.is_finite() => Ok(h),
        _ => Err(format!("'{value}' is not a number of hours (0 or more)")),
    }
}

/// Checks a `host:port` (`[v6]:port` for an IPv6 address): a host, and a port from 1 to 65535.
fn host_and_port(value: &str) -> Result<String, String> {
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("'{value}' is not HOST:PORT"))?;
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("'{value}' has no host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(value.to_owned()),
        _ => Err(format!("'{port}' is not a port (1 to 65535)")),
    }
}

/// Defaults for embedding and tests: like the command line's, except that storage is in memory
/// (set `in_memory: false` and `data_dir` for a durable store).
impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 27017,
            data_dir: PathBuf::from("./data"),
            in_memory: true,
            enable_test_commands: false,
            max_connections: 10_000,
            log_format: LogFormat::Text,
            shutdown_timeout_secs: 10,
            max_blocking_sort_bytes: crate::sorter::DEFAULT_MAX_SORT_BYTES,
            repl_set: None,
            advertise_host: None,
            oplog_size_mb: None,
            oplog_min_retention_hours: None,
            cache_size_gb: None,
            split_scans: true,
            leader_sync: true,
            tls_mode: TlsMode::Disabled,
            tls_certificate_key_file: None,
            tls_ca_file: None,
            tls_allow_connections_without_certificates: false,
            auth: false,
            profile: Profile::MongoDb,
            cosmos_account: "localhost".into(),
            cosmos_key: None,
            cosmos_server_version: CosmosVersion::V7_0,
            cosmos_throttle: Switch::On,
            cosmos_server_retries: 0,
            cosmos_ru: Vec::new(),
            argv: vec!["ebb".into()],
            cosmos_plain: false,
            bench_without_oplog: false,
        }
    }
}

impl Config {
    /// What a blocking sort may use: [`Config::max_blocking_sort_bytes`] in memory, and
    /// temporary files in the data directory's `_tmp` folder (as mongod's `dbpath/_tmp`), or
    /// the system's temporary directory for an in-memory server, when `allow_disk_use`.
    pub fn sort_limits(&self, allow_disk_use: bool) -> crate::sorter::SortLimits {
        crate::sorter::SortLimits {
            max_bytes: self.max_blocking_sort_bytes,
            allow_disk_use,
            temp_dir: if self.in_memory {
                std::env::temp_dir()
            } else {
                self.data_dir.join("_tmp")
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Config;

    #[test]
    fn cache_size_flag_and_wired_tigers_default() {
        const GB: u64 = 1 << 30;
        let config = Config::try_parse_from(["ebb", "--cache-size-gb", "1.5"]).unwrap();
        assert_eq!(config.cache_size_gb, Some(1.5));
        assert_eq!(config.cache_bytes(64 * GB), 3 * GB / 2);
        let config = Config::try_parse_from(["ebb", "--wiredTigerCacheSizeGB", "2"]).unwrap();
        assert_eq!(config.cache_bytes(0), 2 * GB);
        for bad in ["0", "0.1", "x", "inf", "-1", "20000"] {
            assert!(
                Config::try_parse_from(["ebb", "--cache-size-gb", bad]).is_err(),
                "{bad}"
            );
        }
        // Half of the memory less 1 GB, at least 256 MB.
        let default = Config::default();
        assert_eq!(default.cache_bytes(24 * GB), 23 * GB / 2);
        assert_eq!(default.cache_bytes(GB), 256 << 20);
        assert_eq!(default.cache_bytes(0), 256 << 20);
    }

    #[test]
    fn repl_set_flags() {
        let config = Config::try_parse_from(["ebb", "--replSet", "rs0"]).unwrap();
        assert_eq!(config.repl_set.as_deref(), Some("rs0"));
        assert_eq!(config.advertise_host, None);
        let config = Config::try_parse_from([
            "ebb",
            "--replSet=rs0",
            "--advertise-host",
            "db.example:27017",
        ])
        .unwrap();
        assert_eq!(config.advertise_host.as_deref(), Some("db.example:27017"));
        // Advertising needs a set, and a host with a port.
        assert!(Config::try_parse_from(["ebb", "--advertise-host", "h:1"]).is_err());
        for bad in ["nohost", ":27017", "h:0", "h:70000", "h:x"] {
            let args = ["ebb", "--replSet", "rs0", "--advertise-host", bad];
            assert!(Config::try_parse_from(args).is_err(), "{bad}");
        }
        let args = ["ebb", "--replSet", "rs0", "--advertise-host", "[::1]:27017"];
        assert!(Config::try_parse_from(args).is_ok());
    }

    #[test]
    fn oplog_flags() {
        let config = Config::try_parse_from([
            "ebb",
            "--replSet",
            "rs0",
            "--oplogSizeMB",
            "2048",
            "--oplogMinRetentionHours",
            "1.5",
        ])
        .unwrap();
        assert_eq!(config.oplog_size_mb, Some(2048));
        assert_eq!(config.oplog_min_retention_hours, Some(1.5));
        // mongod's own spelling of the size flag.
        let config = Config::try_parse_from(["ebb", "--oplogSize", "990"]).unwrap();
        assert_eq!(config.oplog_size_mb, Some(990));
        for bad in [
            ["--oplogSizeMB", "0"],
            ["--oplogSizeMB", "x"],
            ["--oplogMinRetentionHours", "-1"],
            ["--oplogMinRetentionHours", "inf"],
        ] {
            assert!(
                Config::try_parse_from(["ebb", bad[0], bad[1]]).is_err(),
                "{bad:?}"
            );
        }
    }
}
