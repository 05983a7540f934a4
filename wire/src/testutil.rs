//! Fixtures and helpers shared by the unit and property tests.

use bytes::BytesMut;

use crate::{Error, Frame, MAX_MESSAGE_SIZE, Message};

/// What every test returns, so that codec errors propagate with `?`.
pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;

/// `{ping: 1, $db: "admin"}`, 30 bytes.
pub(crate) const PING_DOC: [u8; 30] = [
    0x1e, 0x00, 0x00, 0x00, // document length
    0x10, b'p', b'i', b'n', b'g', 0x00, 0x01, 0x00, 0x00, 0x00, // int32 ping: 1
    0x02, b'$', b'd', b'b', 0x00, 0x06, 0x00, 0x00, 0x00, b'a', b'd', b'm', b'i', b'n', 0x00,
    0x00, // end of document
];

/// The `OP_MSG` a driver sends for `db.adminCommand({ping: 1})`, requestID 1.
pub(crate) const PING: [u8; 51] = [
    0x33, 0x00, 0x00, 0x00, // messageLength 51
    0x01, 0x00, 0x00, 0x00, // requestID 1
    0x00, 0x00, 0x00, 0x00, // responseTo 0
    0xdd, 0x07, 0x00, 0x00, // opCode 2013
    0x00, 0x00, 0x00, 0x00, // flagBits
    0x00, // section kind 0
    0x1e, 0x00, 0x00, 0x00, //
    0x10, b'p', b'i', b'n', b'g', 0x00, 0x01, 0x00, 0x00, 0x00, //
    0x02, b'$', b'd', b'b', 0x00, 0x06, 0x00, 0x00, 0x00, b'a', b'd', b'm', b'i', b'n',
    0x00, //
    0x00,
];

/// `{_id: 1}` and `{_id: 2}`, 14 bytes each.
pub(crate) const ID1: [u8; 14] = [
    0x0e, 0x00, 0x00, 0x00, 0x10, b'_', b'i', b'd', 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
];
pub(crate) const ID2: [u8; 14] = [
    0x0e, 0x00, 0x00, 0x00, 0x10, b'_', b'i', b'd', 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
];

/// Prepends a header whose `messageLength` counts the header and `body`.
pub(crate) fn message(request_id: i32, response_to: i32, op_code: i32, body: &[u8]) -> Vec<u8> {
    let len = i32::try_from(16 + body.len()).expect("test message fits an i32");
    let mut out = Vec::with_capacity(16 + body.len());
    for field in [len, request_id, response_to, op_code] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// An `OP_MSG` (requestID 7) with `flags` and the given raw sections, without a checksum.
pub(crate) fn op_msg(flags: u32, sections: &[&[u8]]) -> Vec<u8> {
    let mut body = flags.to_le_bytes().to_vec();
    for section in sections {
        body.extend_from_slice(section);
    }
    message(7, 0, 2013, &body)
}

/// Appends the CRC-32C of `msg` after growing its `messageLength` by the four checksum bytes.
pub(crate) fn with_checksum(mut msg: Vec<u8>) -> Vec<u8> {
    let len = read_i32(&msg, 0) + 4;
    set_i32(&mut msg, 0, len);
    let crc = crc32c::crc32c(&msg);
    msg.extend_from_slice(&crc.to_le_bytes());
    msg
}

/// A kind-0 section.
pub(crate) fn kind0(doc: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(doc);
    out
}

/// A kind-1 section.
pub(crate) fn kind1(identifier: &str, docs: &[&[u8]]) -> Vec<u8> {
    let size = 4 + identifier.len() + 1 + docs.iter().map(|d| d.len()).sum::<usize>();
    let mut out = vec![1];
    out.extend_from_slice(&i32::try_from(size).expect("small section").to_le_bytes());
    out.extend_from_slice(identifier.as_bytes());
    out.push(0);
    for doc in docs {
        out.extend_from_slice(doc);
    }
    out
}

pub(crate) fn read_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

pub(crate) fn set_i32(bytes: &mut [u8], at: usize, value: i32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Splits exactly one frame off `bytes` and decodes it. Panics if the frame is incomplete or
/// bytes are left over: fixtures are whole messages.
pub(crate) fn decode(bytes: &[u8]) -> Result<Message, Error> {
    let mut buf = BytesMut::from(bytes);
    let frame = Frame::split(&mut buf, MAX_MESSAGE_SIZE)?.expect("fixture is a whole frame");
    assert!(buf.is_empty(), "{} bytes left after the frame", buf.len());
    Message::decode(&frame, MAX_MESSAGE_SIZE)
}

/// A document nested `depth` levels below the top: `{a: {a: … {} … }}`, built without
/// recursion. `depth` 0 is the empty document.
pub(crate) fn nested_document(depth: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + 8 * depth);
    for level in 0..depth {
        let len = i32::try_from(5 + 8 * (depth - level)).expect("depth fits an i32");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&[0x03, b'a', 0x00]);
    }
    out.extend_from_slice(&[0x05, 0x00, 0x00, 0x00, 0x00]);
    out.resize(out.len() + depth, 0x00);
    out
}

/// Encodes `$msg` (with `$compressor`, default none), splits the frame off a fresh buffer,
/// checks that nothing is left, decodes it and checks that it equals `$msg` (arrived under
/// `$compressor`). Evaluates to `Result<Bytes, Box<dyn Error>>` holding the encoded frame.
macro_rules! roundtrip {
    ($msg:expr) => {
        $crate::testutil::roundtrip!($msg, None)
    };
    ($msg:expr, $compressor:expr) => {{
        fn check(
            msg: $crate::Message,
            compressor: Option<$crate::Compressor>,
        ) -> Result<::bytes::Bytes, Box<dyn ::std::error::Error>> {
            let mut buf = ::bytes::BytesMut::new();
            msg.encode(compressor, &mut buf)?;
            let frame = $crate::Frame::split(&mut buf, $crate::MAX_MESSAGE_SIZE)?
                .ok_or("encoding is not a whole frame")?;
            assert_eq!(
                ::bytes::Buf::remaining(&buf),
                0,
                "bytes left after the frame"
            );
            let decoded = $crate::Message::decode(&frame, $crate::MAX_MESSAGE_SIZE)?;
            assert_eq!(decoded, $crate::Message { compressor, ..msg });
            Ok(frame.bytes)
        }
        check($msg, $compressor)
    }};
}
pub(crate) use roundtrip;
