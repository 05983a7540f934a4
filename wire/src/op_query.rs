//! Legacy `OP_QUERY` (opcode 2004). Drivers still send their first `hello`/`isMaster` this way;
//! only queries against `<db>.$cmd` are meaningful to Ebb.

use bson::RawDocumentBuf;
use bytes::BufMut;
use nom::{bytes::complete::take_until, number::complete::le_i32};

use crate::Error;
use crate::error::{NomErr, malformed};
use crate::op_msg::parse_document;

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

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;
    use crate::testutil::{TestResult, decode, message, roundtrip};
    use crate::{Body, Compressor, Message};

    /// `db.adminCommand({isMaster: 1})` as a legacy driver's first message: `OP_QUERY` on
    /// `admin.$cmd`, numberToReturn -1, requestID 3.
    const IS_MASTER: [u8; 58] = [
        0x3a, 0x00, 0x00, 0x00, // messageLength 58
        0x03, 0x00, 0x00, 0x00, // requestID 3
        0x00, 0x00, 0x00, 0x00, // responseTo 0
        0xd4, 0x07, 0x00, 0x00, // opCode 2004
        0x00, 0x00, 0x00, 0x00, // flags
        b'a', b'd', b'm', b'i', b'n', b'.', b'$', b'c', b'm', b'd',
        0x00, // fullCollectionName
        0x00, 0x00, 0x00, 0x00, // numberToSkip 0
        0xff, 0xff, 0xff, 0xff, // numberToReturn -1
        0x13, 0x00, 0x00, 0x00, // query {isMaster: 1}
        0x10, b'i', b's', b'M', b'a', b's', b't', b'e', b'r', 0x00, 0x01, 0x00, 0x00, 0x00, //
        0x00,
    ];

    /// `{a: 1}` as a returnFieldsSelector.
    const SELECTOR: [u8; 12] = [
        0x0c, 0x00, 0x00, 0x00, 0x10, b'a', 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    ];

    fn is_master() -> OpQuery {
        OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: rawdoc! { "isMaster": 1 },
            return_fields_selector: None,
        }
    }

    fn decode_query(bytes: &[u8]) -> Result<OpQuery, Error> {
        match decode(bytes)?.body {
            Body::Query(query) => Ok(query),
            other => panic!("not an OP_QUERY: {other:?}"),
        }
    }

    /// The fixture's body with `tail` appended, under a fresh header.
    fn with_tail(tail: &[u8]) -> Vec<u8> {
        let mut body = IS_MASTER[16..].to_vec();
        body.extend_from_slice(tail);
        message(3, 0, 2004, &body)
    }

    #[test]
    fn is_master_decodes() -> TestResult {
        let msg = decode(&IS_MASTER)?;
        assert_eq!(msg.request_id, 3);
        assert_eq!(msg.body, Body::Query(is_master()));
        Ok(())
    }

    #[test]
    fn is_master_encodes_to_the_fixture() -> TestResult {
        let msg = Message {
            request_id: 3,
            response_to: 0,
            body: Body::Query(is_master()),
            compressor: None,
        };
        assert_eq!(roundtrip!(msg)?[..], IS_MASTER[..]);
        Ok(())
    }

    #[test]
    fn with_return_fields_selector() -> TestResult {
        let query = decode_query(&with_tail(&SELECTOR))?;
        assert_eq!(query.return_fields_selector, Some(rawdoc! { "a": 1 }));
        let msg = Message {
            request_id: 3,
            response_to: 0,
            body: Body::Query(query),
            compressor: None,
        };
        assert_eq!(roundtrip!(msg.clone())?[..], with_tail(&SELECTOR)[..]);
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
    fn wrapped_query_and_flags() -> TestResult {
        let query = OpQuery {
            flags: 1 << 2, // SecondaryOk
            full_collection_name: "test.$cmd".into(),
            number_to_skip: 0,
            number_to_return: 1,
            query: rawdoc! { "$query": { "hello": 1 }, "$readPreference": { "mode": "primary" } },
            return_fields_selector: None,
        };
        let msg = Message {
            request_id: 9,
            response_to: 0,
            body: Body::Query(query),
            compressor: None,
        };
        roundtrip!(msg)?;
        Ok(())
    }

    #[test]
    fn trailing_bytes_after_the_selector() {
        let mut tail = SELECTOR.to_vec();
        tail.push(0);
        assert!(matches!(
            decode_query(&with_tail(&tail)),
            Err(Error::Malformed(_))
        ));
        let mut tail = SELECTOR.to_vec();
        tail.extend_from_slice(&SELECTOR);
        assert!(matches!(
            decode_query(&with_tail(&tail)),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn truncated_queries() {
        // Cut after every field boundary and inside each field.
        for end in [16, 18, 20, 25, 31, 33, 35, 37, 39, 41, 45, 57] {
            let bytes = message(3, 0, 2004, &IS_MASTER[16..end]);
            assert!(
                matches!(
                    decode_query(&bytes),
                    Err(Error::Malformed(_) | Error::InvalidBson(_))
                ),
                "cut at {end}: {:?}",
                decode_query(&bytes)
            );
        }
    }

    #[test]
    fn collection_name_errors() {
        // Not terminated: no NUL anywhere after the flags.
        let bytes = message(3, 0, 2004, &[0, 0, 0, 0, b'a', b'.', b'b']);
        assert!(matches!(decode_query(&bytes), Err(Error::Malformed(_))));
        // Not UTF-8.
        let mut bytes = IS_MASTER;
        bytes[22] = 0xff;
        assert!(matches!(decode_query(&bytes), Err(Error::InvalidBson(_))));
    }

    #[test]
    fn invalid_query_document() {
        let mut bytes = IS_MASTER;
        bytes[43] = 0x20; // unknown element type
        assert!(matches!(decode_query(&bytes), Err(Error::InvalidBson(_))));
    }
}
