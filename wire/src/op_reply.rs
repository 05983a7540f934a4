//! Legacy `OP_REPLY` (opcode 1): the answer to an `OP_QUERY`.

use bson::RawDocumentBuf;
use bytes::BufMut;
use nom::number::complete::{le_i32, le_i64};

use crate::Error;
use crate::error::{NomErr, malformed};
use crate::op_msg::parse_document;

/// A decoded or to-be-encoded `OP_REPLY`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpReply {
    /// `responseFlags` (bit 1 `QueryFailure`, bit 3 `AwaitCapable`).
    pub response_flags: i32,
    /// `cursorID`.
    pub cursor_id: i64,
    /// `startingFrom`.
    pub starting_from: i32,
    /// The returned documents; `numberReturned` is their count.
    pub documents: Vec<RawDocumentBuf>,
}

impl OpReply {
    /// `responseFlags` bit 1: the query failed and the single document is `{$err, code}`.
    pub const QUERY_FAILURE: i32 = 1 << 1;
    /// `responseFlags` bit 3, which servers always set.
    pub const AWAIT_CAPABLE: i32 = 1 << 3;

    /// A reply carrying one document.
    pub fn single(doc: RawDocumentBuf) -> Self {
        OpReply {
            response_flags: Self::AWAIT_CAPABLE,
            cursor_id: 0,
            starting_from: 0,
            documents: vec![doc],
        }
    }

    pub(crate) fn parse(input: &[u8]) -> Result<OpReply, Error> {
        let (input, response_flags) =
            le_i32::<_, NomErr<'_>>(input).map_err(malformed("OP_REPLY flags"))?;
        let (input, cursor_id) = le_i64::<_, NomErr<'_>>(input).map_err(malformed("cursorID"))?;
        let (input, starting_from) =
            le_i32::<_, NomErr<'_>>(input).map_err(malformed("startingFrom"))?;
        let (mut input, number_returned) =
            le_i32::<_, NomErr<'_>>(input).map_err(malformed("numberReturned"))?;
        let mut documents = Vec::new();
        while !input.is_empty() {
            let (rest, doc) = parse_document(input)?;
            documents.push(doc);
            input = rest;
        }
        if usize::try_from(number_returned).ok() != Some(documents.len()) {
            return Err(Error::Malformed(
                "numberReturned does not match the documents",
            ));
        }
        Ok(OpReply {
            response_flags,
            cursor_id,
            starting_from,
            documents,
        })
    }

    pub(crate) fn write_body(&self, out: &mut impl BufMut) {
        out.put_i32_le(self.response_flags);
        out.put_i64_le(self.cursor_id);
        out.put_i32_le(self.starting_from);
        out.put_i32_le(i32::try_from(self.documents.len()).unwrap_or(i32::MAX));
        for doc in &self.documents {
            out.put_slice(doc.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;
    use crate::testutil::{TestResult, decode, message, roundtrip, set_i32};
    use crate::{Body, Compressor, Message};

    /// `{ok: 1.0}` answering requestID 7, as mongod answered a legacy `isMaster`.
    const OK_REPLY: [u8; 53] = [
        0x35, 0x00, 0x00, 0x00, // messageLength 53
        0x02, 0x00, 0x00, 0x00, // requestID 2
        0x07, 0x00, 0x00, 0x00, // responseTo 7
        0x01, 0x00, 0x00, 0x00, // opCode 1
        0x08, 0x00, 0x00, 0x00, // responseFlags: AwaitCapable
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // cursorID 0
        0x00, 0x00, 0x00, 0x00, // startingFrom 0
        0x01, 0x00, 0x00, 0x00, // numberReturned 1
        0x11, 0x00, 0x00, 0x00, 0x01, b'o', b'k', 0x00, // {ok: 1.0}
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x00,
    ];

    fn ok() -> Message {
        Message {
            request_id: 2,
            response_to: 7,
            body: Body::Reply(OpReply::single(rawdoc! { "ok": 1.0 })),
            compressor: None,
        }
    }

    #[test]
    fn single_reply_encodes_to_the_fixture() -> TestResult {
        assert_eq!(roundtrip!(ok())?[..], OK_REPLY[..]);
        assert_eq!(decode(&OK_REPLY)?, ok());
        Ok(())
    }

    #[test]
    fn several_documents_a_cursor_and_every_compressor() -> TestResult {
        let reply = OpReply {
            response_flags: OpReply::AWAIT_CAPABLE,
            cursor_id: 0x0123_4567_89ab_cdef,
            starting_from: 101,
            documents: vec![rawdoc! { "_id": 1 }, rawdoc! {}, rawdoc! { "a": [1, 2] }],
        };
        let msg = Message {
            body: Body::Reply(reply),
            ..ok()
        };
        roundtrip!(msg.clone())?;
        for compressor in [
            Compressor::Noop,
            Compressor::Snappy,
            Compressor::Zlib,
            Compressor::Zstd,
        ] {
            roundtrip!(msg.clone(), Some(compressor))?;
        }
        Ok(())
    }

    #[test]
    fn query_failure_with_no_documents() -> TestResult {
        let reply = OpReply {
            response_flags: OpReply::QUERY_FAILURE | OpReply::AWAIT_CAPABLE,
            cursor_id: 0,
            starting_from: 0,
            documents: vec![],
        };
        roundtrip!(Message {
            body: Body::Reply(reply),
            ..ok()
        })?;
        Ok(())
    }

    #[test]
    fn number_returned_must_match() {
        for count in [0, 2, -1, i32::MAX] {
            let mut bytes = OK_REPLY;
            set_i32(&mut bytes, 32, count);
            assert!(
                matches!(decode(&bytes), Err(Error::Malformed(_))),
                "numberReturned {count}"
            );
        }
    }

    #[test]
    fn truncated_replies() {
        for end in [16, 19, 20, 27, 28, 31, 32, 35, 36, 40, 52] {
            let bytes = message(2, 7, 1, &OK_REPLY[16..end]);
            assert!(decode(&bytes).is_err(), "cut at {end}");
        }
    }
}
