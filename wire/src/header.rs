use bytes::BufMut;
use nom::{IResult, number::complete::le_i32};

use crate::Error;

/// Size of [`MsgHeader`] on the wire.
pub const HEADER_LEN: usize = 16;

/// `maxMessageSizeBytes`: the largest message (header included) accepted or sent.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;

/// The opcodes Ebb speaks. An unknown code is an error, never a catch-all variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum OpCode {
    /// `OP_REPLY`: the answer to a legacy `OP_QUERY`.
    Reply = 1,
    /// `OP_QUERY`: legacy; only `<db>.$cmd` commands (the handshake) are served.
    Query = 2004,
    /// `OP_COMPRESSED`: wraps another message.
    Compressed = 2012,
    /// `OP_MSG`: every modern command and reply.
    Msg = 2013,
}

impl OpCode {
    /// Maps a wire value to an opcode.
    pub fn from_i32(code: i32) -> Result<Self, Error> {
        match code {
            1 => Ok(OpCode::Reply),
            2004 => Ok(OpCode::Query),
            2012 => Ok(OpCode::Compressed),
            2013 => Ok(OpCode::Msg),
            other => Err(Error::UnknownOpCode(other)),
        }
    }

    /// The wire value.
    pub fn as_i32(self) -> i32 {
        self as i32
    }
}

/// The standard message header: `messageLength`, `requestID`, `responseTo`, `opCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// `messageLength`: total size of the message, header included.
    pub message_length: i32,
    /// `requestID`: the sender's identifier for this message.
    pub request_id: i32,
    /// `responseTo`: the `requestID` this message answers.
    pub response_to: i32,
    /// `opCode`, kept raw so that an unknown code can still be reported with its request id.
    pub op_code: i32,
}

impl MsgHeader {
    /// Parses the 16 header bytes.
    pub(crate) fn parse(input: &[u8]) -> IResult<&[u8], MsgHeader> {
        let (input, message_length) = le_i32(input)?;
        let (input, request_id) = le_i32(input)?;
        let (input, response_to) = le_i32(input)?;
        let (input, op_code) = le_i32(input)?;
        Ok((
            input,
            MsgHeader {
                message_length,
                request_id,
                response_to,
                op_code,
            },
        ))
    }

    /// Checks `messageLength` against `[HEADER_LEN, max]` and returns it as a `usize`.
    pub fn checked_length(&self, max: usize) -> Result<usize, Error> {
        let len = usize::try_from(self.message_length)
            .map_err(|_| Error::MessageTooSmall(self.message_length))?;
        if len < HEADER_LEN {
            return Err(Error::MessageTooSmall(self.message_length));
        }
        if len > max {
            return Err(Error::MessageTooLarge {
                len: i64::from(self.message_length),
                max,
            });
        }
        Ok(len)
    }

    pub(crate) fn write(&self, out: &mut impl BufMut) {
        out.put_i32_le(self.message_length);
        out.put_i32_le(self.request_id);
        out.put_i32_le(self.response_to);
        out.put_i32_le(self.op_code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TestResult;

    #[test]
    fn parses_the_four_fields() -> TestResult {
        const DATA: [u8; 17] = [
            0x33, 0x00, 0x00, 0x00, // messageLength 51
            0x78, 0x56, 0x34, 0x12, // requestID
            0xff, 0xff, 0xff, 0xff, // responseTo -1
            0xdd, 0x07, 0x00, 0x00, // opCode 2013
            0xaa, // first body byte, left unread
        ];
        let (rest, header) = MsgHeader::parse(&DATA)?;
        assert_eq!(rest, [0xaa]);
        assert_eq!(
            header,
            MsgHeader {
                message_length: 51,
                request_id: 0x1234_5678,
                response_to: -1,
                op_code: 2013
            }
        );
        let mut out = Vec::new();
        header.write(&mut out);
        assert_eq!(out, DATA[..16]);
        Ok(())
    }

    #[test]
    fn short_header_is_an_error() {
        assert!(MsgHeader::parse(&[0; 15]).is_err());
    }

    #[test]
    fn checked_length_bounds() {
        let header = |message_length| MsgHeader {
            message_length,
            request_id: 0,
            response_to: 0,
            op_code: 2013,
        };
        assert_eq!(header(16).checked_length(100), Ok(16));
        assert_eq!(header(100).checked_length(100), Ok(100));
        assert_eq!(
            header(15).checked_length(100),
            Err(Error::MessageTooSmall(15))
        );
        assert_eq!(
            header(0).checked_length(100),
            Err(Error::MessageTooSmall(0))
        );
        assert_eq!(
            header(-1).checked_length(100),
            Err(Error::MessageTooSmall(-1))
        );
        assert_eq!(
            header(i32::MIN).checked_length(100),
            Err(Error::MessageTooSmall(i32::MIN))
        );
        assert_eq!(
            header(101).checked_length(100),
            Err(Error::MessageTooLarge { len: 101, max: 100 })
        );
        assert_eq!(
            header(i32::MAX).checked_length(MAX_MESSAGE_SIZE),
            Err(Error::MessageTooLarge {
                len: i64::from(i32::MAX),
                max: MAX_MESSAGE_SIZE
            })
        );
    }

    #[test]
    fn opcodes() {
        for op in [
            OpCode::Reply,
            OpCode::Query,
            OpCode::Compressed,
            OpCode::Msg,
        ] {
            assert_eq!(OpCode::from_i32(op.as_i32()), Ok(op));
        }
        // OP_UPDATE, OP_INSERT, OP_GET_MORE, OP_DELETE, OP_KILL_CURSORS, OP_COMMAND,
        // OP_COMMANDREPLY and nonsense.
        for code in [
            0,
            -1,
            2001,
            2002,
            2005,
            2006,
            2007,
            2010,
            2011,
            9999,
            i32::MIN,
        ] {
            assert_eq!(OpCode::from_i32(code), Err(Error::UnknownOpCode(code)));
        }
    }
}
