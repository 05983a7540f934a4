//! The fields each command declares, as mongod 7.0's IDL declares them (`find_command.idl`,
//! `write_ops.idl`, `aggregate_command.idl`…): names, types and which are required. The
//! generic arguments are not repeated here ([`super::spec::GENERIC`]). A field Ebb does not
//! implement is declared `not_yet`: given any value but `false`, the command is refused with
//! `NotImplemented` (238) before it runs (options that only tune mongod's internals, such as
//! `readOnce` or `mirrored`, are accepted: they change no answer).
//!
//! Error paths start with the name mongod's parser reports: the command's name, except
//! `find`, whose parser is named `FindCommandRequest`.

use super::spec::Ty::{Any, Array, Bool, Number, Object, OptionalBool, SafeBool, String};
use super::spec::{Args, not_yet, opt, req};

/// `find`.
pub static FIND: Args = Args {
    path: "FindCommandRequest",
    strict: true,
    fields: &[
        opt("filter", Object),
        opt("projection", Object),
        opt("sort", Object),
        opt("hint", Any),
        opt("collation", Object),
        opt("skip", Number),
        opt("limit", Number),
        opt("batchSize", Number),
        opt("singleBatch", OptionalBool),
        opt("allowDiskUse", OptionalBool),
        opt("allowPartialResults", OptionalBool),
        opt("let", Object),
        not_yet("min", Object),
        not_yet("max", Object),
        not_yet("returnKey", OptionalBool),
        not_yet("showRecordId", OptionalBool),
        not_yet("tailable", OptionalBool),
        opt("noCursorTimeout", OptionalBool),
        not_yet("awaitData", OptionalBool),
        opt("readOnce", OptionalBool),
        opt("allowSpeculativeMajorityRead", OptionalBool),
        not_yet("oplogReplay", Bool),
        opt("$queryOptions", Object),
        not_yet("term", Number),
        not_yet("$_requestResumeToken", OptionalBool),
        not_yet("$_resumeAfter", Object),
        not_yet("runtimeConstants", Any),
        not_yet("collectionUUID", Any),
        not_yet("encryptionInformation", Any),
        opt("mirrored", OptionalBool),
        opt("sampleId", Any),
    ],
};

/// `getMore`.
pub static GET_MORE: Args = Args {
    path: "getMore",
    strict: true,
    fields: &[
        req("collection", String),
        opt("batchSize", Number),
        not_yet("term", Any),
        not_yet("lastKnownCommittedOpTime", Any),
    ],
};

/// `commitTransaction` (`commitTimestamp` is for prepared transactions, which a replica set
/// of one never has; `recoveryToken` is what drivers give mongos, and a mongod ignores).
pub static COMMIT_TRANSACTION: Args = Args {
    path: "commitTransaction",
    strict: true,
    fields: &[
        not_yet("commitTimestamp", Any),
        opt("recoveryToken", Object),
    ],
};

/// `abortTransaction`.
pub static ABORT_TRANSACTION: Args = Args {
    path: "abortTransaction",
    strict: true,
    fields: &[opt("recoveryToken", Object)],
};

/// `killCursors`.
pub static KILL_CURSORS: Args = Args {
    path: "killCursors",
    strict: true,
    fields: &[req("cursors", Array)],
};

/// `count`.
pub static COUNT: Args = Args {
    path: "count",
    strict: true,
    fields: &[
        opt("query", Object),
        opt("limit", Any),
        opt("skip", Number),
        opt("hint", Any),
        opt("collation", Object),
        opt("fields", Object),
        opt("$queryOptions", Object),
        not_yet("encryptionInformation", Any),
        opt("mirrored", OptionalBool),
        opt("sampleId", Any),
    ],
};

/// `distinct`. (`hint` arrived in 7.1; Ebb takes it.)
pub static DISTINCT: Args = Args {
    path: "distinct",
    strict: true,
    fields: &[
        req("key", String),
        opt("query", Object),
        opt("collation", Object),
        opt("hint", Any),
        opt("mirrored", OptionalBool),
        opt("sampleId", Any),
    ],
};

/// `aggregate`.
pub static AGGREGATE: Args = Args {
    path: "aggregate",
    strict: true,
    fields: &[
        req("pipeline", Any),
        opt("explain", Any),
        opt("allowDiskUse", OptionalBool),
        opt("cursor", Any),
        opt("bypassDocumentValidation", SafeBool),
        opt("collation", Object),
        opt("hint", Any),
        opt("let", Object),
        not_yet("needsMerge", OptionalBool),
        not_yet("fromMongos", OptionalBool),
        opt("$queryOptions", Object),
        not_yet("$_requestReshardingResumeToken", OptionalBool),
        not_yet("isMapReduceCommand", OptionalBool),
        not_yet("exchange", Any),
        not_yet("runtimeConstants", Any),
        not_yet("collectionUUID", Any),
        not_yet("$_passthroughToShard", Any),
        not_yet("$_generateV2ResumeTokens", OptionalBool),
        not_yet("encryptionInformation", Any),
        opt("sampleId", Any),
        not_yet("$_isClusterQueryWithoutShardKeyCmd", OptionalBool),
        not_yet("$_requestResumeToken", OptionalBool),
        not_yet("$_resumeAfter", Object),
    ],
};

/// `insert`.
pub static INSERT: Args = Args {
    path: "insert",
    strict: true,
    fields: &[
        req("documents", Array),
        opt("ordered", Bool),
        opt("bypassDocumentValidation", SafeBool),
        opt("stmtIds", Array),
        not_yet("isTimeseriesNamespace", OptionalBool),
        not_yet("collectionUUID", Any),
        not_yet("encryptionInformation", Any),
    ],
};

/// `update`.
pub static UPDATE: Args = Args {
    path: "update",
    strict: true,
    fields: &[
        req("updates", Array),
        opt("ordered", Bool),
        opt("bypassDocumentValidation", SafeBool),
        opt("let", Object),
        opt("stmtIds", Array),
        not_yet("runtimeConstants", Any),
        opt("mirrored", OptionalBool),
        not_yet("isTimeseriesNamespace", OptionalBool),
        not_yet("collectionUUID", Any),
        not_yet("encryptionInformation", Any),
    ],
};

/// `delete`.
pub static DELETE: Args = Args {
    path: "delete",
    strict: true,
    fields: &[
        req("deletes", Array),
        opt("ordered", Bool),
        opt("bypassDocumentValidation", SafeBool),
        opt("let", Object),
        opt("stmtIds", Array),
        not_yet("runtimeConstants", Any),
        not_yet("isTimeseriesNamespace", OptionalBool),
        not_yet("collectionUUID", Any),
        not_yet("encryptionInformation", Any),
    ],
};

/// `findAndModify` (and its alias `findandmodify`).
pub static FIND_AND_MODIFY: Args = Args {
    path: "findAndModify",
    strict: true,
    fields: &[
        opt("query", Object),
        opt("fields", Object),
        opt("sort", Object),
        opt("batchSize", Any),
        opt("singleBatch", Bool),
        opt("hint", Any),
        opt("collation", Object),
        opt("arrayFilters", Array),
        opt("remove", SafeBool),
        opt("update", Any),
        opt("upsert", SafeBool),
        opt("new", SafeBool),
        opt("bypassDocumentValidation", SafeBool),
        opt("let", Object),
        not_yet("runtimeConstants", Any),
        not_yet("encryptionInformation", Any),
        opt("mirrored", OptionalBool),
        opt("sampleId", Any),
    ],
};

/// `explain`.
pub static EXPLAIN: Args = Args {
    path: "explain",
    strict: true,
    fields: &[opt("verbosity", Any)],
};

/// `createIndexes`.
pub static CREATE_INDEXES: Args = Args {
    path: "createIndexes",
    strict: true,
    fields: &[
        req("indexes", Array),
        opt("v", Number),
        opt("ignoreUnknownIndexOptions", SafeBool),
        opt("commitQuorum", Any),
        not_yet("isTimeseriesNamespace", Bool),
        not_yet("collectionUUID", Any),
    ],
};

/// `listIndexes`.
pub static LIST_INDEXES: Args = Args {
    path: "listIndexes",
    strict: true,
    fields: &[
        opt("cursor", Any),
        opt("includeBuildUUIDs", SafeBool),
        opt("includeIndexBuildInfo", SafeBool),
        not_yet("isTimeseriesNamespace", Bool),
        not_yet("collectionUUID", Any),
    ],
};

/// `dropIndexes`.
pub static DROP_INDEXES: Args = Args {
    path: "dropIndexes",
    strict: true,
    fields: &[
        req("index", Any),
        not_yet("isTimeseriesNamespace", Bool),
        not_yet("collectionUUID", Any),
    ],
};

/// `collMod`.
pub static COLL_MOD: Args = Args {
    path: "collMod",
    strict: true,
    fields: &[
        opt("index", Any),
        opt("validator", Object),
        opt("validationLevel", Any),
        opt("validationAction", Any),
        opt("viewOn", String),
        opt("pipeline", Array),
        opt("recordPreImages", SafeBool),
        opt("changeStreamPreAndPostImages", Object),
        opt("expireAfterSeconds", Any),
        opt("timeseries", Object),
        opt("dryRun", SafeBool),
        not_yet("collectionUUID", Any),
        opt("cappedSize", Number),
        opt("cappedMax", Number),
    ],
};

/// `create`.
pub static CREATE: Args = Args {
    path: "create",
    strict: true,
    fields: &[
        not_yet("capped", SafeBool),
        opt("autoIndexId", SafeBool),
        opt("idIndex", Object),
        not_yet("size", Number),
        not_yet("max", Number),
        opt("storageEngine", Object),
        not_yet("validator", Object),
        not_yet("validationLevel", Any),
        not_yet("validationAction", Any),
        opt("indexOptionDefaults", Object),
        opt("viewOn", String),
        opt("pipeline", Array),
        opt("collation", Object),
        not_yet("recordPreImages", SafeBool),
        opt("changeStreamPreAndPostImages", Object),
        not_yet("timeseries", Object),
        not_yet("clusteredIndex", Any),
        not_yet("expireAfterSeconds", Number),
        not_yet("encryptedFields", Object),
        not_yet("temp", SafeBool),
        not_yet("flags", Number),
    ],
};

/// `drop`.
pub static DROP: Args = Args {
    path: "drop",
    strict: true,
    fields: &[not_yet("collectionUUID", Any)],
};

/// A strict command with no fields of its own (`dropDatabase`, `ping`, `endSessions`,
/// `getCmdLineOpts`, `hostInfo`, `getLog`).
pub static NONE: Args = Args {
    path: "",
    strict: true,
    fields: &[],
};

/// `listCollections`.
pub static LIST_COLLECTIONS: Args = Args {
    path: "listCollections",
    strict: true,
    fields: &[
        opt("cursor", Any),
        opt("filter", Object),
        opt("nameOnly", Bool),
        opt("authorizedCollections", Bool),
        opt("includePendingDrops", SafeBool),
    ],
};

/// `listDatabases`.
pub static LIST_DATABASES: Args = Args {
    path: "listDatabases",
    strict: true,
    fields: &[
        opt("filter", Object),
        opt("nameOnly", SafeBool),
        opt("authorizedDatabases", Bool),
    ],
};

/// `renameCollection`.
pub static RENAME_COLLECTION: Args = Args {
    path: "renameCollection",
    strict: true,
    fields: &[
        req("to", String),
        opt("dropTarget", Any),
        opt("stayTemp", Bool),
        not_yet("collectionUUID", Any),
    ],
};

/// `hello` and `isMaster`: not strict (drivers add fields of their own).
pub static HELLO: Args = Args {
    path: "hello",
    strict: false,
    fields: &[
        opt("forShell", SafeBool),
        opt("hostInfo", String),
        opt("hangUpOnStepDown", SafeBool),
        opt("internalClient", Object),
        opt("client", Object),
        opt("topologyVersion", Object),
        opt("maxAwaitTimeMS", Number),
        opt("helloOk", SafeBool),
        opt("compression", Array),
        opt("saslSupportedMechs", Any),
        opt("speculativeAuthenticate", Object),
        opt("loadBalanced", Bool),
    ],
};

/// `connectionStatus`.
pub static CONNECTION_STATUS: Args = Args {
    path: "connectionStatus",
    strict: true,
    fields: &[opt("showPrivileges", SafeBool)],
};

/// `authenticate` (`authentication_commands.idl`: `MONGODB-X509`).
pub static AUTHENTICATE: Args = Args {
    path: "authenticate",
    strict: true,
    fields: &[req("mechanism", String), opt("user", String)],
};

/// `saslStart`.
pub static SASL_START: Args = Args {
    path: "saslStart",
    strict: true,
    fields: &[
        req("mechanism", String),
        req("payload", Any),
        opt("autoAuthorize", Any),
        opt("options", Object),
    ],
};

/// `saslContinue`.
pub static SASL_CONTINUE: Args = Args {
    path: "saslContinue",
    strict: true,
    fields: &[req("conversationId", Number), req("payload", Any)],
};

/// `compact` (mongod 8.0: `force`, `freeSpaceTargetMB`, `dryRun`).
pub static COMPACT: Args = Args {
    path: "compact",
    strict: true,
    fields: &[
        opt("force", Bool),
        opt("freeSpaceTargetMB", Number),
        opt("dryRun", Bool),
    ],
};

/// `rotateCertificates`.
pub static ROTATE_CERTIFICATES: Args = Args {
    path: "rotateCertificates",
    strict: true,
    fields: &[opt("message", String)],
};

/// `shutdown`.
pub static SHUTDOWN: Args = Args {
    path: "shutdown",
    strict: true,
    fields: &[opt("force", Bool), opt("timeoutSecs", Number)],
};

// User and role management (`user_management_commands.idl`). The command's own value (the user
// or role name) is read by the handler. `roles` of `createUser` is `Any` here: mongod answers a
// null there with its own message (10065), not as a missing field.

/// `createUser`.
pub static CREATE_USER: Args = Args {
    path: "createUser",
    strict: true,
    fields: &[
        opt("pwd", String),
        opt("customData", Object),
        req("roles", Any),
        opt("digestPassword", SafeBool),
        opt("authenticationRestrictions", Array),
        opt("mechanisms", Array),
    ],
};

/// `updateUser`.
pub static UPDATE_USER: Args = Args {
    path: "updateUser",
    strict: true,
    fields: &[
        opt("pwd", String),
        opt("customData", Object),
        opt("roles", Array),
        opt("digestPassword", SafeBool),
        opt("authenticationRestrictions", Array),
        opt("mechanisms", Array),
    ],
};

/// `dropUser`.
pub static DROP_USER: Args = Args {
    path: "dropUser",
    strict: true,
    fields: &[],
};

/// `dropAllUsersFromDatabase`.
pub static DROP_ALL_USERS_FROM_DATABASE: Args = Args {
    path: "dropAllUsersFromDatabase",
    strict: true,
    fields: &[],
};

/// `grantRolesToUser`.
pub static GRANT_ROLES_TO_USER: Args = Args {
    path: "grantRolesToUser",
    strict: true,
    fields: &[req("roles", Array)],
};

/// `revokeRolesFromUser`.
pub static REVOKE_ROLES_FROM_USER: Args = Args {
    path: "revokeRolesFromUser",
    strict: true,
    fields: &[req("roles", Array)],
};

/// `usersInfo`.
pub static USERS_INFO: Args = Args {
    path: "usersInfo",
    strict: true,
    fields: &[
        opt("showPrivileges", SafeBool),
        opt("showCredentials", SafeBool),
        opt("showAuthenticationRestrictions", SafeBool),
        opt("showCustomData", SafeBool),
        opt("authenticatedMechanism", String),
        opt("filter", Object),
    ],
};

/// `createRole`.
pub static CREATE_ROLE: Args = Args {
    path: "createRole",
    strict: true,
    fields: &[
        req("privileges", Array),
        req("roles", Array),
        opt("authenticationRestrictions", Array),
    ],
};

/// `updateRole`.
pub static UPDATE_ROLE: Args = Args {
    path: "updateRole",
    strict: true,
    fields: &[
        opt("privileges", Array),
        opt("roles", Array),
        opt("authenticationRestrictions", Array),
    ],
};

/// `grantPrivilegesToRole`.
pub static GRANT_PRIVILEGES_TO_ROLE: Args = Args {
    path: "grantPrivilegesToRole",
    strict: true,
    fields: &[req("privileges", Array)],
};

/// `revokePrivilegesFromRole`.
pub static REVOKE_PRIVILEGES_FROM_ROLE: Args = Args {
    path: "revokePrivilegesFromRole",
    strict: true,
    fields: &[req("privileges", Array)],
};

/// `grantRolesToRole`.
pub static GRANT_ROLES_TO_ROLE: Args = Args {
    path: "grantRolesToRole",
    strict: true,
    fields: &[req("roles", Array)],
};

/// `revokeRolesFromRole`.
pub static REVOKE_ROLES_FROM_ROLE: Args = Args {
    path: "revokeRolesFromRole",
    strict: true,
    fields: &[req("roles", Array)],
};

/// `dropRole`.
pub static DROP_ROLE: Args = Args {
    path: "dropRole",
    strict: true,
    fields: &[],
};

/// `dropAllRolesFromDatabase`.
pub static DROP_ALL_ROLES_FROM_DATABASE: Args = Args {
    path: "dropAllRolesFromDatabase",
    strict: true,
    fields: &[],
};

/// `rolesInfo` (`showPrivileges` is a boolean or "asUserFragment", which its handler reads).
pub static ROLES_INFO: Args = Args {
    path: "rolesInfo",
    strict: true,
    fields: &[
        opt("showPrivileges", Any),
        opt("showBuiltinRoles", SafeBool),
        opt("showAuthenticationRestrictions", SafeBool),
    ],
};
