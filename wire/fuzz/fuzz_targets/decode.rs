//! Whatever bytes arrive, `Frame::split` + `Message::decode` must not panic or over-allocate,
//! and every message that decodes must survive a re-encoding, plain and under each compressor.
//! Taken as one BSON document, the same bytes must get the same verdict from the one-pass
//! validator and from the `bson` crate's own accessors.

#![no_main]

use bytes::BytesMut;
use ebb_wire::{Compressor, Frame, MAX_MESSAGE_SIZE, Message};
use libfuzzer_sys::fuzz_target;

const ENCODINGS: [Option<Compressor>; 5] = [
    None,
    Some(Compressor::Noop),
    Some(Compressor::Snappy),
    Some(Compressor::Zlib),
    Some(Compressor::Zstd),
];

fuzz_target!(|data: &[u8]| {
    // The one-pass BSON validator accepts exactly what the bson crate's accessors accept.
    assert!(
        ebb_wire::validators_agree(data),
        "the validators disagree on {data:?}"
    );
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = Frame::split(&mut buf, MAX_MESSAGE_SIZE) {
        let Ok(msg) = Message::decode(&frame, MAX_MESSAGE_SIZE) else {
            continue;
        };
        for compressor in ENCODINGS {
            let mut out = BytesMut::new();
            msg.encode(compressor, &mut out)
                .expect("a decoded message re-encodes");
            // A noop envelope adds 9 bytes to a message that may have been at the limit.
            let limit = MAX_MESSAGE_SIZE + 64;
            let again = Frame::split(&mut out, limit)
                .expect("the re-encoding frames")
                .expect("the re-encoding is one whole frame");
            assert!(out.is_empty(), "bytes left after the re-encoded frame");
            let decoded = Message::decode(&again, limit).expect("the re-encoding decodes");
            assert_eq!(
                decoded,
                Message {
                    compressor,
                    ..msg.clone()
                }
            );
        }
    }
});
