//! The wire protocol byte by byte: what drivers never send (OP_QUERY, `moreToCome`, hand-made
//! checksums and compression envelopes) and malformed input, which must close only the
//! offending connection or be answered with an error, never disturb anyone else.

mod common;

use bson::{Document, doc};
use common::{
    CHECKSUM_PRESENT, MAX_MESSAGE_SIZE, MORE_TO_COME, NOOP, OP_COMPRESSED, OP_MSG, OP_REPLY,
    QUERY_FAILURE, RawConn, SNAPPY, TestResult, TestServer, ZLIB, ZSTD, assert_error, bson_bytes,
    crc32c, frame, header, is_ok, kind0, kind1, number, op_compressed, op_compressed_raw, op_msg,
    op_msg_sections, op_query,
};

const COMPRESSORS: [(u8, &str); 3] = [(SNAPPY, "snappy"), (ZLIB, "zlib"), (ZSTD, "zstd")];

fn ping_doc() -> Document {
    doc! { "ping": 1, "$db": "admin" }
}

#[test]
fn crc32c_helper_matches_the_check_value() {
    // The standard check value of CRC-32C (RFC 3720, appendix B.4).
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c(&[0; 32]), 0x8A91_36AA);
}

// ---------------------------------------------------------------------------------------------
// OP_QUERY
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn op_query_is_master_handshake_gets_an_op_reply() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let query = doc! {
        "isMaster": 1,
        "client": { "driver": { "name": "raw", "version": "0" }, "os": { "type": "Linux" } },
    };
    let reply = conn
        .round_trip(4242, &op_query(4242, 0, "admin.$cmd", -1, &query))
        .await?;
    assert_eq!(reply.header.op_code, OP_REPLY);
    assert_eq!(reply.op_code, OP_REPLY);
    assert_eq!(reply.header.response_to, 4242);
    assert_eq!(reply.compressor_id, None);
    assert_eq!(reply.flags & QUERY_FAILURE, 0, "flags {:#x}", reply.flags);
    assert_eq!(reply.cursor_id, 0);
    assert_eq!(reply.documents.len(), 1);
    let body = &reply.body;
    assert!(body.get_bool("ismaster")?, "{body}");
    assert_eq!(body.get_i32("maxWireVersion")?, 21);
    assert_eq!(body.get_i32("maxMessageSizeBytes")?, MAX_MESSAGE_SIZE);
    assert!(is_ok(body), "{body}");

    // The connection goes on in OP_MSG, as drivers do after a legacy handshake.
    conn.ping().await?;

    // `hello` through OP_QUERY, on another database's `$cmd`.
    let mut conn = server.raw().await?;
    let reply = conn
        .round_trip(7, &op_query(7, 0, "test.$cmd", 1, &doc! { "hello": 1 }))
        .await?;
    assert_eq!(reply.op_code, OP_REPLY);
    assert!(reply.body.get_bool("isWritablePrimary")?, "{}", reply.body);
    Ok(())
}

#[tokio::test]
async fn op_query_with_wrapped_query() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let query = doc! {
        "$query": { "isMaster": 1 },
        "$readPreference": { "mode": "secondaryPreferred" },
    };
    let reply = conn
        .round_trip(11, &op_query(11, 0, "admin.$cmd", -1, &query))
        .await?;
    assert_eq!(reply.op_code, OP_REPLY);
    assert!(reply.body.get_bool("ismaster")?, "{}", reply.body);
    assert!(is_ok(&reply.body));
    Ok(())
}

#[tokio::test]
async fn op_query_for_another_command_is_unsupported() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    for command in [
        doc! { "ping": 1 },
        doc! { "find": "c" },
        doc! { "$query": { "buildInfo": 1 } },
    ] {
        let id = conn.next_request_id();
        let reply = conn
            .round_trip(id, &op_query(id, 0, "admin.$cmd", -1, &command))
            .await?;
        assert_eq!(reply.op_code, OP_REPLY, "{command}");
        assert_error(&reply.body, 352, "UnsupportedOpQueryCommand");
        // The connection stays usable.
        conn.ping().await?;
    }
    Ok(())
}

#[tokio::test]
async fn op_query_on_a_collection_is_a_query_failure() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let reply = conn
        .round_trip(5, &op_query(5, 0, "test.coll", 0, &doc! { "x": 1 }))
        .await?;
    assert_eq!(reply.op_code, OP_REPLY);
    assert_eq!(reply.header.response_to, 5);
    assert_ne!(reply.flags & QUERY_FAILURE, 0, "flags {:#x}", reply.flags);
    assert_eq!(reply.cursor_id, 0);
    assert!(
        reply.body.get_str("$err").is_ok_and(|e| !e.is_empty()),
        "{}",
        reply.body
    );
    assert!(reply.body.get_i32("code").is_ok(), "{}", reply.body);
    conn.ping().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// OP_MSG variants
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn checksummed_ping_gets_a_checksummed_reply() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let request = op_msg(21, CHECKSUM_PRESENT, &ping_doc());
    let reply = conn.round_trip(21, &request).await?;
    assert_eq!(reply.op_code, OP_MSG);
    assert_ne!(
        reply.flags & CHECKSUM_PRESENT,
        0,
        "flags {:#x}",
        reply.flags
    );
    // `parse_message` verified it against the reply's bytes.
    assert!(reply.checksum.is_some());
    assert!(is_ok(&reply.body), "{}", reply.body);
    // A plain request on the same connection gets a plain reply.
    let reply = conn.round_trip(22, &op_msg(22, 0, &ping_doc())).await?;
    assert_eq!(reply.flags & CHECKSUM_PRESENT, 0);
    assert_eq!(reply.checksum, None);
    Ok(())
}

#[tokio::test]
async fn kind1_sequence_is_accepted() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let docs = [doc! { "_id": 1 }, doc! { "_id": 2, "a": "b" }];
    let body = kind0(&bson_bytes(&ping_doc()));
    let sequence = kind1("documents", &docs);
    // The sequence after the body, before it, and with a checksum.
    for (id, flags, sections) in [
        (31, 0, vec![body.clone(), sequence.clone()]),
        (32, 0, vec![sequence.clone(), body.clone()]),
        (33, CHECKSUM_PRESENT, vec![body.clone(), sequence.clone()]),
        (
            34,
            0,
            vec![body.clone(), kind1("documents", &[]), kind1("other", &docs)],
        ),
    ] {
        let reply = conn
            .round_trip(id, &op_msg_sections(id, flags, &sections))
            .await?;
        assert!(is_ok(&reply.body), "request {id}: {}", reply.body);
    }
    Ok(())
}

#[tokio::test]
async fn more_to_come_gets_no_reply() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    // Replies come in request order on one connection, so if the first ping were answered its
    // reply would be read before the second's.
    conn.send_raw(&op_msg(10, MORE_TO_COME, &ping_doc()))
        .await?;
    let reply = conn.round_trip(11, &op_msg(11, 0, &ping_doc())).await?;
    assert!(is_ok(&reply.body));

    // An error is not answered either.
    let bad = doc! { "frobnicate": 1, "$db": "admin" };
    conn.send_raw(&op_msg(12, MORE_TO_COME, &bad)).await?;
    let missing_db = doc! { "ping": 1 };
    conn.send_raw(&op_msg(13, MORE_TO_COME, &missing_db))
        .await?;
    let reply = conn.round_trip(14, &op_msg(14, 0, &ping_doc())).await?;
    assert!(is_ok(&reply.body));
    Ok(())
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let mut bytes = Vec::new();
    for id in 1..=5 {
        bytes.extend(op_msg(id, 0, &ping_doc()));
    }
    conn.send_raw(&bytes).await?;
    for id in 1..=5 {
        let reply = conn.read_reply().await?;
        assert_eq!(reply.header.response_to, id);
        assert!(is_ok(&reply.body));
    }
    Ok(())
}

#[tokio::test]
async fn a_request_sent_byte_by_byte_is_reassembled() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let request = op_msg(9, 0, &ping_doc());
    for byte in &request {
        conn.send_raw(std::slice::from_ref(byte)).await?;
    }
    let reply = conn.read_reply().await?;
    assert_eq!(reply.header.response_to, 9);
    assert!(is_ok(&reply.body));
    Ok(())
}

#[tokio::test]
async fn a_large_request_is_answered() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let body = doc! { "ping": 1, "comment": "x".repeat(4 * 1024 * 1024), "$db": "admin" };
    let reply = conn.round_trip(3, &op_msg(3, 0, &body)).await?;
    assert!(is_ok(&reply.body), "{}", reply.body);
    conn.ping().await?;
    Ok(())
}

#[tokio::test]
async fn whatsmyuri_is_the_clients_address() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let reply = conn.command("test", doc! { "whatsmyuri": 1 }).await?;
    assert_eq!(reply.get_str("you")?, conn.local_addr()?.to_string());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// OP_COMPRESSED
// ---------------------------------------------------------------------------------------------

/// Negotiates `name` with an uncompressed `hello`, as drivers do.
async fn negotiate(conn: &mut RawConn, name: &str) -> TestResult {
    let hello = conn
        .command("admin", doc! { "hello": 1, "compression": [name] })
        .await?;
    let list = hello.get_array("compression")?;
    assert_eq!(list, &vec![bson::Bson::String(name.into())], "{hello}");
    Ok(())
}

#[tokio::test]
async fn compressed_ping_is_answered_with_the_same_compressor() -> TestResult {
    let server = TestServer::start().await?;
    for (id, name) in COMPRESSORS {
        let mut conn = server.raw().await?;
        negotiate(&mut conn, name).await?;
        for (request_id, flags) in [(41, 0), (42, CHECKSUM_PRESENT)] {
            let request = op_compressed(&op_msg(request_id, flags, &ping_doc()), id);
            let reply = conn.round_trip(request_id, &request).await?;
            assert_eq!(reply.header.op_code, OP_COMPRESSED, "{name}");
            assert_eq!(reply.compressor_id, Some(id), "{name}");
            assert_eq!(reply.op_code, OP_MSG, "{name}");
            assert!(is_ok(&reply.body), "{name}: {}", reply.body);
            assert_eq!(
                reply.checksum.is_some(),
                flags & CHECKSUM_PRESENT != 0,
                "{name} flags {flags}"
            );
        }
        // An uncompressed request on the same connection is still understood.
        conn.ping().await?;
    }
    Ok(())
}

#[tokio::test]
async fn noop_compressed_ping_is_answered() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let request = op_compressed(&op_msg(51, 0, &ping_doc()), NOOP);
    let reply = conn.round_trip(51, &request).await?;
    assert_eq!(reply.op_code, OP_MSG);
    assert!(is_ok(&reply.body), "{}", reply.body);
    Ok(())
}

#[tokio::test]
async fn compressed_op_query_handshake_is_answered() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let query = op_query(61, 0, "admin.$cmd", -1, &doc! { "isMaster": 1 });
    let reply = conn.round_trip(61, &op_compressed(&query, ZLIB)).await?;
    assert_eq!(reply.op_code, OP_REPLY);
    assert!(reply.body.get_bool("ismaster")?, "{}", reply.body);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------------------------

/// A server with one healthy connection open beside the one that misbehaves.
struct Bystander {
    server: TestServer,
    conn: RawConn,
}

impl Bystander {
    async fn start() -> TestResult<Bystander> {
        let server = TestServer::start().await?;
        let mut conn = server.raw().await?;
        conn.ping().await?;
        Ok(Bystander { server, conn })
    }

    /// The server still serves the connection opened before, and a new one.
    async fn check_unharmed(&mut self, what: &str) -> TestResult {
        self.conn
            .ping()
            .await
            .map_err(|e| format!("after {what}: open connection: {e}"))?;
        let mut fresh = self.server.raw().await?;
        fresh
            .ping()
            .await
            .map_err(|e| format!("after {what}: new connection: {e}"))?;
        Ok(())
    }

    /// Sends `bytes` on a connection of their own and expects the server to close it.
    async fn expect_close(&mut self, what: &str, bytes: &[u8]) -> TestResult {
        let mut victim = self.server.raw().await?;
        victim.send_raw(bytes).await?;
        victim
            .expect_closed()
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        self.check_unharmed(what).await
    }

    /// Sends `bytes` (request id `id`) on a connection of their own and expects an error reply
    /// with `code`, after which that connection still works.
    async fn expect_error(
        &mut self,
        what: &str,
        id: i32,
        bytes: &[u8],
        code: i32,
        name: &str,
    ) -> TestResult {
        let mut conn = self.server.raw().await?;
        let reply = conn
            .round_trip(id, bytes)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        assert_eq!(reply.op_code, OP_MSG, "{what}");
        assert_error(&reply.body, code, name);
        conn.ping()
            .await
            .map_err(|e| format!("{what}: the same connection afterwards: {e}"))?;
        self.check_unharmed(what).await
    }
}

#[tokio::test]
async fn garbage_bytes_close_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    b.expect_close(
        "an HTTP request",
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await?;
    b.expect_close("all ones", &[0xff; 64]).await?;
    // A plausible length followed by noise: the opcode is nonsense.
    let mut noise = 40_i32.to_le_bytes().to_vec();
    noise.extend((0_u8..36).map(|i| i.wrapping_mul(37).wrapping_add(11)));
    b.expect_close("noise", &noise).await?;
    Ok(())
}

#[tokio::test]
async fn message_length_below_the_header_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    for len in [4, 0, 15, -1, -16, i32::MIN] {
        b.expect_close(&format!("messageLength {len}"), &header(len, 1, OP_MSG))
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn message_length_above_the_maximum_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    // Only the header is sent: the server must decide from it alone, without waiting for (or
    // reserving room for) a body that will never come.
    for len in [MAX_MESSAGE_SIZE + 1, i32::MAX] {
        b.expect_close(&format!("messageLength {len}"), &header(len, 1, OP_MSG))
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_message_at_the_maximum_length_is_not_rejected_early() -> TestResult {
    // The counterpart of the test above: the limit itself is allowed, so the server waits for
    // the body; when the client gives up mid-message it closes.
    let mut b = Bystander::start().await?;
    let mut victim = b.server.raw().await?;
    victim
        .send_raw(&header(MAX_MESSAGE_SIZE, 1, OP_MSG))
        .await?;
    victim.send_raw(&[0; 1024]).await?;
    // Still waiting: the bystander is served meanwhile.
    b.check_unharmed("a partial maximum-size message").await?;
    victim.shutdown_write().await?;
    victim.expect_closed().await?;
    b.check_unharmed("an abandoned maximum-size message").await
}

#[tokio::test]
async fn truncated_frame_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let mut full = op_msg(
        1,
        0,
        &doc! { "ping": 1, "pad": "x".repeat(60), "$db": "admin" },
    );
    full.truncate(100);
    full[..4].copy_from_slice(&100_i32.to_le_bytes());
    let mut victim = b.server.raw().await?;
    victim.send_raw(&full[..50]).await?;
    victim.shutdown_write().await?;
    victim.expect_closed().await?;
    b.check_unharmed("a truncated frame").await
}

#[tokio::test]
async fn unknown_opcode_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let body = {
        let mut body = 0_u32.to_le_bytes().to_vec();
        body.extend(kind0(&bson_bytes(&ping_doc())));
        body
    };
    // OP_UPDATE (removed), nonsense, and OP_REPLY, which only servers send.
    for op in [2001, 9999, OP_REPLY] {
        b.expect_close(&format!("opcode {op}"), &frame(1, 0, op, &body))
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn invalid_bson_body_is_answered_with_invalid_bson() -> TestResult {
    let mut b = Bystander::start().await?;
    let good = bson_bytes(&ping_doc());
    // "admin" becomes "adm\xffn": not UTF-8.
    let mut bad_utf8 = good.clone();
    let at = bad_utf8.len() - 4;
    assert_eq!(bad_utf8[at], b'i');
    bad_utf8[at] = 0xff;
    // The first element's type byte becomes 0x20, which BSON does not define.
    let mut bad_type = good.clone();
    assert_eq!(bad_type[4], 0x10);
    bad_type[4] = 0x20;
    for (what, doc) in [
        ("invalid UTF-8", bad_utf8),
        ("unknown element type", bad_type),
    ] {
        let bytes = op_msg_sections(71, 0, &[kind0(&doc)]);
        b.expect_error(what, 71, &bytes, 22, "InvalidBSON").await?;
    }
    Ok(())
}

#[tokio::test]
async fn two_body_sections_are_answered_with_40430() -> TestResult {
    let mut b = Bystander::start().await?;
    let body = kind0(&bson_bytes(&ping_doc()));
    let bytes = op_msg_sections(72, 0, &[body.clone(), body]);
    b.expect_error("two kind-0 sections", 72, &bytes, 40430, "Location40430")
        .await
}

#[tokio::test]
async fn duplicate_sequences_are_answered_with_40431() -> TestResult {
    let mut b = Bystander::start().await?;
    let docs = [doc! { "_id": 1 }];
    let bytes = op_msg_sections(
        73,
        0,
        &[
            kind0(&bson_bytes(&ping_doc())),
            kind1("documents", &docs),
            kind1("documents", &docs),
        ],
    );
    b.expect_error("duplicate sequences", 73, &bytes, 40431, "Location40431")
        .await
}

#[tokio::test]
async fn missing_body_is_answered_with_40587() -> TestResult {
    let mut b = Bystander::start().await?;
    let bytes = op_msg_sections(74, 0, &[kind1("documents", &[doc! { "_id": 1 }])]);
    b.expect_error("no kind-0 section", 74, &bytes, 40587, "Location40587")
        .await
}

#[tokio::test]
async fn missing_db_is_answered_with_40571() -> TestResult {
    let mut b = Bystander::start().await?;
    let bytes = op_msg(75, 0, &doc! { "ping": 1 });
    b.expect_error("no $db", 75, &bytes, 40571, "Location40571")
        .await?;
    let bytes = op_msg(76, 0, &doc! { "ping": 1, "$db": 1 });
    b.expect_error("$db not a string", 76, &bytes, 14, "TypeMismatch")
        .await
}

#[tokio::test]
async fn bad_checksum_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let good = op_msg(81, CHECKSUM_PRESENT, &ping_doc());
    let mut wrong_crc = good.clone();
    let last = wrong_crc.len() - 1;
    wrong_crc[last] ^= 0x01;
    b.expect_close("a flipped checksum bit", &wrong_crc).await?;
    // A covered byte changed after the checksum was computed (the requestID).
    let mut wrong_id = good;
    wrong_id[4] ^= 0x01;
    b.expect_close("a changed requestID", &wrong_id).await?;
    // The flag set but no room for a checksum.
    let mut missing = op_msg(82, 0, &ping_doc());
    missing[16] = 1;
    b.expect_close("a checksum flag without a checksum", &missing)
        .await?;
    Ok(())
}

#[tokio::test]
async fn unknown_required_flag_bit_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    for bit in [2, 3, 15] {
        let bytes = op_msg(83, 1 << bit, &ping_doc());
        b.expect_close(&format!("flag bit {bit}"), &bytes).await?;
    }
    Ok(())
}

#[tokio::test]
async fn unknown_optional_flag_bits_are_ignored() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    for (id, flags) in [(84, 1 << 20), (85, 1 << 31)] {
        let reply = conn.round_trip(id, &op_msg(id, flags, &ping_doc())).await?;
        assert!(is_ok(&reply.body), "flags {flags:#x}: {}", reply.body);
    }
    Ok(())
}

#[tokio::test]
async fn unknown_section_kind_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let body = kind0(&bson_bytes(&ping_doc()));
    let mut as_kind_2 = body.clone();
    as_kind_2[0] = 2;
    b.expect_close(
        "a lone kind-2 section",
        &op_msg_sections(86, 0, &[as_kind_2]),
    )
    .await?;
    let bytes = op_msg_sections(87, 0, &[body, vec![0xff, 5, 0, 0, 0]]);
    b.expect_close("a kind-255 section after the body", &bytes)
        .await?;
    Ok(())
}

#[tokio::test]
async fn op_compressed_with_a_lying_size_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let plain = op_msg(91, 0, &ping_doc());
    let true_size = i32::try_from(plain.len() - 16)?;
    for (id, name) in COMPRESSORS {
        let honest = op_compressed(&plain, id);
        let data = &honest[25..];
        for size in [true_size + 1, true_size - 1, true_size * 100] {
            let bytes = op_compressed_raw(91, OP_MSG, size, id, data);
            b.expect_close(&format!("{name} claiming {size} bytes"), &bytes)
                .await?;
        }
    }
    // Sizes no compressor can honour.
    for size in [-1, i32::MIN, MAX_MESSAGE_SIZE, i32::MAX] {
        let bytes = op_compressed_raw(92, OP_MSG, size, ZLIB, &[0x78, 0x9c, 3, 0, 0, 0, 0, 1]);
        b.expect_close(&format!("uncompressedSize {size}"), &bytes)
            .await?;
    }
    // Data that does not decompress at all.
    for (id, name) in COMPRESSORS {
        let bytes = op_compressed_raw(93, OP_MSG, true_size, id, &[0xde, 0xad, 0xbe, 0xef]);
        b.expect_close(&format!("{name} garbage"), &bytes).await?;
    }
    Ok(())
}

#[tokio::test]
async fn op_compressed_with_an_unknown_compressor_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let plain = op_msg(94, 0, &ping_doc());
    let size = i32::try_from(plain.len() - 16)?;
    for id in [4, 9, 255] {
        let bytes = op_compressed_raw(94, OP_MSG, size, id, &plain[16..]);
        b.expect_close(&format!("compressor id {id}"), &bytes)
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn op_compressed_with_a_bad_original_opcode_closes_the_connection() -> TestResult {
    let mut b = Bystander::start().await?;
    let plain = op_msg(95, 0, &ping_doc());
    let size = i32::try_from(plain.len() - 16)?;
    for op in [OP_COMPRESSED, 2001, 9999] {
        let bytes = op_compressed_raw(95, op, size, NOOP, &plain[16..]);
        b.expect_close(&format!("original opcode {op}"), &bytes)
            .await?;
    }
    // And a header too short to hold the compression fields.
    b.expect_close(
        "a truncated OP_COMPRESSED header",
        &frame(96, 0, OP_COMPRESSED, &[0xdd, 7, 0, 0, 1]),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn errors_inside_a_compressed_message_are_answered() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    negotiate(&mut conn, "zstd").await?;
    // A parse error that is answered rather than fatal, arriving compressed.
    let body = kind0(&bson_bytes(&ping_doc()));
    let inner = op_msg_sections(97, 0, &[body.clone(), body]);
    let reply = conn.round_trip(97, &op_compressed(&inner, ZSTD)).await?;
    assert_eq!(reply.op_code, OP_MSG);
    assert_error(&reply.body, 40430, "Location40430");
    conn.ping().await?;
    // A command error is answered with the request's compressor.
    let inner = op_msg(98, 0, &doc! { "frobnicate": 1, "$db": "test" });
    let reply = conn.round_trip(98, &op_compressed(&inner, ZSTD)).await?;
    assert_eq!(reply.compressor_id, Some(ZSTD));
    assert_error(&reply.body, 59, "CommandNotFound");
    Ok(())
}

#[tokio::test]
async fn op_query_and_op_msg_mix_on_one_connection() -> TestResult {
    // The reply opcode follows the request's.
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    for id in 1..=3 {
        let query = op_query(id, 0, "admin.$cmd", -1, &doc! { "isMaster": 1 });
        let reply = conn.round_trip(id, &query).await?;
        assert_eq!(reply.op_code, OP_REPLY);
        let reply = conn
            .round_trip(id + 100, &op_msg(id + 100, 0, &ping_doc()))
            .await?;
        assert_eq!(reply.op_code, OP_MSG);
    }
    Ok(())
}

#[tokio::test]
async fn more_to_come_parse_errors_get_no_reply() -> TestResult {
    // OP_MSG: a `moreToCome` message is never answered, not even when its sections are
    // invalid; the client is not reading, and a stray reply would be taken as the answer to
    // its next request. (mongod builds the error reply, then drops it for `moreToCome`.)
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let body = kind0(&bson_bytes(&ping_doc()));
    let mut bad_type = bson_bytes(&ping_doc());
    bad_type[4] = 0x20;
    for (id, what, sections) in [
        (20, "two kind-0 sections", vec![body.clone(), body.clone()]),
        (22, "invalid BSON", vec![kind0(&bad_type)]),
        (
            24,
            "no kind-0 section",
            vec![kind1("documents", &[doc! { "_id": 1 }])],
        ),
    ] {
        conn.send_raw(&op_msg_sections(id, MORE_TO_COME, &sections))
            .await?;
        let reply = conn
            .round_trip(id + 1, &op_msg(id + 1, 0, &ping_doc()))
            .await
            .map_err(|e| format!("after a moreToCome message with {what}: {e}"))?;
        assert!(is_ok(&reply.body));
    }
    Ok(())
}

#[tokio::test]
async fn op_query_with_invalid_bson_is_answered_with_an_op_reply() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let mut query = op_query(30, 0, "admin.$cmd", -1, &doc! { "isMaster": 1 });
    // The query document's first element type becomes 0x20, which BSON does not define.
    let type_at = query.len() - bson_bytes(&doc! { "isMaster": 1 }).len() + 4;
    assert_eq!(query[type_at], 0x10);
    query[type_at] = 0x20;
    let reply = conn.round_trip(30, &query).await?;
    assert_eq!(reply.op_code, OP_REPLY);
    assert_eq!(number(reply.body.get("code")), Some(22.0), "{}", reply.body);
    conn.ping().await?;
    Ok(())
}

#[tokio::test]
async fn compressed_op_query_with_invalid_bson_is_answered_with_an_op_reply() -> TestResult {
    // A legacy client reads an OP_REPLY to its OP_QUERY, compressed or not.
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let mut query = op_query(31, 0, "admin.$cmd", -1, &doc! { "isMaster": 1 });
    let type_at = query.len() - bson_bytes(&doc! { "isMaster": 1 }).len() + 4;
    query[type_at] = 0x20;
    let reply = conn.round_trip(31, &op_compressed(&query, ZLIB)).await?;
    assert_eq!(
        reply.op_code, OP_REPLY,
        "an OP_QUERY answered with opcode {}: {}",
        reply.op_code, reply.body
    );
    assert_eq!(number(reply.body.get("code")), Some(22.0), "{}", reply.body);
    Ok(())
}

#[tokio::test]
async fn a_request_followed_by_a_half_close_is_still_answered() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    conn.send_raw(&op_msg(1, 0, &ping_doc())).await?;
    conn.shutdown_write().await?;
    let reply = conn.read_reply().await?;
    assert_eq!(reply.header.response_to, 1);
    assert!(is_ok(&reply.body));
    conn.expect_closed().await?;
    Ok(())
}

#[tokio::test]
async fn a_request_followed_by_garbage_is_answered_then_closed() -> TestResult {
    let mut b = Bystander::start().await?;
    let mut conn = b.server.raw().await?;
    let mut bytes = op_msg(1, 0, &ping_doc());
    bytes.extend(header(5, 2, OP_MSG));
    conn.send_raw(&bytes).await?;
    let reply = conn.read_reply().await?;
    assert_eq!(reply.header.response_to, 1);
    assert!(is_ok(&reply.body));
    conn.expect_closed().await?;
    b.check_unharmed("a request followed by garbage").await
}
