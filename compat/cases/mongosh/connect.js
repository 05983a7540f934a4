// mongosh connects and the commands it relies on answer as MongoDB's do.
// Source: https://www.mongodb.com/docs/mongodb-shell/run-commands/
function check(cond, what) {
  if (!cond) { throw new Error('check failed: ' + what); }
}

const ping = db.runCommand({ ping: 1 });
check(ping.ok === 1, 'ping ok: ' + EJSON.stringify(ping));

const version = db.version();
check(/^\d+\.\d+\.\d+$/.test(version), 'db.version() is semver: ' + version);
const info = db.adminCommand({ buildInfo: 1 });
check(info.version === version, 'buildInfo.version matches db.version()');
check(info.versionArray.length === 4 && info.versionArray.join('.').startsWith(version), 'versionArray');

const hello = db.hello();
check(hello.isWritablePrimary === true, 'isWritablePrimary');
check(hello.maxBsonObjectSize === 16 * 1024 * 1024, 'maxBsonObjectSize');
check(hello.maxMessageSizeBytes === 48000000, 'maxMessageSizeBytes');
check(hello.maxWriteBatchSize === 100000, 'maxWriteBatchSize');
check(hello.maxWireVersion === 21, 'maxWireVersion');
check(hello.setName === undefined, 'standalone: no setName');
check(hello.localTime instanceof Date, 'localTime is a date');

const dbs = db.adminCommand({ listDatabases: 1 });
check(dbs.ok === 1 && Array.isArray(dbs.databases), 'listDatabases');

const status = db.serverStatus();
check(status.ok === 1 && status.connections.current >= 1, 'serverStatus.connections');
check(status.opcounters.command > 0, 'serverStatus.opcounters.command');

const fcv = db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 });
check(fcv.featureCompatibilityVersion.version === '7.0', 'featureCompatibilityVersion');
const opts = db.adminCommand({ getCmdLineOpts: 1 });
check(Array.isArray(opts.argv) && typeof opts.parsed === 'object', 'getCmdLineOpts');
check(db.hostInfo().system.numCores >= 1, 'hostInfo');
check(db.adminCommand({ getLog: 'startupWarnings' }).ok === 1, 'getLog startupWarnings');
check(typeof db.runCommand({ whatsmyuri: 1 }).you === 'string', 'whatsmyuri');
check(db.runCommand({ listCommands: 1 }).commands.ping !== undefined, 'listCommands has ping');

// An unknown command is an error with MongoDB's code, and the connection stays usable.
let threw = false;
try {
  db.runCommand({ frobnicate: 1 });
} catch (e) {
  threw = true;
  check(e.code === 59 && e.codeName === 'CommandNotFound', 'CommandNotFound: ' + e);
  check(e.message.includes("no such command: 'frobnicate'"), 'message: ' + e.message);
}
check(threw, 'unknown command threw');
check(db.runCommand({ ping: 1 }).ok === 1, 'ping after an error');
print('connect.js: all checks passed');
// expect: connect.js: all checks passed
