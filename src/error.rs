//! The error a client sees: `{ ok: 0, errmsg, code, codeName }`.
//!
//! `ErrorCode` comes from one table, so a code and its `codeName` cannot drift apart. Names and
//! numbers are MongoDB's (`src/mongo/base/error_codes.yml`); a code MongoDB raises only as a
//! source-location assertion is `Location(n)` with codeName `Location<n>`, as mongod reports it.

use std::borrow::Cow;

use bson::{RawDocumentBuf, rawdoc};

macro_rules! error_codes {
    ($($name:ident = $code:literal,)*) => {
        /// A MongoDB error code; each variant is named exactly as its `codeName`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(
                #[doc = concat!("code ", stringify!($code))]
                $name,
            )*
            /// An assertion code with no name of its own (`Location<n>`).
            Location(i32),
        }

        impl ErrorCode {
            /// The numeric `code`.
            pub fn code(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $code,)*
                    ErrorCode::Location(n) => n,
                }
            }

            /// The code numbered `code` (`Location<n>` for one the table does not name).
            pub fn from_code(code: i32) -> Self {
                match code {
                    $($code => ErrorCode::$name,)*
                    n => ErrorCode::Location(n),
                }
            }

            /// The `codeName`.
            pub fn name(self) -> Cow<'static, str> {
                match self {
                    $(ErrorCode::$name => Cow::Borrowed(stringify!($name)),)*
                    ErrorCode::Location(n) => Cow::Owned(format!("Location{n}")),
                }
            }
        }
    };
}

error_codes! {
    InternalError = 1,
    BadValue = 2,
    NoSuchKey = 4,
    GraphContainsCycle = 5,
    FailedToParse = 9,
    UserNotFound = 11,
    UnsupportedFormat = 12,
    HostUnreachable = 6,
    HostNotFound = 7,
    Unauthorized = 13,
    TypeMismatch = 14,
    Overflow = 15,
    InvalidLength = 16,
    ProtocolError = 17,
    AuthenticationFailed = 18,
    IllegalOperation = 20,
    InvalidBSON = 22,
    AlreadyInitialized = 23,
    NamespaceNotFound = 26,
    IndexNotFound = 27,
    PathNotViable = 28,
    InvalidPath = 30,
    RoleNotFound = 31,
    CannotBackfillArray = 34,
    ConflictingUpdateOperators = 40,
    CursorNotFound = 43,
    NoMatchingDocument = 47,
    NamespaceExists = 48,
    InvalidRoleModification = 49,
    MaxTimeMSExpired = 50,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    NotSingleValueField = 54,
    EmptyFieldName = 56,
    CommandNotFound = 59,
    ImmutableField = 66,
    CannotCreateIndex = 67,
    IndexAlreadyExists = 68,
    InvalidOptions = 72,
    InvalidNamespace = 73,
    NoReplicationEnabled = 76,
    UnknownReplWriteConcern = 79,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    NetworkTimeout = 89,
    ShutdownInProgress = 91,
    OperationFailed = 96,
    UnsatisfiableWriteConcern = 100,
    NotExactValueField = 111,
    WriteConflict = 112,
    CommandNotSupported = 115,
    ConflictingOperationInProgress = 117,
    NotAReplicaSet = 123,
    CommandFailed = 125,
    FailedToSatisfyReadPreference = 133,
    CappedPositionLost = 136,
    InvalidSSLConfiguration = 140,
    ExceededMemoryLimit = 146,
    StaleEpoch = 150,
    DurationOverflow = 159,
    IncompatibleCollationVersion = 161,
    ViewDepthLimitExceeded = 165,
    CommandNotSupportedOnView = 166,
    OptionNotSupportedOnView = 167,
    InvalidPipelineOperator = 168,
    CannotIndexParallelArrays = 171,
    ClientMetadataCannotBeMutated = 186,
    InvalidIndexSpecificationOption = 197,
    ClusterTimeFailsRateLimiter = 205,
    IllegalOpMsgFlag = 223,
    QueryFeatureNotAllowed = 224,
    IncompleteTransactionHistory = 217,
    TransactionTooOld = 225,
    MaxSubPipelineDepthExceeded = 232,
    RetryChangeStream = 234,
    NotImplemented = 238,
    SnapshotTooOld = 239,
    ConversionFailure = 241,
    NoSuchTransaction = 251,
    TransactionCommitted = 256,
    InvalidResumeToken = 260,
    ExceededTimeLimit = 262,
    OperationNotSupportedInTransaction = 263,
    FailPointSetFailed = 266,
    ChangeStreamFatalError = 280,
    ChangeStreamHistoryLost = 286,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    APIVersionError = 322,
    APIStrictError = 323,
    APIDeprecationError = 324,
    MechanismUnavailable = 334,
    UnsupportedOpQueryCommand = 352,
    SocketException = 9001,
    BSONObjectTooLarge = 10334,
    DuplicateKey = 11000,
    InterruptedAtShutdown = 11600,
    DatabaseDifferCase = 13297,
    // Not a mongod code: Azure Cosmos DB for MongoDB's rate limiting (`--profile cosmos`),
    // with the codeName its replies carry.
    RequestRateTooLarge = 16500,
    KeyTooLong = 17280,
    MergeStageNoMatchingDocument = 13113,
    SearchNotEnabled = 31082,
    IDLDuplicateField = 40413,
    IDLUnknownField = 40415,
    IDLFailedToParse = 40414,
}

/// An error answered to the client on the request's `responseTo`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{errmsg} ({code:?})")]
pub struct CommandError {
    /// The code and codeName.
    pub code: ErrorCode,
    /// The human-readable message.
    pub errmsg: String,
    /// Fields the reply carries after `codeName`, such as a duplicate key's `keyPattern` and
    /// `keyValue` (mongod's extra error info).
    pub info: Option<ErrorInfo>,
}

/// The extra fields of an error reply, as a document whose fields are appended in order.
#[derive(Debug, Clone)]
pub struct ErrorInfo(pub RawDocumentBuf);

impl PartialEq for ErrorInfo {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_bytes() == other.0.as_bytes()
    }
}

impl Eq for ErrorInfo {}

impl CommandError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, errmsg: impl Into<String>) -> Self {
        CommandError {
            code,
            errmsg: errmsg.into(),
            info: None,
        }
    }

    /// The same error, whose reply also carries the fields of `info` (after `codeName`).
    #[must_use]
    pub fn with_info(mut self, info: RawDocumentBuf) -> Self {
        self.info = Some(ErrorInfo(info));
        self
    }

    /// `InterruptedAtShutdown` (11600): the server began shutting down while the command ran.
    /// mongod fails the whole command with it (a write batch reports no partial result).
    pub fn interrupted_at_shutdown() -> Self {
        CommandError::new(ErrorCode::InterruptedAtShutdown, "interrupted at shutdown")
    }

    /// `BadValue` (2).
    pub fn bad_value(errmsg: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadValue, errmsg)
    }

    /// `TypeMismatch` (14).
    pub fn type_mismatch(errmsg: impl Into<String>) -> Self {
        Self::new(ErrorCode::TypeMismatch, errmsg)
    }

    /// `InternalError` (1), for failures that are the server's, not the client's.
    pub fn internal(errmsg: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, errmsg)
    }

    /// `IDLFailedToParse` (40414): a required field is missing (`path` as `command.field`).
    pub fn missing_field(path: &str) -> Self {
        Self::new(
            ErrorCode::IDLFailedToParse,
            format!("BSON field '{path}' is missing but a required field"),
        )
    }

    /// `IDLUnknownField` (40415): a field the command does not define.
    pub fn unknown_field(path: &str) -> Self {
        Self::new(
            ErrorCode::IDLUnknownField,
            format!("BSON field '{path}' is an unknown field."),
        )
    }

    /// `CommandNotFound` (59) with mongod's message.
    pub fn command_not_found(name: &str) -> Self {
        Self::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{name}'"),
        )
    }

    /// The reply document: `{ ok: 0.0, errmsg, code, codeName }`, then any extra info.
    pub fn to_document(&self) -> RawDocumentBuf {
        let mut doc = rawdoc! {
            "ok": 0.0,
            "errmsg": self.errmsg.as_str(),
            "code": self.code.code(),
            "codeName": self.code.name().as_ref(),
        };
        if let Some(ErrorInfo(info)) = &self.info {
            for elem in info.iter_elements().map_while(Result::ok) {
                if let Ok(value) = elem.value() {
                    doc.append(elem.key(), value);
                }
            }
        }
        doc
    }
}

/// The result of a command handler.
pub type CommandResult<T = RawDocumentBuf> = Result<T, CommandError>;

impl From<ebb_wire::Error> for CommandError {
    /// The parse errors mongod answers (rather than closing the connection), with its codes.
    fn from(e: ebb_wire::Error) -> Self {
        let code = match &e {
            ebb_wire::Error::MultipleBodies => ErrorCode::Location(40430),
            ebb_wire::Error::DuplicateSequence(_) => ErrorCode::Location(40431),
            ebb_wire::Error::MissingBody => ErrorCode::Location(40587),
            ebb_wire::Error::InvalidBson(_) => ErrorCode::InvalidBSON,
            ebb_wire::Error::IllegalOpMsgFlag(_) => ErrorCode::IllegalOpMsgFlag,
            ebb_wire::Error::MessageTooSmall(_)
            | ebb_wire::Error::MessageTooLarge { .. }
            | ebb_wire::Error::UnknownOpCode(_)
            | ebb_wire::Error::UnknownPayloadType(_)
            | ebb_wire::Error::ChecksumMismatch { .. }
            | ebb_wire::Error::Malformed(_)
            | ebb_wire::Error::UnknownCompressor(_)
            | ebb_wire::Error::Decompression(_)
            | ebb_wire::Error::Compression(_) => ErrorCode::ProtocolError,
        };
        CommandError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_name_come_from_one_table() {
        assert_eq!(ErrorCode::CommandNotFound.code(), 59);
        assert_eq!(ErrorCode::CommandNotFound.name(), "CommandNotFound");
        assert_eq!(ErrorCode::DuplicateKey.code(), 11000);
        assert_eq!(ErrorCode::Location(40430).name(), "Location40430");
    }

    #[test]
    fn reply_shape() {
        let doc = CommandError::command_not_found("frobnicate").to_document();
        assert_eq!(doc.get_f64("ok").unwrap(), 0.0);
        assert_eq!(doc.get_i32("code").unwrap(), 59);
        assert_eq!(doc.get_str("codeName").unwrap(), "CommandNotFound");
        assert_eq!(
            doc.get_str("errmsg").unwrap(),
            "no such command: 'frobnicate'"
        );
    }
}
