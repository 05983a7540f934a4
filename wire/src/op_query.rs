//! Legacy `OP_QUERY` (opcode 2004). Drivers still send their first `hello`/`isMaster` this way;
//! only queries against `<db>.$cmd` are meaningful to Ebb.

use bson::RawDocumentBuf;
use bytes::BufMut;
use nom::{
    bytes::complete::take_until,
    number::complete::le_i32,
};

use crate::error::{NomErr, malformed};
use crate::op_msg::parse_document;
use crate::Error;

/// A decoded `OP_QUERY`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    /// `flags`.
    pub flags: i32,
    /// `fullCollectionName`, such as `admin.$cmd`.
    pub full_collection_name: String,
    /// `numberToSkip`.
    pub number_to_skip: i32,
    /// `numberToReturn`.
    pub number_to_return: i32,
    /// `query`: for `$cmd` queries, the command (possibly wrapped in `$query`).
    pub query: RawDocumentBuf,
    /// `returnFieldsSelector`, when present.
    pub return_fields_selector: Option<RawDocumentBuf>,
}

impl OpQuery {
    pub(crate) fn parse(input: &[u8]) -> Result<OpQuery, Error> {
        let (input, flags) = le_i32::<_, NomErr<'_>>(input).map_err(malformed("OP_QUERY flags"))?;
        let (input, name) = take_until::<_, _, NomErr<'_>>(&[0u8][..])(input)
            .map_err(malformed("OP_QUERY collection name is not terminated"))?;
        let full_collection_name = std::str::from_utf8(name)
            .map_err(|_| Error::InvalidBson("collection name is not UTF-8".into()))?
            .to_owned();
        let input = input.get(1..).ok_or(Error::Malformed("OP_QUERY"))?;
        let (input, number_to_skip) =
            le_i32::<_, NomErr<'_>>(input).map_err(malformed("OP_QUERY numberToSkip"))?;
        let (input, number_to_return) =
            le_i32::<_, NomErr<'_>>(input).map_err(malformed("OP_QUERY numberToReturn"))?;
        let (input, query) = parse_document(input)?;
        let return_fields_selector = if input.is_empty() {
            None
        } else {
            let (rest, fields) = parse_document(input)?;
            if !rest.is_empty() {
                return Err(Error::Malformed("trailing bytes after OP_QUERY"));
            }
            Some(fields)
        };
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            return_fields_selector,
        })
    }

    pub(crate) fn write_body(&self, out: &mut impl BufMut) {
        out.put_i32_le(self.flags);
        out.put_slice(self.full_collection_name.as_bytes());
        out.put_u8(0);
        out.put_i32_le(self.number_to_skip);
        out.put_i32_le(self.number_to_return);
        out.put_slice(self.query.as_bytes());
        if let Some(fields) = &self.return_fields_selector {
            out.put_slice(fields.as_bytes());
        }
    }
}
