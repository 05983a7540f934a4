//! `MONGODB-X509`: logging in with the client's certificate, through the `mongodb` driver
//! (`authMechanism=MONGODB-X509`, which logs in speculatively in its handshake), through the
//! `authenticate` command, and through `hello`'s `speculativeAuthenticate`, on a server with
//! `--auth --tlsMode requireTLS --tlsCAFile`. Certificates are made for each test with `rcgen`.

mod common;

use std::path::PathBuf;

use bson::{Document, doc};
use common::certs::Ca;
use common::{TestResult, TestServer, assert_command_error, command_error, run_command_err};
use ebb::config::TlsMode;
use mongodb::Client;
use rcgen::DnType;

/// The subject of `client.pem`, as mongod renders it (RFC 2253: the last name first).
const SUBJECT: &str = "CN=client,OU=KernelUser,O=MongoDB,L=New York City,ST=New York,C=US";

/// The subject of `member.pem`, which has the server certificate's `O` and `OU`.
const MEMBER: &str = "CN=member,O=Ebb,OU=Server";

/// The subject of `nobody.pem`, whose user does not exist.
const NOBODY: &str = "CN=nobody,O=MongoDB";

/// How long a client waits for a server.
const WAIT_MS: u64 = 10_000;

/// How long a client that must fail waits for a server before giving up.
const REFUSED_WITHIN_MS: u64 = 1500;

/// A test's certificates: `ca.pem`; `server.pem`; `client.pem` ([`SUBJECT`], a user on
/// `$external`); `nobody.pem` ([`NOBODY`], no user); `member.pem` ([`MEMBER`], the server's `O`
/// and `OU`); `stranger.pem` (the subject of `client.pem`, signed by another CA).
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> TestResult<Pki> {
        let pki = Pki {
            dir: tempfile::tempdir()?,
        };
        let ca = Ca::new("Ebb X.509 test CA")?;
        std::fs::write(pki.path("ca.pem"), &ca.pem)?;
        let server = [
            (DnType::OrganizationName, "Ebb"),
            (DnType::OrganizationalUnitName, "Server"),
            (DnType::CommonName, "localhost"),
        ];
        std::fs::write(pki.path("server.pem"), ca.issue(&server, true)?)?;
        // Written C first, as `openssl req -subj "/C=US/.../CN=client"` writes it.
        let client = [
            (DnType::CountryName, "US"),
            (DnType::StateOrProvinceName, "New York"),
            (DnType::LocalityName, "New York City"),
            (DnType::OrganizationName, "MongoDB"),
            (DnType::OrganizationalUnitName, "KernelUser"),
            (DnType::CommonName, "client"),
        ];
        std::fs::write(pki.path("client.pem"), ca.issue(&client, false)?)?;
        let nobody = [
            (DnType::OrganizationName, "MongoDB"),
            (DnType::CommonName, "nobody"),
        ];
        std::fs::write(pki.path("nobody.pem"), ca.issue(&nobody, false)?)?;
        // The server's O and OU: a member of its cluster, as mongod tells them.
        let member = [
            (DnType::OrganizationalUnitName, "Server"),
            (DnType::OrganizationName, "Ebb"),
            (DnType::CommonName, "member"),
        ];
        std::fs::write(pki.path("member.pem"), ca.issue(&member, false)?)?;
        let other = Ca::new("Some other CA")?;
        std::fs::write(pki.path("stranger.pem"), other.issue(&client, false)?)?;
        Ok(pki)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A server with `--auth --tlsMode requireTLS` and the test's certificates (clients without a
/// certificate allowed when `allow_without_certificates`), an administrator `admin` (password
/// `pwd`) and the user [`SUBJECT`] on `$external`, with `readWrite` on `test`.
async fn server(pki: &Pki, allow_without_certificates: bool) -> TestResult<TestServer> {
    let server = TestServer::start_with(|c| {
        c.auth = true;
        c.tls_mode = TlsMode::RequireTls;
        c.tls_certificate_key_file = Some(pki.path("server.pem"));
        c.tls_ca_file = Some(pki.path("ca.pem"));
        c.tls_allow_connections_without_certificates = allow_without_certificates;
    })
    .await?;
    // The localhost exception lets the first user in; the administrator adds the others.
    let first = client(&server, pki, Some("client.pem"), "").await?;
    first
        .database("admin")
        .run_command(doc! { "createUser": "admin", "pwd": "pwd", "roles": ["root"] })
        .await?;
    let admin_uri = format!(
        "mongodb://admin:pwd@{}/?authSource=admin&directConnection=true&tls=true&tlsCAFile={}\
         &tlsCertificateKeyFile={}&serverSelectionTimeoutMS={WAIT_MS}",
        server.addr(),
        pki.path("ca.pem").display(),
        pki.path("client.pem").display(),
    );
    let admin = Client::with_uri_str(admin_uri).await?;
    admin
        .database("$external")
        .run_command(doc! {
            "createUser": SUBJECT,
            "roles": [{ "role": "readWrite", "db": "test" }],
        })
        .await?;
    Ok(server)
}

/// A client of `server` over TLS trusting the test's CA, presenting `certificate` (a file of
/// `pki`) if any, with more URI `options`. It keeps one connection, so that a login on it
/// holds for the commands that follow.
async fn client(
    server: &TestServer,
    pki: &Pki,
    certificate: Option<&str>,
    options: &str,
) -> TestResult<Client> {
    client_waiting(server, pki, certificate, options, WAIT_MS).await
}

async fn client_waiting(
    server: &TestServer,
    pki: &Pki,
    certificate: Option<&str>,
    options: &str,
    wait_ms: u64,
) -> TestResult<Client> {
    let mut uri = format!(
        "mongodb://{}/?directConnection=true&maxPoolSize=1&serverSelectionTimeoutMS={wait_ms}\
         &connectTimeoutMS={wait_ms}&tls=true&tlsCAFile={}",
        server.addr(),
        pki.path("ca.pem").display(),
    );
    if let Some(file) = certificate {
        uri.push_str("&tlsCertificateKeyFile=");
        uri.push_str(&pki.path(file).display().to_string());
    }
    if !options.is_empty() {
        uri.push('&');
        uri.push_str(options);
    }
    Ok(Client::with_uri_str(uri).await?)
}

/// The users `connectionStatus` reports on the client's connection.
async fn logged_in(client: &Client) -> TestResult<Vec<Document>> {
    let status = client
        .database("admin")
        .run_command(doc! { "connectionStatus": 1 })
        .await?;
    Ok(status
        .get_document("authInfo")?
        .get_array("authenticatedUsers")?
        .iter()
        .filter_map(|u| u.as_document().cloned())
        .collect())
}

fn external_user() -> Document {
    doc! { "user": SUBJECT, "db": "$external" }
}

/// `find` on `test.coll` (the user's `readWrite`), which needs a login.
async fn find(client: &Client) -> mongodb::error::Result<Option<Document>> {
    client
        .database("test")
        .collection::<Document>("coll")
        .find_one(doc! {})
        .await
}

#[tokio::test]
async fn the_driver_logs_in_with_its_certificate() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    let x509 = client(
        &server,
        &pki,
        Some("client.pem"),
        "authMechanism=MONGODB-X509",
    )
    .await?;
    let coll = x509.database("test").collection::<Document>("coll");
    coll.insert_one(doc! { "_id": 1, "by": "x509" }).await?;
    assert_eq!(
        coll.find_one(doc! {}).await?,
        Some(doc! { "_id": 1, "by": "x509" })
    );
    assert_eq!(logged_in(&x509).await?, vec![external_user()]);
    let status = x509
        .database("admin")
        .run_command(doc! { "connectionStatus": 1 })
        .await?;
    assert_eq!(
        status
            .get_document("authInfo")?
            .get_array("authenticatedUserRoles")?
            .clone(),
        vec![bson::Bson::Document(
            doc! { "role": "readWrite", "db": "test" }
        )]
    );
    // Its roles hold, and nothing more.
    let err = x509
        .database("other")
        .collection::<Document>("coll")
        .insert_one(doc! {})
        .await
        .expect_err("readWrite on test only");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        13,
        "Unauthorized",
    );
    // Without the mechanism, the same certificate logs nobody in.
    let plain = client(&server, &pki, Some("client.pem"), "").await?;
    let err = find(&plain).await.expect_err("no login");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        13,
        "Unauthorized",
    );
    Ok(())
}

#[tokio::test]
async fn authenticate_logs_in_as_the_certificate_subject() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    // Without a user: the certificate's subject.
    let conn = client(&server, &pki, Some("client.pem"), "").await?;
    assert!(find(&conn).await.is_err(), "a login is needed");
    let reply = conn
        .database("$external")
        .run_command(doc! { "authenticate": 1, "mechanism": "MONGODB-X509" })
        .await?;
    assert_eq!(
        reply,
        doc! { "dbname": "$external", "user": SUBJECT, "ok": 1.0 }
    );
    assert_eq!(find(&conn).await?, None);
    assert_eq!(logged_in(&conn).await?, vec![external_user()]);
    // The same user again is accepted.
    conn.database("$external")
        .run_command(doc! { "authenticate": 1, "mechanism": "MONGODB-X509" })
        .await?;
    // With the user named: it must be the subject.
    let conn = client(&server, &pki, Some("client.pem"), "").await?;
    let reply = conn
        .database("$external")
        .run_command(doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "user": SUBJECT })
        .await?;
    assert_eq!(reply.get_str("user")?, SUBJECT);
    assert_eq!(find(&conn).await?, None);
    // A connection logged in as another user (SCRAM, on admin) stays that user.
    let admin = Client::with_uri_str(format!(
        "mongodb://admin:pwd@{}/?authSource=admin&directConnection=true&maxPoolSize=1\
         &tls=true&tlsCAFile={}&tlsCertificateKeyFile={}&serverSelectionTimeoutMS={WAIT_MS}",
        server.addr(),
        pki.path("ca.pem").display(),
        pki.path("client.pem").display(),
    ))
    .await?;
    let e = run_command_err(
        &admin,
        "$external",
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509" },
    )
    .await?;
    assert_command_error(&e, 18, "AuthenticationFailed");
    assert_eq!(
        logged_in(&admin).await?,
        vec![doc! { "user": "admin", "db": "admin" }]
    );
    Ok(())
}

#[tokio::test]
async fn authenticate_refuses_as_mongod_does() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    let conn = client(&server, &pki, Some("client.pem"), "").await?;
    let failed = |e: &mongodb::error::CommandError| {
        assert_command_error(e, 18, "AuthenticationFailed");
        assert_eq!(e.message, "Authentication failed.");
    };
    let authenticate = |fields: Document| {
        let mut command = doc! { "authenticate": 1 };
        command.extend(fields);
        command
    };
    // A user other than the certificate's subject.
    failed(
        &run_command_err(
            &conn,
            "$external",
            authenticate(doc! { "mechanism": "MONGODB-X509", "user": "CN=someone else" }),
        )
        .await?,
    );
    // Another mechanism, or none.
    for mechanism in ["SCRAM-SHA-256", "PLAIN", ""] {
        failed(
            &run_command_err(
                &conn,
                "$external",
                authenticate(doc! { "mechanism": mechanism }),
            )
            .await?,
        );
    }
    // Not on `$external`: told as it is.
    let e = run_command_err(
        &conn,
        "admin",
        authenticate(doc! { "mechanism": "MONGODB-X509" }),
    )
    .await?;
    assert_command_error(&e, 17, "ProtocolError");
    assert_eq!(
        e.message,
        "X.509 authentication must always use the $external database."
    );
    // The command's own fields, as its IDL declares them.
    let e = run_command_err(&conn, "$external", authenticate(doc! {})).await?;
    assert_command_error(&e, 40414, "IDLFailedToParse");
    let e = run_command_err(
        &conn,
        "$external",
        authenticate(doc! { "mechanism": "MONGODB-X509", "username": SUBJECT }),
    )
    .await?;
    assert_command_error(&e, 40415, "IDLUnknownField");
    let e = run_command_err(
        &conn,
        "$external",
        authenticate(doc! { "mechanism": "MONGODB-X509", "user": 1 }),
    )
    .await?;
    assert_command_error(&e, 14, "TypeMismatch");
    assert!(logged_in(&conn).await?.is_empty());
    // A certificate whose user does not exist: told as it is.
    let nobody = client(&server, &pki, Some("nobody.pem"), "").await?;
    let e = run_command_err(
        &nobody,
        "$external",
        authenticate(doc! { "mechanism": "MONGODB-X509" }),
    )
    .await?;
    assert_command_error(&e, 11, "UserNotFound");
    assert_eq!(
        e.message,
        format!("Could not find user \"{NOBODY}\" for db \"$external\"")
    );
    assert!(logged_in(&nobody).await?.is_empty());
    // Through the driver too.
    let x509 = client(
        &server,
        &pki,
        Some("nobody.pem"),
        "authMechanism=MONGODB-X509",
    )
    .await?;
    assert!(find(&x509).await.is_err(), "nobody logged in");
    Ok(())
}

#[tokio::test]
async fn without_a_certificate_nobody_logs_in() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, true).await?;
    let conn = client(&server, &pki, None, "").await?;
    let e = run_command_err(
        &conn,
        "$external",
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509" },
    )
    .await?;
    assert_command_error(&e, 18, "AuthenticationFailed");
    // Naming the user does not help.
    let e = run_command_err(
        &conn,
        "$external",
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "user": SUBJECT },
    )
    .await?;
    assert_command_error(&e, 18, "AuthenticationFailed");
    assert!(logged_in(&conn).await?.is_empty());
    let x509 = client(&server, &pki, None, "authMechanism=MONGODB-X509").await?;
    assert!(
        find(&x509).await.is_err(),
        "logged in without a certificate"
    );
    Ok(())
}

#[tokio::test]
async fn certificates_the_ca_did_not_sign_are_refused() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    // The right subject, from another CA: the handshake fails.
    let stranger = client_waiting(
        &server,
        &pki,
        Some("stranger.pem"),
        "authMechanism=MONGODB-X509",
        REFUSED_WITHIN_MS,
    )
    .await?;
    assert!(find(&stranger).await.is_err(), "another CA's certificate");
    // No certificate, where one is required.
    let none = client_waiting(
        &server,
        &pki,
        None,
        "authMechanism=MONGODB-X509",
        REFUSED_WITHIN_MS,
    )
    .await?;
    assert!(find(&none).await.is_err(), "no certificate");
    Ok(())
}

#[tokio::test]
async fn hello_logs_in_speculatively() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    let hello = |spec: Document| doc! { "hello": 1, "speculativeAuthenticate": spec };
    // `db` names the database, `$external` when absent.
    for spec in [
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "db": "$external" },
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509" },
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "user": SUBJECT },
    ] {
        let conn = client(&server, &pki, Some("client.pem"), "").await?;
        let reply = conn
            .database("admin")
            .run_command(hello(spec.clone()))
            .await?;
        assert_eq!(
            reply.get_document("speculativeAuthenticate")?,
            &doc! { "dbname": "$external", "user": SUBJECT },
            "{spec}"
        );
        assert_eq!(logged_in(&conn).await?, vec![external_user()], "{spec}");
        assert_eq!(find(&conn).await?, None);
    }
    // A failure, or a document `authenticate` would refuse, leaves the answer out.
    for spec in [
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "user": "CN=someone else" },
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "db": "admin" },
        doc! { "authenticate": 1, "mechanism": "SCRAM-SHA-256", "db": "$external" },
        doc! { "authenticate": 1, "db": "$external" },
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "username": SUBJECT },
    ] {
        let conn = client(&server, &pki, Some("client.pem"), "").await?;
        let reply = conn
            .database("admin")
            .run_command(hello(spec.clone()))
            .await?;
        assert!(
            !reply.contains_key("speculativeAuthenticate"),
            "{spec}: {reply}"
        );
        assert!(logged_in(&conn).await?.is_empty(), "{spec}");
    }
    // A certificate whose user does not exist.
    let nobody = client(&server, &pki, Some("nobody.pem"), "").await?;
    let reply = nobody
        .database("admin")
        .run_command(hello(
            doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "db": "$external" },
        ))
        .await?;
    assert!(!reply.contains_key("speculativeAuthenticate"), "{reply}");
    Ok(())
}

#[tokio::test]
async fn cluster_member_certificates_are_not_users() -> TestResult {
    let pki = Pki::new()?;
    let server = server(&pki, false).await?;
    let admin = Client::with_uri_str(format!(
        "mongodb://admin:pwd@{}/?authSource=admin&directConnection=true&tls=true&tlsCAFile={}\
         &tlsCertificateKeyFile={}&serverSelectionTimeoutMS={WAIT_MS}",
        server.addr(),
        pki.path("ca.pem").display(),
        pki.path("client.pem").display(),
    ))
    .await?;
    admin
        .database("$external")
        .run_command(doc! {
            "createUser": MEMBER,
            "roles": [{ "role": "readWrite", "db": "test" }],
        })
        .await?;
    // The user exists, yet the certificate, whose DC, O and OU are the server's, is refused
    // (mongod without x.509 cluster authentication, `enforceUserClusterSeparation` on).
    let conn = client(&server, &pki, Some("member.pem"), "").await?;
    let e = run_command_err(
        &conn,
        "$external",
        doc! { "authenticate": 1, "mechanism": "MONGODB-X509" },
    )
    .await?;
    assert_command_error(&e, 18, "AuthenticationFailed");
    let reply = conn
        .database("admin")
        .run_command(doc! {
            "hello": 1,
            "speculativeAuthenticate": { "authenticate": 1, "mechanism": "MONGODB-X509" },
        })
        .await?;
    assert!(!reply.contains_key("speculativeAuthenticate"), "{reply}");
    assert!(logged_in(&conn).await?.is_empty());
    Ok(())
}
