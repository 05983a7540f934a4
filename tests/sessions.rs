//! The logical session commands through the `mongodb` driver: `startSession`,
//! `refreshSessions`, `killSessions`, `killAllSessions`, `killAllSessionsByPattern`, and the
//! tie between a cursor and the session it was opened in.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, assert_command_error, command_error};
use mongodb::{Client, ClientSession};

const DB: &str = "sessions_test";

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let docs: Vec<Document> = (0..5).map(|i| doc! { "_id": i }).collect();
    client
        .database(DB)
        .collection::<Document>("c")
        .insert_many(docs)
        .await?;
    Ok((server, client))
}

/// Opens a cursor of one document a batch in `session`; returns its id.
async fn open_cursor(client: &Client, session: &mut ClientSession) -> TestResult<i64> {
    let reply = client
        .database(DB)
        .run_command(doc! { "find": "c", "batchSize": 1 })
        .session(session)
        .await?;
    Ok(reply.get_document("cursor")?.get_i64("id")?)
}

/// A `getMore` of `id` in `session`.
async fn get_more(
    client: &Client,
    session: &mut ClientSession,
    id: i64,
) -> mongodb::error::Result<Document> {
    client
        .database(DB)
        .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 1 })
        .session(session)
        .await
}

/// A `getMore` of `id` in `session` answers `CursorNotFound`: the cursor was closed.
async fn assert_killed(client: &Client, session: &mut ClientSession, id: i64) -> TestResult {
    let err = get_more(client, session, id).await.expect_err("killed");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        43,
        "CursorNotFound",
    );
    Ok(())
}

fn session_doc(session: &ClientSession) -> Document {
    session.id().clone()
}

#[tokio::test]
async fn start_session_answers_a_new_session() -> TestResult {
    let (_server, client) = start().await?;
    let reply = client
        .database("admin")
        .run_command(doc! { "startSession": 1 })
        .await?;
    let id = reply.get_document("id")?;
    match id.get("id") {
        Some(Bson::Binary(b)) => {
            assert_eq!(b.subtype, bson::spec::BinarySubtype::Uuid);
            assert_eq!(b.bytes.len(), 16);
        }
        other => panic!("id.id is {other:?}"),
    }
    assert_eq!(reply.get_i32("timeoutMinutes")?, 30);
    let again = client
        .database("admin")
        .run_command(doc! { "startSession": 1 })
        .await?;
    assert_ne!(again.get_document("id")?, id, "each session is new");
    Ok(())
}

/// A cursor answers `getMore`s only in the session it was opened in (mongod's 50738), and
/// stays usable there.
#[tokio::test]
async fn get_more_in_another_session_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    let mut a = client.start_session().await?;
    let mut b = client.start_session().await?;
    let id = open_cursor(&client, &mut a).await?;
    let err = get_more(&client, &mut b, id)
        .await
        .expect_err("another session");
    let ce = command_error(&err).ok_or("not a command error")?;
    assert_command_error(ce, 50738, "Location50738");
    assert!(
        ce.message.starts_with(&format!(
            "Cannot run getMore on cursor {id}, which was created in session "
        )),
        "{}",
        ce.message
    );
    let reply = get_more(&client, &mut a, id).await?;
    assert_eq!(
        reply.get_document("cursor")?.get_array("nextBatch")?.len(),
        1
    );
    Ok(())
}

/// `killSessions` closes the cursors of the sessions it names, and only those; an empty list
/// closes every session's.
#[tokio::test]
async fn kill_sessions_closes_their_cursors() -> TestResult {
    let (_server, client) = start().await?;
    let admin = client.database("admin");
    let mut a = client.start_session().await?;
    let mut b = client.start_session().await?;
    let in_a = open_cursor(&client, &mut a).await?;
    let in_b = open_cursor(&client, &mut b).await?;
    admin
        .run_command(doc! { "killSessions": [session_doc(&a)] })
        .await?;
    assert_killed(&client, &mut a, in_a).await?;
    get_more(&client, &mut b, in_b).await?;
    // The killed session goes on: a new cursor in it works.
    let again = open_cursor(&client, &mut a).await?;
    get_more(&client, &mut a, again).await?;
    admin.run_command(doc! { "killSessions": [] }).await?;
    for (session, id) in [(&mut a, again), (&mut b, in_b)] {
        assert_killed(&client, session, id).await?;
    }
    Ok(())
}

/// `killAllSessions`: an empty list kills every session, a list of users kills theirs (none,
/// without authentication); `killAllSessionsByPattern` by `lsid`, and its user patterns match
/// nothing.
#[tokio::test]
async fn kill_all_sessions_and_patterns() -> TestResult {
    let (_server, client) = start().await?;
    let admin = client.database("admin");
    let mut a = client.start_session().await?;
    let mut b = client.start_session().await?;
    let in_a = open_cursor(&client, &mut a).await?;
    let in_b = open_cursor(&client, &mut b).await?;
    admin
        .run_command(doc! { "killAllSessions": [{ "user": "reportWriter", "db": "db2" }] })
        .await?;
    admin
        .run_command(
            doc! { "killAllSessionsByPattern": [{ "users": [{ "user": "u", "db": "d" }] }] },
        )
        .await?;
    get_more(&client, &mut a, in_a).await?;
    admin
        .run_command(doc! { "killAllSessionsByPattern": [{ "lsid": session_doc(&a) }] })
        .await?;
    assert!(
        get_more(&client, &mut a, in_a).await.is_err(),
        "a is killed"
    );
    get_more(&client, &mut b, in_b).await?;
    admin.run_command(doc! { "killAllSessions": [] }).await?;
    assert!(
        get_more(&client, &mut b, in_b).await.is_err(),
        "b is killed"
    );
    Ok(())
}

/// mongod's errors for malformed arguments.
#[tokio::test]
async fn malformed_session_commands() -> TestResult {
    let (_server, client) = start().await?;
    for (body, code, name) in [
        (doc! { "killSessions": 1 }, 14, "TypeMismatch"),
        (doc! { "killSessions": [1] }, 14, "TypeMismatch"),
        (doc! { "killSessions": [{}] }, 40414, "IDLFailedToParse"),
        (doc! { "killSessions": [{ "id": 1 }] }, 14, "TypeMismatch"),
        (
            doc! { "refreshSessions": [{ "id": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![1; 16] }), "x": 1 }] },
            40415,
            "IDLUnknownField",
        ),
        (
            doc! { "killAllSessions": [{ "user": "u" }] },
            40414,
            "IDLFailedToParse",
        ),
        (
            doc! { "killAllSessions": [{ "user": "u", "db": "d", "x": 1 }] },
            40415,
            "IDLUnknownField",
        ),
        (
            doc! { "killAllSessionsByPattern": [{ "nope": 1 }] },
            40415,
            "IDLUnknownField",
        ),
    ] {
        let err = common::run_command_err(&client, "admin", body.clone()).await?;
        assert_command_error(&err, code, name);
    }
    let ok = client
        .database("admin")
        .run_command(doc! { "refreshSessions": [{ "id": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![2; 16] }) }] })
        .await?;
    assert_eq!(ok.get_f64("ok")?, 1.0);
    Ok(())
}
