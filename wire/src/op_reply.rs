//! Legacy `OP_REPLY` (opcode 1): the answer to an `OP_QUERY`.

use bson::RawDocumentBuf;
use bytes::BufMut;
use nom::number::complete::{le_i32, le_i64};

use crate::error::{NomErr, malformed};
use crate::op_msg::parse_document;
use crate::Error;

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
            return Err(Error::Malformed("numberReturned does not match the documents"));
        }
        Ok(OpReply { response_flags, cursor_id, starting_from, documents })
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
