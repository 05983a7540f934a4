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
        OpMsg { flags: MessageFlags::default(), body, sequences: Vec::new() }
    }

    /// Parses an `OP_MSG` from `message`, the whole message including its 16-byte header
    /// (the checksum covers the header). `body_offset` is where the flag bits start.
    pub(crate) fn parse(message: &[u8], body_offset: usize) -> Result<OpMsg, Error> {
        let input = message.get(body_offset..).ok_or(Error::Malformed("OP_MSG too short"))?;
        let (mut input, flag_bits) =
            le_u32::<_, NomErr<'_>>(input).map_err(malformed("OP_MSG without flag bits"))?;
        let flags = MessageFlags(flag_bits);
        let unknown_required = flag_bits & MessageFlags::REQUIRED_MASK & !MessageFlags::KNOWN_REQUIRED;
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
            input = input.get(..input.len() - 4).ok_or(Error::Malformed("OP_MSG checksum"))?;
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
        Ok(OpMsg { flags, body, sequences })
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
                + seq.documents.iter().map(|d| d.as_bytes().len()).sum::<usize>();
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
        .ok_or(Error::Malformed("document sequence size does not fit the message"))?;
    let (rest, section) = take::<_, _, NomErr<'_>>(size)(input).map_err(malformed("sequence"))?;
    let section = section.get(4..).ok_or(Error::Malformed("sequence"))?;
    let (after_id, identifier) = take_until::<_, _, NomErr<'_>>(&[0u8][..])(section)
        .map_err(malformed("document sequence identifier is not terminated"))?;
    let identifier = std::str::from_utf8(identifier)
        .map_err(|_| Error::InvalidBson("document sequence identifier is not UTF-8".into()))?
        .to_owned();
    let mut docs_input = after_id.get(1..).ok_or(Error::Malformed("sequence identifier"))?;
    let mut documents = Vec::new();
    while !docs_input.is_empty() {
        let (next, doc) = parse_document(docs_input)?;
        documents.push(doc);
        docs_input = next;
    }
    Ok((rest, DocumentSequence { identifier, documents }))
}

/// Deepest nesting accepted in a received document (`mongod`'s default `maxBSONDepth` is 200;
/// a little headroom is left for command wrappers around user documents).
const MAX_DEPTH: usize = 256;

/// Validates a whole document without recursion (a deeply nested input must not exhaust the
/// stack): every element's type, length and UTF-8.
pub fn validate(doc: &RawDocument) -> Result<(), Error> {
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
            return Err(Error::InvalidBson("BSONObj exceeds maximum nested object depth".into()));
        }
        stack.push(child);
    }
    Ok(())
}
