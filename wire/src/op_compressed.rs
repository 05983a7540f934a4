//! `OP_COMPRESSED` (opcode 2012), per the wire compression specification: compressor ids
//! 0 noop, 1 snappy, 2 zlib, 3 zstd.

use std::io::{Read, Write};

use crate::Error;

/// A compressor both sides know by name (`hello.compression`) and by id (`OP_COMPRESSED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// id 0: the message is carried as is.
    Noop,
    /// id 1: Snappy raw format.
    Snappy,
    /// id 2: zlib (RFC 1950).
    Zlib,
    /// id 3: Zstandard.
    Zstd,
}

impl Compressor {
    /// The compressors Ebb negotiates, in its order of preference.
    pub const NEGOTIABLE: [Compressor; 3] =
        [Compressor::Zstd, Compressor::Snappy, Compressor::Zlib];

    /// The `OP_COMPRESSED` `compressorId`.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// Maps a `compressorId` to a compressor.
    pub fn from_id(id: u8) -> Result<Self, Error> {
        match id {
            0 => Ok(Compressor::Noop),
            1 => Ok(Compressor::Snappy),
            2 => Ok(Compressor::Zlib),
            3 => Ok(Compressor::Zstd),
            other => Err(Error::UnknownCompressor(other)),
        }
    }

    /// The name used in `hello`'s `compression` list.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// Maps a `compression` list entry to a compressor.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "noop" => Some(Compressor::Noop),
            "snappy" => Some(Compressor::Snappy),
            "zlib" => Some(Compressor::Zlib),
            "zstd" => Some(Compressor::Zstd),
            _ => None,
        }
    }

    /// Compresses `input`.
    pub fn compress(self, input: &[u8]) -> Result<Vec<u8>, Error> {
        let fail = |e: &dyn std::fmt::Display| Error::Compression(e.to_string());
        match self {
            Compressor::Noop => Ok(input.to_vec()),
            Compressor::Snappy => snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(|e| fail(&e)),
            Compressor::Zlib => {
                let mut enc = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(input.len() / 2),
                    flate2::Compression::default(),
                );
                enc.write_all(input).map_err(|e| fail(&e))?;
                enc.finish().map_err(|e| fail(&e))
            }
            Compressor::Zstd => zstd::bulk::compress(input, 0).map_err(|e| fail(&e)),
        }
    }

    /// Decompresses `input`, which must expand to exactly `size` bytes. `size` was checked
    /// against the message limit by the caller, so at most `size` bytes are ever allocated.
    pub fn decompress(self, input: &[u8], size: usize) -> Result<Vec<u8>, Error> {
        let fail = |e: &dyn std::fmt::Display| Error::Decompression(e.to_string());
        let out = match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => {
                let len = snap::raw::decompress_len(input).map_err(|e| fail(&e))?;
                if len != size {
                    return Err(Error::Decompression(format!(
                        "snappy block holds {len} bytes, {size} announced"
                    )));
                }
                let mut out = vec![0; size];
                snap::raw::Decoder::new()
                    .decompress(input, &mut out)
                    .map_err(|e| fail(&e))?;
                out
            }
            Compressor::Zlib => {
                let mut out = Vec::with_capacity(size);
                // One byte more than announced is read so that an oversized stream is caught.
                flate2::read::ZlibDecoder::new(input)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| fail(&e))?;
                out
            }
            Compressor::Zstd => zstd::bulk::decompress(input, size).map_err(|e| fail(&e))?,
        };
        if out.len() != size {
            return Err(Error::Decompression(format!(
                "expanded to {} bytes, {size} announced",
                out.len()
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;
    use bytes::BytesMut;

    use super::*;
    use crate::testutil::{
        PING, PING_DOC, TestResult, decode, message, read_i32, roundtrip, set_i32,
    };
    use crate::{Body, DocumentSequence, Frame, MAX_MESSAGE_SIZE, Message, MessageFlags, OpMsg};

    const ALL: [Compressor; 4] = [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ];

    /// [`PING`] wrapped in `OP_COMPRESSED` with the noop compressor.
    const NOOP_PING: [u8; 60] = [
        0x3c, 0x00, 0x00, 0x00, // messageLength 60
        0x01, 0x00, 0x00, 0x00, // requestID 1
        0x00, 0x00, 0x00, 0x00, // responseTo 0
        0xdc, 0x07, 0x00, 0x00, // opCode 2012
        0xdd, 0x07, 0x00, 0x00, // originalOpcode 2013
        0x23, 0x00, 0x00, 0x00, // uncompressedSize 35
        0x00, // compressorId noop
        0x00, 0x00, 0x00, 0x00, 0x00, // flagBits, section kind 0
        0x1e, 0x00, 0x00, 0x00, //
        0x10, b'p', b'i', b'n', b'g', 0x00, 0x01, 0x00, 0x00, 0x00, //
        0x02, b'$', b'd', b'b', 0x00, 0x06, 0x00, 0x00, 0x00, b'a', b'd', b'm', b'i', b'n',
        0x00, //
        0x00,
    ];

    /// Offsets in an `OP_COMPRESSED` message.
    const ORIGINAL_OPCODE: usize = 16;
    const UNCOMPRESSED_SIZE: usize = 20;
    const COMPRESSOR_ID: usize = 24;
    const PAYLOAD: usize = 25;

    fn ping() -> Message {
        Message {
            request_id: 1,
            response_to: 0,
            body: Body::Msg(OpMsg::new(rawdoc! { "ping": 1, "$db": "admin" })),
            compressor: None,
        }
    }

    /// A message big and repetitive enough that every real compressor shrinks it.
    fn insert(flags: MessageFlags) -> Message {
        let documents = (0..50)
            .map(|i| rawdoc! { "_id": i, "name": "a fairly repetitive name" })
            .collect();
        Message {
            request_id: 42,
            response_to: 0,
            body: Body::Msg(OpMsg {
                flags,
                body: rawdoc! { "insert": "people", "$db": "test", "ordered": true },
                sequences: vec![DocumentSequence {
                    identifier: "documents".into(),
                    documents,
                }],
            }),
            compressor: None,
        }
    }

    fn encoded(msg: &Message, compressor: Compressor) -> Result<Vec<u8>, Error> {
        let mut out = BytesMut::new();
        msg.encode(Some(compressor), &mut out)?;
        Ok(out.to_vec())
    }

    #[test]
    fn noop_fixture_decodes() -> TestResult {
        let msg = decode(&NOOP_PING)?;
        assert_eq!(
            msg,
            Message {
                compressor: Some(Compressor::Noop),
                ..ping()
            }
        );
        assert_eq!(encoded(&ping(), Compressor::Noop)?, NOOP_PING);
        assert_eq!(NOOP_PING[PAYLOAD..], PING[16..]);
        Ok(())
    }

    #[test]
    fn every_compressor_roundtrips() -> TestResult {
        for compressor in ALL {
            roundtrip!(ping(), Some(compressor))?;
            let frame = roundtrip!(insert(MessageFlags::default()), Some(compressor))?;
            assert_eq!(read_i32(&frame, 12), 2012);
            assert_eq!(read_i32(&frame, ORIGINAL_OPCODE), 2013);
            assert_eq!(frame[COMPRESSOR_ID], compressor.id());
            if compressor != Compressor::Noop {
                let plain = roundtrip!(insert(MessageFlags::default()))?;
                assert!(frame.len() < plain.len(), "{compressor:?} did not compress");
            }
        }
        Ok(())
    }

    #[test]
    fn checksum_under_compression_covers_the_uncompressed_message() -> TestResult {
        let msg = insert(MessageFlags::CHECKSUM_PRESENT);
        let plain = roundtrip!(msg.clone())?;
        for compressor in ALL {
            let frame = roundtrip!(msg.clone(), Some(compressor))?;
            // The checksum inside the envelope is the one of the plain encoding.
            let inner = compressor.decompress(
                &frame[PAYLOAD..],
                usize::try_from(read_i32(&frame, UNCOMPRESSED_SIZE))?,
            )?;
            assert_eq!(inner[..], plain[16..]);
        }
        // A wrong checksum inside the envelope is caught after decompression.
        let mut bytes = NOOP_PING.to_vec();
        bytes[PAYLOAD] = 1; // checksumPresent; the last four bytes now act as a (wrong) checksum
        assert!(matches!(
            decode(&bytes),
            Err(Error::ChecksumMismatch { .. })
        ));
        Ok(())
    }

    #[test]
    fn uncompressed_size_lies() -> TestResult {
        for compressor in ALL {
            let bytes = encoded(&insert(MessageFlags::default()), compressor)?;
            let actual = read_i32(&bytes, UNCOMPRESSED_SIZE);
            for lie in [actual - 1, actual + 1, actual / 2, actual * 2, 0] {
                let mut bytes = bytes.clone();
                set_i32(&mut bytes, UNCOMPRESSED_SIZE, lie);
                assert!(
                    matches!(decode(&bytes), Err(Error::Decompression(_))),
                    "{compressor:?} announcing {lie} instead of {actual}: {:?}",
                    decode(&bytes)
                );
            }
        }
        Ok(())
    }

    #[test]
    fn uncompressed_size_above_the_limit() -> TestResult {
        for compressor in ALL {
            let mut bytes = encoded(&ping(), compressor)?;
            set_i32(&mut bytes, UNCOMPRESSED_SIZE, i32::MAX);
            assert_eq!(
                decode(&bytes),
                Err(Error::MessageTooLarge {
                    len: i64::from(i32::MAX) + 16,
                    max: MAX_MESSAGE_SIZE
                })
            );
            // The limit is the caller's, and counts the header the message would have.
            let bytes = encoded(&ping(), compressor)?;
            let mut buf = BytesMut::from(&bytes[..]);
            let frame = Frame::split(&mut buf, MAX_MESSAGE_SIZE)?.ok_or("frame")?;
            assert_eq!(
                Message::decode(&frame, 16 + 34),
                Err(Error::MessageTooLarge { len: 51, max: 50 })
            );
            assert!(Message::decode(&frame, 16 + 35).is_ok());
        }
        Ok(())
    }

    #[test]
    fn negative_uncompressed_size() {
        let mut bytes = NOOP_PING;
        set_i32(&mut bytes, UNCOMPRESSED_SIZE, -1);
        assert!(matches!(decode(&bytes), Err(Error::Malformed(_))));
    }

    #[test]
    fn unknown_compressor_id() {
        for id in [4, 0x7f, 0xff] {
            let mut bytes = NOOP_PING;
            bytes[COMPRESSOR_ID] = id;
            assert_eq!(decode(&bytes), Err(Error::UnknownCompressor(id)));
        }
    }

    #[test]
    fn nested_or_unknown_original_opcode() {
        let mut bytes = NOOP_PING;
        set_i32(&mut bytes, ORIGINAL_OPCODE, 2012);
        assert!(matches!(decode(&bytes), Err(Error::Malformed(_))));
        // A whole OP_COMPRESSED inside one.
        let inner = NOOP_PING;
        let mut body = Vec::new();
        body.extend_from_slice(&2012_i32.to_le_bytes());
        body.extend_from_slice(&i32::try_from(inner.len() - 16).unwrap_or(0).to_le_bytes());
        body.push(0);
        body.extend_from_slice(&inner[16..]);
        assert!(decode(&message(1, 0, 2012, &body)).is_err());
        for op in [2001, 2010, 0] {
            let mut bytes = NOOP_PING;
            set_i32(&mut bytes, ORIGINAL_OPCODE, op);
            assert_eq!(decode(&bytes), Err(Error::UnknownOpCode(op)));
        }
    }

    #[test]
    fn garbage_payload() {
        let garbage = [0xff, 0xfe, 0x00, 0x13, 0x37, 0xca, 0xfe, 0xba, 0xbe, 0x01];
        for compressor in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let mut body = 2013_i32.to_le_bytes().to_vec();
            body.extend_from_slice(&35_i32.to_le_bytes());
            body.push(compressor.id());
            body.extend_from_slice(&garbage);
            let result = decode(&message(1, 0, 2012, &body));
            assert!(
                matches!(result, Err(Error::Decompression(_))),
                "{compressor:?}: {result:?}"
            );
        }
    }

    #[test]
    fn truncated_payload() -> TestResult {
        for compressor in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let bytes = encoded(&insert(MessageFlags::default()), compressor)?;
            let cut = &bytes[16..bytes.len() - 3];
            let result = decode(&message(42, 0, 2012, cut));
            assert!(
                matches!(result, Err(Error::Decompression(_))),
                "{compressor:?}: {result:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn truncated_envelope() {
        for n in 0..PAYLOAD - 16 {
            let result = decode(&message(1, 0, 2012, &NOOP_PING[16..16 + n]));
            assert!(
                matches!(result, Err(Error::Malformed(_))),
                "{n} bytes: {result:?}"
            );
        }
        // An empty payload announcing nothing reaches the OP_MSG parser, which wants flags.
        let result = decode(&message(1, 0, 2012, &[0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0]));
        assert!(matches!(result, Err(Error::Malformed(_))), "{result:?}");
    }

    #[test]
    fn errors_inside_the_envelope_are_the_inner_ones() {
        let mut bytes = NOOP_PING;
        bytes[29] = 1; // section kind 1 where the body was
        assert!(decode(&bytes).is_err());
        let mut bytes = NOOP_PING.to_vec();
        bytes[PAYLOAD + 4] = 2;
        assert_eq!(decode(&bytes), Err(Error::UnknownPayloadType(2)));
        let mut bytes = NOOP_PING.to_vec();
        bytes[PAYLOAD] = 4;
        assert_eq!(decode(&bytes), Err(Error::IllegalOpMsgFlag(4)));
    }

    #[test]
    fn ids_and_names() {
        for compressor in ALL {
            assert_eq!(Compressor::from_id(compressor.id()), Ok(compressor));
            assert_eq!(Compressor::from_name(compressor.name()), Some(compressor));
        }
        assert_eq!(Compressor::from_name("lz4"), None);
        assert_eq!(Compressor::from_name("ZSTD"), None);
        assert!(!Compressor::NEGOTIABLE.contains(&Compressor::Noop));
    }

    #[test]
    fn compress_then_decompress() -> TestResult {
        let input = PING_DOC.repeat(100);
        for compressor in ALL {
            let packed = compressor.compress(&input)?;
            assert_eq!(compressor.decompress(&packed, input.len())?, input);
            assert!(compressor.decompress(&packed, input.len() + 1).is_err());
            assert!(compressor.decompress(&packed, input.len() - 1).is_err());
            let empty = compressor.compress(&[])?;
            assert_eq!(compressor.decompress(&empty, 0)?, Vec::<u8>::new());
        }
        Ok(())
    }
}
