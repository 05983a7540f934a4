//! Framing and the message envelope shared by every opcode.

use bytes::{BufMut, Bytes, BytesMut};
use nom::number::complete::{le_i32, le_u8};

use crate::error::{NomErr, malformed};
use crate::header::{HEADER_LEN, MsgHeader, OpCode};
use crate::op_msg::MessageFlags;
use crate::{Compressor, Error, OpMsg, OpQuery, OpReply};

/// One complete, length-checked message as it arrived, header included.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The parsed header.
    pub header: MsgHeader,
    /// The whole message, header included.
    pub bytes: Bytes,
}

impl Frame {
    /// Cuts one frame off the front of `buf`.
    ///
    /// Returns `Ok(None)` while the frame is incomplete, after reserving room for the rest of
    /// it. `messageLength` is checked against `[16, max]` and the opcode is checked *before*
    /// anything is reserved, so a hostile header costs no memory.
    pub fn split(buf: &mut BytesMut, max: usize) -> Result<Option<Frame>, Error> {
        let Some(head) = buf.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let (_, header) = MsgHeader::parse(head).map_err(malformed("header"))?;
        let len = header.checked_length(max)?;
        OpCode::from_i32(header.op_code)?;
        if buf.len() < len {
            buf.reserve(len - buf.len());
            return Ok(None);
        }
        let bytes = buf.split_to(len).freeze();
        Ok(Some(Frame { header, bytes }))
    }
}

/// The body of a message, by opcode.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// `OP_MSG`.
    Msg(OpMsg),
    /// `OP_QUERY`.
    Query(OpQuery),
    /// `OP_REPLY`.
    Reply(OpReply),
}

impl Body {
    fn op_code(&self) -> OpCode {
        match self {
            Body::Msg(_) => OpCode::Msg,
            Body::Query(_) => OpCode::Query,
            Body::Reply(_) => OpCode::Reply,
        }
    }

    fn write(&self, out: &mut impl BufMut) {
        match self {
            Body::Msg(m) => m.write_body(out),
            Body::Query(q) => q.write_body(out),
            Body::Reply(r) => r.write_body(out),
        }
    }

    /// Rejects what the wire format cannot carry: a C string (sequence identifier, collection
    /// name) with an interior NUL would be cut short by the reader.
    fn check_encodable(&self) -> Result<(), Error> {
        let nul = |s: &str| s.as_bytes().contains(&0);
        match self {
            Body::Msg(m) if m.sequences.iter().any(|s| nul(&s.identifier)) => Err(
                Error::Malformed("document sequence identifier contains a NUL byte"),
            ),
            Body::Query(q) if nul(&q.full_collection_name) => {
                Err(Error::Malformed("fullCollectionName contains a NUL byte"))
            }
            Body::Msg(_) | Body::Query(_) | Body::Reply(_) => Ok(()),
        }
    }

    fn wants_checksum(&self) -> bool {
        matches!(self, Body::Msg(m) if m.flags.contains(MessageFlags::CHECKSUM_PRESENT))
    }
}

/// A decoded message: its ids, its body, and the compressor it arrived under, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `requestID`.
    pub request_id: i32,
    /// `responseTo`.
    pub response_to: i32,
    /// The body.
    pub body: Body,
    /// The compressor of the `OP_COMPRESSED` envelope it came in, if it came in one.
    pub compressor: Option<Compressor>,
}

impl Message {
    /// Parses a frame produced by [`Frame::split`]. `max` bounds the uncompressed size of an
    /// `OP_COMPRESSED` message.
    pub fn decode(frame: &Frame, max: usize) -> Result<Message, Error> {
        let header = frame.header;
        let op = OpCode::from_i32(header.op_code)?;
        let (body, compressor) = if op == OpCode::Compressed {
            let input = frame
                .bytes
                .get(HEADER_LEN..)
                .ok_or(Error::Malformed("OP_COMPRESSED"))?;
            let (input, original) =
                le_i32::<_, NomErr<'_>>(input).map_err(malformed("originalOpcode"))?;
            let (input, size) =
                le_i32::<_, NomErr<'_>>(input).map_err(malformed("uncompressedSize"))?;
            let (input, id) = le_u8::<_, NomErr<'_>>(input).map_err(malformed("compressorId"))?;
            let original = OpCode::from_i32(original)?;
            if original == OpCode::Compressed {
                return Err(Error::Malformed("OP_COMPRESSED inside OP_COMPRESSED"));
            }
            let announced = size;
            let size =
                usize::try_from(size).map_err(|_| Error::Malformed("negative uncompressedSize"))?;
            // Checked before anything is allocated for the decompressed bytes.
            if size > max.saturating_sub(HEADER_LEN) {
                return Err(Error::MessageTooLarge {
                    len: i64::from(announced) + 16,
                    max,
                });
            }
            let compressor = Compressor::from_id(id)?;
            let inner = compressor.decompress(input, size)?;
            // Rebuild the original message so that offsets and a checksum see what was sent.
            let mut whole = Vec::with_capacity(HEADER_LEN + size);
            MsgHeader {
                message_length: i32::try_from(HEADER_LEN + size)
                    .map_err(|_| Error::Malformed("uncompressedSize"))?,
                op_code: original.as_i32(),
                ..header
            }
            .write(&mut whole);
            whole.extend_from_slice(&inner);
            (parse_body(original, &whole)?, Some(compressor))
        } else {
            (parse_body(op, &frame.bytes)?, None)
        };
        Ok(Message {
            request_id: header.request_id,
            response_to: header.response_to,
            body,
            compressor,
        })
    }

    /// Appends the encoded message to `out`, wrapped in `OP_COMPRESSED` when `compressor` is
    /// given. An `OP_MSG` whose flags carry `checksumPresent` gets its CRC-32C, computed over the
    /// uncompressed message as the specification requires. On error `out` is left as it was.
    pub fn encode(&self, compressor: Option<Compressor>, out: &mut BytesMut) -> Result<(), Error> {
        self.body.check_encodable()?;
        let start = out.len();
        let result = self.encode_unchecked(compressor, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_unchecked(
        &self,
        compressor: Option<Compressor>,
        out: &mut BytesMut,
    ) -> Result<(), Error> {
        let header = |len: usize, op: OpCode| -> Result<MsgHeader, Error> {
            Ok(MsgHeader {
                message_length: i32::try_from(len).map_err(|_| Error::MessageTooLarge {
                    len: i64::try_from(len).unwrap_or(i64::MAX),
                    max: i32::MAX as usize,
                })?,
                request_id: self.request_id,
                response_to: self.response_to,
                op_code: op.as_i32(),
            })
        };
        let op = self.body.op_code();
        match compressor {
            None => {
                let start = out.len();
                out.put_bytes(0, HEADER_LEN);
                self.body.write(out);
                let mut len = out.len() - start;
                if self.body.wants_checksum() {
                    len += 4;
                }
                let mut head = Vec::with_capacity(HEADER_LEN);
                header(len, op)?.write(&mut head);
                if let Some(slot) = out.get_mut(start..start + HEADER_LEN) {
                    slot.copy_from_slice(&head);
                }
                if self.body.wants_checksum() {
                    let crc = crc32c::crc32c(out.get(start..).unwrap_or_default());
                    out.put_u32_le(crc);
                }
            }
            Some(compressor) => {
                let mut plain = Vec::new();
                self.body.write(&mut plain);
                if self.body.wants_checksum() {
                    let mut whole = Vec::with_capacity(HEADER_LEN + plain.len() + 4);
                    header(HEADER_LEN + plain.len() + 4, op)?.write(&mut whole);
                    whole.extend_from_slice(&plain);
                    plain.put_u32_le(crc32c::crc32c(&whole));
                }
                let compressed = compressor.compress(&plain)?;
                header(HEADER_LEN + 9 + compressed.len(), OpCode::Compressed)?.write(out);
                out.put_i32_le(op.as_i32());
                out.put_i32_le(
                    i32::try_from(plain.len())
                        .map_err(|_| Error::Malformed("message too large"))?,
                );
                out.put_u8(compressor.id());
                out.put_slice(&compressed);
            }
        }
        Ok(())
    }
}

fn parse_body(op: OpCode, whole: &[u8]) -> Result<Body, Error> {
    let rest = whole
        .get(HEADER_LEN..)
        .ok_or(Error::Malformed("message shorter than header"))?;
    match op {
        OpCode::Msg => Ok(Body::Msg(OpMsg::parse(whole, HEADER_LEN)?)),
        OpCode::Query => Ok(Body::Query(OpQuery::parse(rest)?)),
        OpCode::Reply => Ok(Body::Reply(OpReply::parse(rest)?)),
        OpCode::Compressed => Err(Error::Malformed("OP_COMPRESSED inside OP_COMPRESSED")),
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;
    use crate::testutil::{PING, PING_DOC, TestResult, message, roundtrip, set_i32};
    use crate::{DocumentSequence, MAX_MESSAGE_SIZE};

    fn split(buf: &mut BytesMut) -> Result<Option<Frame>, Error> {
        Frame::split(buf, MAX_MESSAGE_SIZE)
    }

    /// A header alone, as a hostile or confused peer might send it.
    fn header(len: i32, op: i32) -> BytesMut {
        let mut buf = BytesMut::with_capacity(16);
        buf.extend_from_slice(&message(1, 0, op, &[])[..12]);
        buf.extend_from_slice(&op.to_le_bytes());
        set_i32(&mut buf, 0, len);
        buf
    }

    #[test]
    fn partial_header_is_incomplete() -> TestResult {
        for n in 0..HEADER_LEN {
            let mut buf = BytesMut::from(&PING[..n]);
            assert!(split(&mut buf)?.is_none(), "{n} bytes");
            assert_eq!(buf.len(), n, "nothing consumed");
        }
        Ok(())
    }

    #[test]
    fn partial_body_is_incomplete_and_reserves_the_rest() -> TestResult {
        for n in HEADER_LEN..PING.len() {
            let mut buf = BytesMut::from(&PING[..n]);
            assert!(split(&mut buf)?.is_none(), "{n} bytes");
            assert_eq!(buf.len(), n, "nothing consumed");
            assert!(
                buf.capacity() >= PING.len(),
                "room reserved for the whole frame"
            );
        }
        Ok(())
    }

    #[test]
    fn whole_frame_is_cut_off_the_front() -> TestResult {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&PING);
        buf.extend_from_slice(&PING[..20]);
        let frame = split(&mut buf)?.ok_or("frame")?;
        assert_eq!(frame.bytes[..], PING[..]);
        assert_eq!(frame.header.message_length, 51);
        assert_eq!(frame.header.request_id, 1);
        assert_eq!(buf[..], PING[..20], "the next message's bytes stay");
        assert!(split(&mut buf)?.is_none());
        buf.extend_from_slice(&PING[20..]);
        assert_eq!(split(&mut buf)?.ok_or("second frame")?.bytes[..], PING[..]);
        assert!(buf.is_empty());
        Ok(())
    }

    #[test]
    fn header_only_frame_splits_but_does_not_decode() -> TestResult {
        let mut buf = header(16, 2013);
        let frame = split(&mut buf)?.ok_or("frame")?;
        assert!(buf.is_empty());
        assert!(matches!(
            Message::decode(&frame, MAX_MESSAGE_SIZE),
            Err(Error::Malformed(_))
        ));
        Ok(())
    }

    #[test]
    fn bad_lengths_are_rejected_before_reserving() {
        for len in [15, 4, 0, -1, -16, i32::MIN] {
            let mut buf = header(len, 2013);
            assert_eq!(split(&mut buf).err(), Some(Error::MessageTooSmall(len)));
            assert!(
                buf.capacity() < 1024,
                "capacity {} after length {len}",
                buf.capacity()
            );
        }
        let too_large = i32::try_from(MAX_MESSAGE_SIZE + 1).unwrap_or(i32::MAX);
        for len in [too_large, i32::MAX] {
            let mut buf = header(len, 2013);
            assert_eq!(
                split(&mut buf).err(),
                Some(Error::MessageTooLarge {
                    len: i64::from(len),
                    max: MAX_MESSAGE_SIZE
                })
            );
            assert!(
                buf.capacity() < 1024,
                "capacity {} after length {len}",
                buf.capacity()
            );
        }
        // A caller-chosen limit applies too.
        let mut buf = BytesMut::from(&PING[..]);
        assert_eq!(
            Frame::split(&mut buf, 50).err(),
            Some(Error::MessageTooLarge { len: 51, max: 50 })
        );
    }

    #[test]
    fn unknown_opcodes_are_rejected_before_reserving() {
        // OP_UPDATE (removed in 5.1), OP_COMMAND (removed in 4.2), and nonsense.
        for op in [2001, 2010, 9999, 0, -1] {
            let mut buf = header(1_000_000, op);
            assert_eq!(split(&mut buf).err(), Some(Error::UnknownOpCode(op)));
            assert!(
                buf.capacity() < 1024,
                "capacity {} after opcode {op}",
                buf.capacity()
            );
        }
    }

    #[test]
    fn decoded_message_carries_the_header_ids() -> TestResult {
        let mut buf = BytesMut::from(&PING[..]);
        let frame = split(&mut buf)?.ok_or("frame")?;
        let msg = Message::decode(&frame, MAX_MESSAGE_SIZE)?;
        assert_eq!(msg.request_id, 1);
        assert_eq!(msg.response_to, 0);
        assert_eq!(msg.compressor, None);
        let Body::Msg(op) = msg.body else {
            return Err("not an OP_MSG".into());
        };
        assert_eq!(op.body.as_bytes(), PING_DOC);
        Ok(())
    }

    #[test]
    fn roundtrip_each_opcode() -> TestResult {
        let body = rawdoc! { "ping": 1, "$db": "admin" };
        let msg = Message {
            request_id: 1,
            response_to: 0,
            body: Body::Msg(OpMsg::new(body.clone())),
            compressor: None,
        };
        assert_eq!(roundtrip!(msg.clone())?[..], PING[..]);
        let query = OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: rawdoc! { "isMaster": 1 },
            return_fields_selector: None,
        };
        roundtrip!(Message {
            body: Body::Query(query),
            ..msg.clone()
        })?;
        roundtrip!(Message {
            body: Body::Reply(OpReply::single(body)),
            ..msg
        })?;
        Ok(())
    }

    #[test]
    fn encode_appends_after_existing_bytes() -> TestResult {
        let msg = Message {
            request_id: 1,
            response_to: 0,
            body: Body::Msg(OpMsg::new(rawdoc! { "ping": 1, "$db": "admin" })),
            compressor: None,
        };
        let mut out = BytesMut::from(&b"xyz"[..]);
        msg.encode(None, &mut out)?;
        assert_eq!(out[..3], *b"xyz");
        assert_eq!(out[3..], PING[..]);
        Ok(())
    }

    #[test]
    fn strings_with_nul_are_not_encoded() {
        let msg = Message {
            request_id: 1,
            response_to: 0,
            body: Body::Msg(OpMsg {
                flags: MessageFlags::default(),
                body: rawdoc! { "insert": "c" },
                sequences: vec![DocumentSequence {
                    identifier: "docu\0ments".into(),
                    documents: vec![],
                }],
            }),
            compressor: None,
        };
        let query = OpQuery {
            flags: 0,
            full_collection_name: "admin\0.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: rawdoc! { "isMaster": 1 },
            return_fields_selector: None,
        };
        for msg in [
            msg.clone(),
            Message {
                body: Body::Query(query),
                ..msg
            },
        ] {
            for compressor in [None, Some(Compressor::Zstd)] {
                let mut out = BytesMut::from(&b"xyz"[..]);
                assert!(matches!(
                    msg.encode(compressor, &mut out),
                    Err(Error::Malformed(_))
                ));
                assert_eq!(out[..], *b"xyz", "output untouched on error");
            }
        }
    }
}
