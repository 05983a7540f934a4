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
    /// OP_MSG.
    Msg(OpMsg),
    /// OP_QUERY.
    Query(OpQuery),
    /// OP_REPLY.
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
    /// The compressor of the OP_COMPRESSED envelope it came in, if it came in one.
    pub compressor: Option<Compressor>,
}

impl Message {
    /// Parses a frame produced by [`Frame::split`]. `max` bounds the uncompressed size of an
    /// OP_COMPRESSED message.
    pub fn decode(frame: &Frame, max: usize) -> Result<Message, Error> {
        let header = frame.header;
        let op = OpCode::from_i32(header.op_code)?;
        let (body, compressor) = if op == OpCode::Compressed {
            let input = frame.bytes.get(HEADER_LEN..).ok_or(Error::Malformed("OP_COMPRESSED"))?;
            let (input, original) =
                le_i32::<_, NomErr<'_>>(input).map_err(malformed("originalOpcode"))?;
            let (input, size) =
                le_i32::<_, NomErr<'_>>(input).map_err(malformed("uncompressedSize"))?;
            let (input, id) = le_u8::<_, NomErr<'_>>(input).map_err(malformed("compressorId"))?;
            let original = OpCode::from_i32(original)?;
            if original == OpCode::Compressed {
                return Err(Error::Malformed("OP_COMPRESSED inside OP_COMPRESSED"));
            }
            let size = usize::try_from(size)
                .map_err(|_| Error::Malformed("negative uncompressedSize"))?;
            if size > max.saturating_sub(HEADER_LEN) {
                return Err(Error::MessageTooLarge { len: size as i64 + 16, max });
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
        Ok(Message { request_id: header.request_id, response_to: header.response_to, body, compressor })
    }

    /// Appends the encoded message to `out`, wrapped in OP_COMPRESSED when `compressor` is
    /// given. An OP_MSG whose flags carry `checksumPresent` gets its CRC-32C, computed over the
    /// uncompressed message as the specification requires.
    pub fn encode(&self, compressor: Option<Compressor>, out: &mut BytesMut) -> Result<(), Error> {
        let header = |len: usize, op: OpCode| -> Result<MsgHeader, Error> {
            Ok(MsgHeader {
                message_length: i32::try_from(len)
                    .map_err(|_| Error::MessageTooLarge { len: len as i64, max: i32::MAX as usize })?,
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
                    i32::try_from(plain.len()).map_err(|_| Error::Malformed("message too large"))?,
                );
                out.put_u8(compressor.id());
                out.put_slice(&compressed);
            }
        }
        Ok(())
    }
}

fn parse_body(op: OpCode, whole: &[u8]) -> Result<Body, Error> {
    let rest = whole.get(HEADER_LEN..).ok_or(Error::Malformed("message shorter than header"))?;
    match op {
        OpCode::Msg => Ok(Body::Msg(OpMsg::parse(whole, HEADER_LEN)?)),
        OpCode::Query => Ok(Body::Query(OpQuery::parse(rest)?)),
        OpCode::Reply => Ok(Body::Reply(OpReply::parse(rest)?)),
        OpCode::Compressed => Err(Error::Malformed("OP_COMPRESSED inside OP_COMPRESSED")),
    }
}
