use thiserror::Error as ThisError;

/// Everything that can go wrong while framing or parsing a wire message.
#[derive(Debug, ThisError, Clone, PartialEq, Eq)]
pub enum Error {
    /// `messageLength` is below the 16-byte header.
    #[error("message length {0} is smaller than the 16-byte header")]
    MessageTooSmall(i32),
    /// `messageLength` is above the negotiated maximum.
    #[error("message length {len} is larger than the maximum of {max} bytes")]
    MessageTooLarge {
        /// the length the header (or `OP_COMPRESSED`) claimed
        len: i64,
        /// the limit
        max: usize,
    },
    /// An opcode this codec does not speak.
    #[error("unsupported opcode {0}")]
    UnknownOpCode(i32),
    /// A required (low 16) `OP_MSG` flag bit that the protocol does not define.
    #[error("Unrecognized flags in OP_MSG: {0:#x}")]
    IllegalOpMsgFlag(u32),
    /// An `OP_MSG` section kind other than 0 or 1.
    #[error("Unknown section kind {0}")]
    UnknownPayloadType(u8),
    /// The CRC-32C in the message does not match its bytes.
    #[error(
        "OP_MSG checksum does not match contents: expected {expected:#010x}, got {actual:#010x}"
    )]
    ChecksumMismatch {
        /// the checksum the message carries
        expected: u32,
        /// the checksum computed over the message
        actual: u32,
    },
    /// The body's internal lengths do not fit the frame, or (when encoding) a field cannot be
    /// represented on the wire.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    /// More than one kind-0 section.
    #[error("Multiple body sections in message")]
    MultipleBodies,
    /// No kind-0 section.
    #[error("OP_MSG messages must have a body")]
    MissingBody,
    /// Two kind-1 sections with one identifier.
    #[error("Duplicate document sequence: {0}")]
    DuplicateSequence(String),
    /// A document that is not valid BSON.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// An `OP_COMPRESSED` compressor id this codec does not know.
    #[error("unknown compressor id {0}")]
    UnknownCompressor(u8),
    /// Decompression failed or produced a size other than the one announced.
    #[error("decompression failed: {0}")]
    Decompression(String),
    /// Compression failed.
    #[error("compression failed: {0}")]
    Compression(String),
}

impl Error {
    /// Whether the connection must be closed (the byte stream or the peer cannot be trusted),
    /// as opposed to answering a command error and reading on. Mirrors mongod, which replies to
    /// parse errors except its `ConnectionFatalMessageParseError` class and framing failures.
    pub fn is_connection_fatal(&self) -> bool {
        match self {
            Error::MessageTooSmall(_)
            | Error::MessageTooLarge { .. }
            | Error::UnknownOpCode(_)
            | Error::IllegalOpMsgFlag(_)
            | Error::UnknownPayloadType(_)
            | Error::ChecksumMismatch { .. }
            | Error::Malformed(_)
            | Error::UnknownCompressor(_)
            | Error::Decompression(_)
            | Error::Compression(_) => true,
            Error::MultipleBodies
            | Error::MissingBody
            | Error::DuplicateSequence(_)
            | Error::InvalidBson(_) => false,
        }
    }
}

pub(crate) type NomErr<'a> = nom::error::Error<&'a [u8]>;

/// Turns any nom failure on a complete frame into a `Malformed` error.
pub(crate) fn malformed(what: &'static str) -> impl Fn(nom::Err<NomErr<'_>>) -> Error {
    move |_| Error::Malformed(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classification documented on [`Error::is_connection_fatal`]: framing, compression
    /// and the errors in mongod's `ConnectionFatalMessageParseError` category close the
    /// connection; the rest are answered on the same `responseTo`.
    #[test]
    fn connection_fatal_classification() {
        let table = [
            (Error::MessageTooSmall(3), true),
            (
                Error::MessageTooLarge {
                    len: 1 << 30,
                    max: MAX,
                },
                true,
            ),
            (Error::UnknownOpCode(2001), true),
            (Error::IllegalOpMsgFlag(4), true),
            (Error::UnknownPayloadType(2), true),
            (
                Error::ChecksumMismatch {
                    expected: 1,
                    actual: 2,
                },
                true,
            ),
            (Error::Malformed("section"), true),
            (Error::UnknownCompressor(9), true),
            (Error::Decompression("garbage".into()), true),
            (Error::Compression("no".into()), true),
            (Error::MultipleBodies, false),
            (Error::MissingBody, false),
            (Error::DuplicateSequence("documents".into()), false),
            (Error::InvalidBson("bad".into()), false),
        ];
        for (error, fatal) in table {
            assert_eq!(error.is_connection_fatal(), fatal, "{error:?}");
        }
    }

    const MAX: usize = crate::MAX_MESSAGE_SIZE;

    #[test]
    fn messages_name_the_problem() {
        assert_eq!(
            Error::IllegalOpMsgFlag(0x4).to_string(),
            "Unrecognized flags in OP_MSG: 0x4"
        );
        assert_eq!(
            Error::MessageTooLarge {
                len: 48_000_001,
                max: MAX
            }
            .to_string(),
            "message length 48000001 is larger than the maximum of 48000000 bytes"
        );
    }
}
