//! `OP_MSG` (opcode 2013), per the `OP_MSG` specification.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use bytes::BufMut;
use nom::{
    bytes::complete::{take, take_until},
    number::complete::{le_i32, le_u8, le_u32},
};

use crate::error::{NomErr, malformed};
use crate::{Error, MAX_MESSAGE_SIZE};

/// `OP_MSG` `flagBits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageFlags(pub u32);

impl MessageFlags {
    /// `checksumPresent`: a CRC-32C of the message follows the sections.
    pub const CHECKSUM_PRESENT: MessageFlags = MessageFlags(1);
    /// `moreToCome`: the sender will not wait for (and the receiver must not send) a reply.
    pub const MORE_TO_COME: MessageFlags = MessageFlags(1 << 1);
    /// `exhaustAllowed`: the client accepts several replies to this request.
    pub const EXHAUST_ALLOWED: MessageFlags = MessageFlags(1 << 16);
    /// The low 16 bits are required: a receiver must reject bits it does not know there.
    const REQUIRED_MASK: u32 = 0xFFFF;
    const KNOWN_REQUIRED: u32 = Self::CHECKSUM_PRESENT.0 | Self::MORE_TO_COME.0;

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: MessageFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with `other`'s bits set too.
    #[must_use]
    pub fn with(self, other: MessageFlags) -> MessageFlags {
        MessageFlags(self.0 | other.0)
    }

    /// These flags with `other`'s bits cleared.
    #[must_use]
    pub fn without(self, other: MessageFlags) -> MessageFlags {
        MessageFlags(self.0 & !other.0)
    }
}

/// A kind-1 section: a named sequence of documents (for example `documents` of an `insert`).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSequence {
    /// The sequence's identifier: the command field it stands for.
    pub identifier: String,
    /// The documents, raw.
    pub documents: Vec<RawDocumentBuf>,
}

/// A decoded `OP_MSG`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    /// `flagBits`.
    pub flags: MessageFlags,
    /// The kind-0 section: the command or reply document.
    pub body: RawDocumentBuf,
    /// The kind-1 sections, in the order received.
    pub sequences: Vec<DocumentSequence>,
}

impl OpMsg {
    /// An `OP_MSG` with only a body and no flags.
    pub fn new(body: RawDocumentBuf) -> Self {
        OpMsg {
            flags: MessageFlags::default(),
            body,
            sequences: Vec::new(),
        }
    }

    /// Parses an `OP_MSG` from `message`, the whole message including its 16-byte header
    /// (the checksum covers the header). `body_offset` is where the flag bits start.
    pub(crate) fn parse(message: &[u8], body_offset: usize) -> Result<OpMsg, Error> {
        let input = message
            .get(body_offset..)
            .ok_or(Error::Malformed("OP_MSG too short"))?;
        let (mut input, flag_bits) =
            le_u32::<_, NomErr<'_>>(input).map_err(malformed("OP_MSG without flag bits"))?;
        let flags = MessageFlags(flag_bits);
        let unknown_required =
            flag_bits & MessageFlags::REQUIRED_MASK & !MessageFlags::KNOWN_REQUIRED;
        if unknown_required != 0 {
            return Err(Error::IllegalOpMsgFlag(unknown_required));
        }
        if flags.contains(MessageFlags::CHECKSUM_PRESENT) {
            let split = message
                .len()
                .checked_sub(4)
                .filter(|&s| s >= body_offset + 4)
                .ok_or(Error::Malformed("OP_MSG checksum missing"))?;
            let (covered, tail) = message.split_at(split);
            let (_, expected) = le_u32::<_, NomErr<'_>>(tail).map_err(malformed("checksum"))?;
            let actual = crc32c::crc32c(covered);
            if expected != actual {
                return Err(Error::ChecksumMismatch { expected, actual });
            }
            input = input
                .get(..input.len() - 4)
                .ok_or(Error::Malformed("OP_MSG checksum"))?;
        }

        let mut body = None;
        let mut sequences: Vec<DocumentSequence> = Vec::new();
        while !input.is_empty() {
            let (rest, kind) = le_u8::<_, NomErr<'_>>(input).map_err(malformed("section kind"))?;
            input = match kind {
                0 => {
                    let (rest, doc) = parse_document(rest)?;
                    if body.is_some() {
                        return Err(Error::MultipleBodies);
                    }
                    body = Some(doc);
                    rest
                }
                1 => {
                    let (rest, seq) = parse_sequence(rest)?;
                    if sequences.iter().any(|s| s.identifier == seq.identifier) {
                        return Err(Error::DuplicateSequence(seq.identifier));
                    }
                    sequences.push(seq);
                    rest
                }
                other => return Err(Error::UnknownPayloadType(other)),
            };
        }
        let body = body.ok_or(Error::MissingBody)?;
        Ok(OpMsg {
            flags,
            body,
            sequences,
        })
    }

    /// Appends the flag bits and sections to `out`. The checksum, which covers the header, is
    /// appended by [`crate::Message::encode`] when `checksumPresent` is set.
    pub(crate) fn write_body(&self, out: &mut impl BufMut) {
        out.put_u32_le(self.flags.0);
        out.put_u8(0);
        out.put_slice(self.body.as_bytes());
        for seq in &self.sequences {
            let size = 4
                + seq.identifier.len()
                + 1
                + seq
                    .documents
                    .iter()
                    .map(|d| d.as_bytes().len())
                    .sum::<usize>();
            out.put_u8(1);
            out.put_i32_le(i32::try_from(size).unwrap_or(i32::MAX));
            out.put_slice(seq.identifier.as_bytes());
            out.put_u8(0);
            for doc in &seq.documents {
                out.put_slice(doc.as_bytes());
            }
        }
    }
}

/// Reads one BSON document: its length is checked against the remaining input before any copy,
/// and its contents are validated in full.
pub(crate) fn parse_document(input: &[u8]) -> Result<(&[u8], RawDocumentBuf), Error> {
    let (_, len) = le_i32::<_, NomErr<'_>>(input).map_err(malformed("document length"))?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l >= 5 && l <= input.len() && l <= MAX_MESSAGE_SIZE)
        .ok_or(Error::Malformed("document length does not fit the message"))?;
    let (rest, bytes) = take::<_, _, NomErr<'_>>(len)(input).map_err(malformed("document"))?;
    let doc = RawDocument::from_bytes(bytes).map_err(|e| Error::InvalidBson(e.to_string()))?;
    validate(doc)?;
    Ok((rest, doc.to_owned()))
}

fn parse_sequence(input: &[u8]) -> Result<(&[u8], DocumentSequence), Error> {
    let (_, size) = le_i32::<_, NomErr<'_>>(input).map_err(malformed("sequence size"))?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s >= 4 && s <= input.len())
        .ok_or(Error::Malformed(
            "document sequence size does not fit the message",
        ))?;
    let (rest, section) = take::<_, _, NomErr<'_>>(size)(input).map_err(malformed("sequence"))?;
    let section = section.get(4..).ok_or(Error::Malformed("sequence"))?;
    let (after_id, identifier) = take_until::<_, _, NomErr<'_>>(&[0u8][..])(section)
        .map_err(malformed("document sequence identifier is not terminated"))?;
    let identifier = std::str::from_utf8(identifier)
        .map_err(|_| Error::InvalidBson("document sequence identifier is not UTF-8".into()))?
        .to_owned();
    let mut docs_input = after_id
        .get(1..)
        .ok_or(Error::Malformed("sequence identifier"))?;
    let mut documents = Vec::new();
    while !docs_input.is_empty() {
        let (next, doc) = parse_document(docs_input)?;
        documents.push(doc);
        docs_input = next;
    }
    Ok((
        rest,
        DocumentSequence {
            identifier,
            documents,
        },
    ))
}

/// Deepest nesting accepted in a received document (`mongod`'s default `maxBSONDepth` is 200;
/// a little headroom is left for command wrappers around user documents).
const MAX_DEPTH: usize = 256;

/// Validates a whole document (see [`crate::bson_check`]): every element well formed, every
/// string and field name UTF-8, nesting at most [`MAX_DEPTH`] deep.
pub fn validate(doc: &RawDocument) -> Result<(), Error> {
    crate::bson_check::check(doc.as_bytes(), MAX_DEPTH)
        .map_err(|why| Error::InvalidBson(why.into()))
}

/// For the fuzz target: whether [`validate`] and [`validate_with_bson_crate`] agree on
/// `bytes` (taken as a document when its length and terminator say it is one).
#[doc(hidden)]
#[must_use]
pub fn validators_agree(bytes: &[u8]) -> bool {
    RawDocument::from_bytes(bytes).map_or(true, |doc| {
        validate(doc).is_ok() == validate_with_bson_crate(doc).is_ok()
    })
}

/// The reference [`validate`] is checked against (property tests, the fuzz target): every
/// element read with the `bson` crate's own accessors, without recursion (a deeply nested input must not exhaust the
/// stack): every element's type, length and UTF-8.
#[doc(hidden)]
pub fn validate_with_bson_crate(doc: &RawDocument) -> Result<(), Error> {
    enum Level<'a> {
        Doc(bson::raw::RawIter<'a>),
        Arr(bson::raw::RawArrayIter<'a>),
    }
    let invalid = |e: bson::error::Error| Error::InvalidBson(e.to_string());
    let mut stack = vec![Level::Doc(doc.iter_elements())];
    while let Some(level) = stack.last_mut() {
        let next = match level {
            Level::Doc(it) => it.next().map(|r| r.and_then(|e| e.value())),
            Level::Arr(it) => it.next(),
        };
        let Some(value) = next else {
            stack.pop();
            continue;
        };
        let value = value.map_err(invalid)?;
        let child = match value {
            RawBsonRef::Document(d) => Level::Doc(d.iter_elements()),
            RawBsonRef::Array(a) => Level::Arr(a.into_iter()),
            RawBsonRef::JavaScriptCodeWithScope(c) => Level::Doc(c.scope.iter_elements()),
            _ => continue,
        };
        if stack.len() >= MAX_DEPTH {
            return Err(Error::InvalidBson(
                "BSONObj exceeds maximum nested object depth".into(),
            ));
        }
        stack.push(child);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;
    use crate::testutil::{
        ID1, ID2, PING, PING_DOC, TestResult, decode, kind0, kind1, nested_document, op_msg,
        read_i32, set_i32, with_checksum,
    };
    use crate::{Body, Message};

    /// `{insert: "c", $db: "d"}`, 30 bytes.
    const INSERT_DOC: [u8; 30] = [
        0x1e, 0x00, 0x00, 0x00, //
        0x02, b'i', b'n', b's', b'e', b'r', b't', 0x00, 0x02, 0x00, 0x00, 0x00, b'c', 0x00, //
        0x02, b'$', b'd', b'b', 0x00, 0x02, 0x00, 0x00, 0x00, b'd', 0x00, //
        0x00,
    ];

    fn decode_msg(bytes: &[u8]) -> Result<OpMsg, Error> {
        match decode(bytes)?.body {
            Body::Msg(msg) => Ok(msg),
            other => panic!("not an OP_MSG: {other:?}"),
        }
    }

    fn insert() -> OpMsg {
        OpMsg {
            flags: MessageFlags::default(),
            body: rawdoc! { "insert": "c", "$db": "d" },
            sequences: vec![DocumentSequence {
                identifier: "documents".into(),
                documents: vec![rawdoc! { "_id": 1 }, rawdoc! { "_id": 2 }],
            }],
        }
    }

    #[test]
    fn fixtures_match_the_bson_crate() {
        assert_eq!(rawdoc! { "ping": 1, "$db": "admin" }.as_bytes(), PING_DOC);
        assert_eq!(rawdoc! { "insert": "c", "$db": "d" }.as_bytes(), INSERT_DOC);
        assert_eq!(rawdoc! { "_id": 1 }.as_bytes(), ID1);
        assert_eq!(rawdoc! { "_id": 2 }.as_bytes(), ID2);
    }

    #[test]
    fn ping_decodes() -> TestResult {
        let msg = decode(&PING)?;
        assert_eq!(
            msg,
            Message {
                request_id: 1,
                response_to: 0,
                body: Body::Msg(OpMsg::new(rawdoc! { "ping": 1, "$db": "admin" })),
                compressor: None,
            }
        );
        Ok(())
    }

    #[test]
    fn sequence_after_the_body() -> TestResult {
        let bytes = op_msg(
            0,
            &[&kind0(&INSERT_DOC), &kind1("documents", &[&ID1, &ID2])],
        );
        assert_eq!(decode_msg(&bytes)?, insert());
        Ok(())
    }

    #[test]
    fn sequence_before_the_body() -> TestResult {
        let bytes = op_msg(
            0,
            &[&kind1("documents", &[&ID1, &ID2]), &kind0(&INSERT_DOC)],
        );
        assert_eq!(decode_msg(&bytes)?, insert());
        Ok(())
    }

    #[test]
    fn several_and_empty_sequences() -> TestResult {
        let bytes = op_msg(
            0,
            &[
                &kind1("updates", &[&ID1]),
                &kind0(&INSERT_DOC),
                &kind1("", &[]),
                &kind1("x", &[&ID2]),
            ],
        );
        let msg = decode_msg(&bytes)?;
        let ids: Vec<_> = msg
            .sequences
            .iter()
            .map(|s| s.identifier.as_str())
            .collect();
        assert_eq!(ids, ["updates", "", "x"]);
        assert!(msg.sequences[1].documents.is_empty());
        Ok(())
    }

    #[test]
    fn valid_checksum() -> TestResult {
        let bytes = with_checksum(op_msg(1, &[&kind0(&PING_DOC)]));
        let msg = decode_msg(&bytes)?;
        assert!(msg.flags.contains(MessageFlags::CHECKSUM_PRESENT));
        assert_eq!(msg.body.as_bytes(), PING_DOC);
        // And the encoder computes the same checksum.
        let mut out = bytes::BytesMut::new();
        Message {
            request_id: 7,
            response_to: 0,
            body: Body::Msg(msg),
            compressor: None,
        }
        .encode(None, &mut out)?;
        assert_eq!(out[..], bytes[..]);
        Ok(())
    }

    #[test]
    fn valid_checksum_with_a_sequence() -> TestResult {
        let bytes = with_checksum(op_msg(
            1,
            &[&kind1("documents", &[&ID1, &ID2]), &kind0(&INSERT_DOC)],
        ));
        assert_eq!(
            decode_msg(&bytes)?,
            OpMsg {
                flags: MessageFlags(1),
                ..insert()
            }
        );
        Ok(())
    }

    #[test]
    fn wrong_checksum() {
        let mut bytes = with_checksum(op_msg(1, &[&kind0(&PING_DOC)]));
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        assert!(matches!(
            decode_msg(&bytes),
            Err(Error::ChecksumMismatch { .. })
        ));
        // A flipped bit in the covered bytes (here the requestID) is caught too.
        let mut bytes = with_checksum(op_msg(1, &[&kind0(&PING_DOC)]));
        bytes[4] ^= 0x80;
        assert!(matches!(
            decode_msg(&bytes),
            Err(Error::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn checksum_flag_without_room_for_a_checksum() {
        // Flag bits and nothing else: the four checksum bytes are missing.
        assert!(matches!(
            decode_msg(&op_msg(1, &[])),
            Err(Error::Malformed(_))
        ));
        // Without the flag, a trailing checksum is read as a section kind.
        let mut bytes = with_checksum(op_msg(1, &[&kind0(&PING_DOC)]));
        bytes[16] = 0;
        assert!(decode_msg(&bytes).is_err());
    }

    #[test]
    fn unknown_required_flag_bit() {
        for bit in [2, 3, 15] {
            let bytes = op_msg(1 << bit, &[&kind0(&PING_DOC)]);
            assert_eq!(
                decode_msg(&bytes),
                Err(Error::IllegalOpMsgFlag(1 << bit)),
                "bit {bit}"
            );
        }
        // Only the unknown bits are reported.
        let bytes = op_msg(0b111, &[&kind0(&PING_DOC)]);
        assert_eq!(decode_msg(&bytes), Err(Error::IllegalOpMsgFlag(0b100)));
    }

    #[test]
    fn unknown_optional_flag_bits_are_accepted_and_kept() -> TestResult {
        for flags in [1 << 20, 1 << 31, 0xFFFF_0000] {
            let msg = decode_msg(&op_msg(flags, &[&kind0(&PING_DOC)]))?;
            assert_eq!(msg.flags, MessageFlags(flags));
        }
        Ok(())
    }

    #[test]
    fn known_flags_are_accepted() -> TestResult {
        let exhaust = decode_msg(&op_msg(1 << 16, &[&kind0(&PING_DOC)]))?;
        assert!(exhaust.flags.contains(MessageFlags::EXHAUST_ALLOWED));
        let more = decode_msg(&op_msg(1 << 1, &[&kind0(&PING_DOC)]))?;
        assert!(more.flags.contains(MessageFlags::MORE_TO_COME));
        assert!(!more.flags.contains(MessageFlags::EXHAUST_ALLOWED));
        let all = decode_msg(&with_checksum(op_msg(0x1_0003, &[&kind0(&PING_DOC)])))?;
        assert_eq!(
            all.flags,
            MessageFlags::CHECKSUM_PRESENT
                .with(MessageFlags::MORE_TO_COME)
                .with(MessageFlags::EXHAUST_ALLOWED)
        );
        assert_eq!(
            all.flags.without(MessageFlags::MORE_TO_COME),
            MessageFlags(0x1_0001)
        );
        Ok(())
    }

    #[test]
    fn two_bodies() {
        let bytes = op_msg(0, &[&kind0(&PING_DOC), &kind0(&PING_DOC)]);
        assert_eq!(decode_msg(&bytes), Err(Error::MultipleBodies));
    }

    #[test]
    fn no_body() {
        assert_eq!(decode_msg(&op_msg(0, &[])), Err(Error::MissingBody));
        let bytes = op_msg(0, &[&kind1("documents", &[&ID1])]);
        assert_eq!(decode_msg(&bytes), Err(Error::MissingBody));
    }

    #[test]
    fn duplicate_sequence() {
        let bytes = op_msg(
            0,
            &[
                &kind0(&INSERT_DOC),
                &kind1("documents", &[&ID1]),
                &kind1("documents", &[&ID2]),
            ],
        );
        assert_eq!(
            decode_msg(&bytes),
            Err(Error::DuplicateSequence("documents".into()))
        );
    }

    #[test]
    fn unknown_section_kind() {
        for kind in [2, 3, 0xff] {
            let mut section = kind0(&PING_DOC);
            section[0] = kind;
            assert_eq!(
                decode_msg(&op_msg(0, &[&section])),
                Err(Error::UnknownPayloadType(kind))
            );
        }
        // After a valid body too.
        let bytes = op_msg(0, &[&kind0(&PING_DOC), &[2, 0, 0, 0, 0]]);
        assert_eq!(decode_msg(&bytes), Err(Error::UnknownPayloadType(2)));
    }

    fn is_invalid(result: &Result<OpMsg, Error>) -> bool {
        matches!(result, Err(Error::InvalidBson(_) | Error::Malformed(_)))
    }

    #[test]
    fn invalid_bson_body() {
        // Outer length one short: the document's last byte is not its terminator.
        let mut doc = PING_DOC;
        doc[0] = 29;
        let bytes = op_msg(0, &[&kind0(&doc)]);
        assert!(is_invalid(&decode_msg(&bytes)), "{:?}", decode_msg(&bytes));
        // Outer length too small for any document.
        doc[0] = 4;
        assert!(is_invalid(&decode_msg(&op_msg(0, &[&kind0(&doc)]))));
        // String length runs past the document.
        let mut doc = PING_DOC;
        doc[19] = 0x20;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // String length zero (a BSON string holds at least its terminator).
        doc[19] = 0;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Invalid UTF-8 in a string value: "admin" -> "adm\xffn".
        let mut doc = PING_DOC;
        doc[26] = 0xff;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Invalid UTF-8 in a key: "ping" -> "p\xc3ng" (a truncated two-byte sequence).
        let mut doc = PING_DOC;
        doc[6] = 0xc3;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Unterminated document: the final NUL replaced.
        let mut doc = PING_DOC;
        doc[29] = 0x01;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Unknown element type.
        let mut doc = PING_DOC;
        doc[4] = 0x20;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Unterminated key: the key's NUL and everything after replaced.
        let doc = [0x0a, 0, 0, 0, 0x10, b'a', b'b', b'c', b'd', 0];
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
    }

    #[test]
    fn invalid_bson_embedded_document() {
        // {a: {}} with the inner length claiming 6 bytes.
        let doc = [0x0d, 0, 0, 0, 0x03, b'a', 0, 0x06, 0, 0, 0, 0, 0];
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // {a: []} with an inner length of 4.
        let doc = [0x0d, 0, 0, 0, 0x04, b'a', 0, 0x04, 0, 0, 0, 0, 0];
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::InvalidBson(_))
        ));
        // Invalid UTF-8 two levels down.
        let mut nested = rawdoc! { "a": { "b": { "c": "xyz" } } }.into_bytes();
        let at = nested.len() - 5;
        nested[at] = 0xfe;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&nested)])),
            Err(Error::InvalidBson(_))
        ));
        // And in a sequence document.
        let bytes = op_msg(0, &[&kind0(&INSERT_DOC), &kind1("documents", &[&nested])]);
        assert!(matches!(decode_msg(&bytes), Err(Error::InvalidBson(_))));
    }

    #[test]
    fn body_overrunning_the_frame() {
        let mut doc = PING_DOC;
        doc[0] = 31;
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::Malformed(_))
        ));
        set_i32(&mut doc, 0, i32::MAX);
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::Malformed(_))
        ));
        set_i32(&mut doc, 0, -1);
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc)])),
            Err(Error::Malformed(_))
        ));
        // A body cut short by the frame.
        assert!(matches!(
            decode_msg(&op_msg(0, &[&kind0(&doc[..10])])),
            Err(Error::Malformed(_))
        ));
        // A kind byte and nothing more.
        assert!(matches!(
            decode_msg(&op_msg(0, &[&[0]])),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn sequence_overrunning_the_frame() {
        let mut section = kind1("documents", &[&ID1]);
        let size = read_i32(&section, 1);
        for bad in [size + 1, i32::MAX, -1, 0, 3] {
            set_i32(&mut section, 1, bad);
            let bytes = op_msg(0, &[&kind0(&PING_DOC), &section]);
            assert!(
                matches!(decode_msg(&bytes), Err(Error::Malformed(_))),
                "size {bad}"
            );
        }
        // One byte short: the last document overruns the section.
        set_i32(&mut section, 1, size - 1);
        let mut bytes = op_msg(0, &[&kind0(&PING_DOC), &section]);
        assert!(decode_msg(&bytes).is_err());
        // A document in the sequence overruns it.
        let mut section = kind1("documents", &[&ID1]);
        let at = section.len() - ID1.len();
        set_i32(&mut section, at, 15);
        bytes = op_msg(0, &[&kind0(&PING_DOC), &section]);
        assert!(matches!(decode_msg(&bytes), Err(Error::Malformed(_))));
        // Section size field cut short by the frame.
        let bytes = op_msg(0, &[&kind0(&PING_DOC), &[1, 9, 0]]);
        assert!(matches!(decode_msg(&bytes), Err(Error::Malformed(_))));
    }

    #[test]
    fn sequence_identifier_errors() {
        // No NUL before the section ends.
        let section = [1, 8, 0, 0, 0, b'd', b'o', b'c', b's'];
        let bytes = op_msg(0, &[&kind0(&PING_DOC), &section]);
        assert!(matches!(decode_msg(&bytes), Err(Error::Malformed(_))));
        // Not UTF-8.
        let mut section = kind1("d\u{e9}", &[]);
        section[6] = 0xff;
        let bytes = op_msg(0, &[&kind0(&PING_DOC), &section]);
        assert!(matches!(decode_msg(&bytes), Err(Error::InvalidBson(_))));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = nested_document(100_000);
        let bytes = op_msg(0, &[&kind0(&deep)]);
        assert!(matches!(decode_msg(&bytes), Err(Error::InvalidBson(_))));
        // Arrays nest the same way: every level becomes `{"0": [...]}`.
        let mut arrays = nested_document(100_000);
        for level in 0..100_000 {
            arrays[level * 7 + 4] = 0x04;
            arrays[level * 7 + 5] = b'0';
        }
        let bytes = op_msg(0, &[&kind0(&arrays)]);
        assert!(matches!(decode_msg(&bytes), Err(Error::InvalidBson(_))));
    }

    #[test]
    fn nesting_limit() -> TestResult {
        // mongod accepts 200 levels by default.
        decode_msg(&op_msg(0, &[&kind0(&nested_document(200))]))?;
        // The top-level document counts as one level.
        decode_msg(&op_msg(0, &[&kind0(&nested_document(MAX_DEPTH - 1))]))?;
        let too_deep = op_msg(0, &[&kind0(&nested_document(MAX_DEPTH))]);
        assert!(matches!(decode_msg(&too_deep), Err(Error::InvalidBson(_))));
        Ok(())
    }

    #[test]
    fn validate_accepts_every_type() -> TestResult {
        let doc = bson::doc! {
            "double": 1.5, "string": "s", "doc": { "a": [1, { "b": null }] }, "array": [[], {}],
            "binary": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "undefined": bson::Bson::Undefined, "oid": bson::oid::ObjectId::from_bytes([7; 12]),
            "bool": true, "date": bson::DateTime::from_millis(-1), "null": null,
            "regex": bson::Regex { pattern: "a.*".try_into()?, options: "i".try_into()? },
            "code": bson::Bson::JavaScriptCode("f()".into()),
            "scope": bson::JavaScriptCodeWithScope { code: "g()".into(), scope: bson::doc! { "x": { "y": 1 } } },
            "int32": 1, "timestamp": bson::Timestamp { time: 1, increment: 2 }, "int64": 2_i64,
            "decimal": bson::Decimal128::from_bytes([0; 16]), "min": bson::Bson::MinKey,
            "max": bson::Bson::MaxKey, "symbol": bson::Bson::Symbol("s".into()),
        };
        let raw = RawDocumentBuf::try_from(&doc)?;
        validate(&raw)?;
        let bytes = op_msg(0, &[&kind0(raw.as_bytes())]);
        assert_eq!(decode_msg(&bytes)?.body, raw);
        Ok(())
    }

    #[test]
    fn validate_descends_into_code_with_scope() -> TestResult {
        let doc = bson::doc! {
            "scope": bson::JavaScriptCodeWithScope { code: "g()".into(), scope: bson::doc! { "x": "abc" } },
        };
        let mut bytes = RawDocumentBuf::try_from(&doc)?.into_bytes();
        let at = bytes.len() - 4; // inside "abc"
        bytes[at] = 0xff;
        let doc = RawDocument::from_bytes(&bytes)?;
        assert!(matches!(validate(doc), Err(Error::InvalidBson(_))));
        Ok(())
    }

    #[test]
    fn write_body_layout() {
        let mut out = Vec::new();
        insert().write_body(&mut out);
        let mut expected = 0u32.to_le_bytes().to_vec();
        expected.extend(kind0(&INSERT_DOC));
        expected.extend(kind1("documents", &[&ID1, &ID2]));
        assert_eq!(out, expected);
    }

    #[test]
    fn ping_is_what_a_driver_sends() {
        // The fixture in one piece, for a reader comparing with a packet capture.
        assert_eq!(PING.len(), 51);
        assert_eq!(PING[21..], PING_DOC);
    }
}
