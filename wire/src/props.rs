//! Property tests: every message the codec encodes decodes to itself, under every compressor,
//! and no byte string makes `Frame::split` + `Message::decode` panic.

use bson::{Bson, Document, RawDocumentBuf, spec::BinarySubtype};
use bytes::BytesMut;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::testutil::roundtrip;
use crate::{
    Body, Compressor, DocumentSequence, Frame, MAX_MESSAGE_SIZE, Message, MessageFlags, OpMsg,
    OpQuery, OpReply,
};

/// Keys: any text without NUL (a BSON key is a C string), including `$`, `.` and non-ASCII.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-z_$]{0,6}", 1 => "[^\u{0}]{0,8}"]
}

/// One BSON value: the scalar types drivers send, with documents and arrays nested in them.
fn arbitrary_bson() -> impl Strategy<Value = Bson> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        // BSON strings are length-prefixed, so NUL is allowed inside them.
        any::<String>().prop_map(Bson::String),
        (
            prop_oneof![
                Just(BinarySubtype::Generic),
                (0x80u8..=0xff).prop_map(BinarySubtype::UserDefined)
            ],
            prop::collection::vec(any::<u8>(), 0..32)
        )
            .prop_map(|(subtype, bytes)| Bson::Binary(bson::Binary { subtype, bytes })),
        any::<[u8; 12]>().prop_map(|b| Bson::ObjectId(bson::oid::ObjectId::from_bytes(b))),
        any::<i64>().prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Bson::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
        ]
    })
}

/// A document of arbitrary values, as raw BSON.
fn arbitrary_document() -> impl Strategy<Value = RawDocumentBuf> {
    prop::collection::vec((key(), arbitrary_bson()), 0..6).prop_map(|fields| {
        let doc: Document = fields.into_iter().collect();
        RawDocumentBuf::try_from(&doc).expect("keys have no NUL")
    })
}

fn compressor() -> impl Strategy<Value = Option<Compressor>> {
    prop_oneof![
        Just(None),
        Just(Some(Compressor::Noop)),
        Just(Some(Compressor::Snappy)),
        Just(Some(Compressor::Zlib)),
        Just(Some(Compressor::Zstd)),
    ]
}

/// Any combination of the known flags, plus (sometimes) unknown optional high bits, which a
/// receiver must ignore and which therefore survive a roundtrip.
fn flags() -> impl Strategy<Value = MessageFlags> {
    let known = MessageFlags::CHECKSUM_PRESENT
        .with(MessageFlags::MORE_TO_COME)
        .with(MessageFlags::EXHAUST_ALLOWED);
    (
        any::<u32>(),
        prop_oneof![3 => Just(0u32), 1 => any::<u16>().prop_map(|b| u32::from(b) << 16)],
    )
        .prop_map(move |(bits, high)| MessageFlags((bits & known.0) | high))
}

fn op_msg() -> impl Strategy<Value = OpMsg> {
    let sequences = prop::collection::btree_map(
        "[^\u{0}]{0,12}",
        prop::collection::vec(arbitrary_document(), 0..4),
        0..3,
    );
    (flags(), arbitrary_document(), sequences).prop_map(|(flags, body, sequences)| OpMsg {
        flags,
        body,
        sequences: sequences
            .into_iter()
            .map(|(identifier, documents)| DocumentSequence {
                identifier,
                documents,
            })
            .collect(),
    })
}

fn op_query() -> impl Strategy<Value = OpQuery> {
    (
        any::<i32>(),
        "[^\u{0}]{0,20}",
        any::<i32>(),
        any::<i32>(),
        arbitrary_document(),
        proptest::option::of(arbitrary_document()),
    )
        .prop_map(
            |(flags, full_collection_name, number_to_skip, number_to_return, query, fields)| {
                OpQuery {
                    flags,
                    full_collection_name,
                    number_to_skip,
                    number_to_return,
                    query,
                    return_fields_selector: fields,
                }
            },
        )
}

fn op_reply() -> impl Strategy<Value = OpReply> {
    (
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        prop::collection::vec(arbitrary_document(), 0..4),
    )
        .prop_map(
            |(response_flags, cursor_id, starting_from, documents)| OpReply {
                response_flags,
                cursor_id,
                starting_from,
                documents,
            },
        )
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        op_msg().prop_map(Body::Msg),
        op_query().prop_map(Body::Query),
        op_reply().prop_map(Body::Reply),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (any::<i32>(), any::<i32>(), body()).prop_map(|(request_id, response_to, body)| Message {
        request_id,
        response_to,
        body,
        compressor: None,
    })
}

fn fail(e: &dyn std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// Splits every frame off `bytes` and decodes it. Must never panic; whatever decodes must
/// re-encode (under every compressor) to something that decodes to the same message.
fn decode_all(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(bytes);
    while let Ok(Some(frame)) = Frame::split(&mut buf, MAX_MESSAGE_SIZE) {
        let Ok(msg) = Message::decode(&frame, MAX_MESSAGE_SIZE) else {
            continue;
        };
        for compressor in [
            None,
            Some(Compressor::Noop),
            Some(Compressor::Snappy),
            Some(Compressor::Zlib),
            Some(Compressor::Zstd),
        ] {
            roundtrip!(
                Message {
                    compressor: None,
                    ..msg.clone()
                },
                compressor
            )
            .map_err(|e| fail(&*e))?;
        }
    }
    Ok(())
}

/// An edit applied to a valid encoding.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite the byte at (index modulo length).
    Set(usize, u8),
    /// XOR one bit.
    Flip(usize, u8),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Remove a range.
    Remove(usize, usize),
    /// Overwrite four bytes with an interesting integer (a length or count).
    SetI32(usize, i32),
    /// Keep a prefix.
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        any::<i32>(),
        Just(0),
        Just(-1),
        Just(4),
        Just(5),
        Just(16),
        Just(i32::MAX),
        Just(i32::MIN),
        -64..64i32,
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
        (any::<usize>(), interesting).prop_map(|(i, v)| Mutation::SetI32(i, v)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len().max(1);
    match mutation {
        Mutation::Set(i, b) => {
            if let Some(byte) = bytes.get_mut(i % len) {
                *byte = *b;
            }
        }
        Mutation::Flip(i, bit) => {
            if let Some(byte) = bytes.get_mut(i % len) {
                *byte ^= 1 << bit;
            }
        }
        Mutation::Insert(i, new) => {
            let at = i % (bytes.len() + 1);
            bytes.splice(at..at, new.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let at = i % len;
            let end = (at + n).min(bytes.len());
            bytes.drain(at.min(end)..end);
        }
        Mutation::SetI32(i, v) => {
            let at = i % len;
            if let Some(slot) = bytes.get_mut(at..at + 4) {
                slot.copy_from_slice(&v.to_le_bytes());
            }
        }
        Mutation::Truncate(n) => bytes.truncate(n % len),
    }
}

proptest! {
    #[test]
    fn op_msg_roundtrips(msg in op_msg(), compressor in compressor(), id in any::<i32>()) {
        let msg = Message { request_id: id, response_to: 0, body: Body::Msg(msg), compressor: None };
        roundtrip!(msg, compressor).map_err(|e| fail(&*e))?;
    }

    #[test]
    fn op_query_roundtrips(query in op_query(), compressor in compressor()) {
        let msg = Message { request_id: 1, response_to: 0, body: Body::Query(query), compressor: None };
        roundtrip!(msg, compressor).map_err(|e| fail(&*e))?;
    }

    #[test]
    fn op_reply_roundtrips(reply in op_reply(), compressor in compressor(), to in any::<i32>()) {
        let msg = Message { request_id: 2, response_to: to, body: Body::Reply(reply), compressor: None };
        roundtrip!(msg, compressor).map_err(|e| fail(&*e))?;
    }

    /// Bytes arriving in pieces: every strict prefix is incomplete and consumes nothing, and
    /// the whole yields exactly the frame.
    #[test]
    fn split_waits_for_the_whole_frame(msg in message(), compressor in compressor(), cut in any::<usize>()) {
        let mut encoded = BytesMut::new();
        msg.encode(compressor, &mut encoded).map_err(|e| fail(&e))?;
        let cut = cut % encoded.len();
        let mut buf = BytesMut::from(&encoded[..cut]);
        prop_assert!(Frame::split(&mut buf, MAX_MESSAGE_SIZE).map_err(|e| fail(&e))?.is_none());
        prop_assert_eq!(buf.len(), cut);
        buf.extend_from_slice(&encoded[cut..]);
        let frame = Frame::split(&mut buf, MAX_MESSAGE_SIZE).map_err(|e| fail(&e))?;
        prop_assert_eq!(frame.map(|f| f.bytes), Some(encoded.freeze()));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn decode_never_panics_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes)?;
    }

    /// Random bytes rarely get past the header; a plausible header in front of them reaches
    /// the body parsers.
    #[test]
    fn decode_never_panics_on_random_bodies(
        op in prop_oneof![Just(1i32), Just(2004), Just(2012), Just(2013)],
        body in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        decode_all(&crate::testutil::message(1, 0, op, &body))?;
    }

    #[test]
    fn decode_never_panics_on_mutated_messages(
        msg in message(),
        compressor in compressor(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut encoded = BytesMut::new();
        msg.encode(compressor, &mut encoded).map_err(|e| fail(&e))?;
        let mut bytes = encoded.to_vec();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        decode_all(&bytes)?;
    }
}

/// Every BSON type, the deprecated and rare ones included, for the validator's comparison.
fn every_type() -> impl Strategy<Value = Bson> {
    let rare = prop_oneof![
        "[a-z.*]{0,6}".prop_map(|p| Bson::RegularExpression(bson::Regex {
            pattern: p.try_into().expect("no NUL"),
            options: "im".try_into().expect("no NUL"),
        })),
        any::<String>().prop_map(Bson::JavaScriptCode),
        (any::<String>(), "[a-z]{0,4}").prop_map(|(code, k)| {
            Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code,
                scope: bson::doc! { k: { "x": [1, "y"] } },
            })
        }),
        any::<String>().prop_map(Bson::Symbol),
        any::<[u8; 16]>().prop_map(|b| Bson::Decimal128(bson::Decimal128::from_bytes(b))),
        (any::<u32>(), any::<u32>())
            .prop_map(|(time, increment)| Bson::Timestamp(bson::Timestamp { time, increment })),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
        Just(Bson::Undefined),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(|bytes| Bson::Binary(bson::Binary {
            subtype: BinarySubtype::BinaryOld,
            bytes,
        })),
    ];
    prop_oneof![3 => arbitrary_bson(), 2 => rare]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The one-pass validator accepts exactly what reading every element with the `bson`
    /// crate accepts, on valid documents of every type and on mutated ones (the root's length
    /// and terminator repaired half the time, so that mutations inside reach the elements).
    #[test]
    fn validate_agrees_with_the_bson_crate(
        fields in prop::collection::vec((key(), every_type()), 0..8),
        mutations in prop::collection::vec(mutation(), 0..4),
        repair in any::<bool>(),
    ) {
        let doc: Document = fields.into_iter().collect();
        let mut bytes = RawDocumentBuf::try_from(&doc).map_err(|e| fail(&e))?.into_bytes();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if repair && bytes.len() >= 5 {
            let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX).to_le_bytes();
            bytes[..4].copy_from_slice(&len);
            if let Some(last) = bytes.last_mut() {
                *last = 0;
            }
        }
        if let Ok(raw) = bson::RawDocument::from_bytes(&bytes) {
            let fast = crate::validate(raw);
            let reference = crate::validate_with_bson_crate(raw);
            prop_assert_eq!(
                fast.is_ok(),
                reference.is_ok(),
                "fast {:?}, bson crate {:?}, bytes {:?}",
                fast,
                reference,
                bytes
            );
        }
    }
}
