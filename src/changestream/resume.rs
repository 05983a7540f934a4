//! Resuming a stream at a token (mongod's `DocumentSourceChangeStreamCheckResumability` and
//! `DocumentSourceChangeStreamEnsureResumeTokenPresent`): the events of the resume token's
//! cluster time are compared with the client's token; those before it are swallowed, the event
//! of the token itself too, and a stream that passes the token without seeing it fails.

use std::cmp::Ordering;

use super::spec::Spec;
use super::token::{ResumeTokenData, TokenType, document_to_string};
use crate::error::{CommandError, ErrorCode};

/// Where an event of the resumed stream stands against the client's token (mongod's
/// `ResumeStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeStatus {
    /// Before the token: swallow it.
    CheckNextDoc,
    /// The token's own event.
    FoundToken,
    /// After the token.
    SurpassedToken,
    /// The token's event, of which the client saw a fragment: split it
    /// ([`super::split::Splitter`] returns the fragments after the client's).
    NeedsSplit,
}

/// mongod's `compareAgainstClientResumeToken` on a replica set.
pub fn compare_against_client_token(
    stream: &ResumeTokenData,
    client: &ResumeTokenData,
) -> ResumeStatus {
    use ResumeStatus::{CheckNextDoc, FoundToken, NeedsSplit, SurpassedToken};
    if stream.cluster_time != client.cluster_time {
        // The scan starts at the token's time: a later time is past it.
        return if (stream.cluster_time.time, stream.cluster_time.increment)
            < (client.cluster_time.time, client.cluster_time.increment)
        {
            CheckNextDoc
        } else {
            SurpassedToken
        };
    }
    if stream.token_type != client.token_type {
        return if stream.token_type == TokenType::Event {
            SurpassedToken
        } else {
            CheckNextDoc
        };
    }
    match stream.txn_op_index.cmp(&client.txn_op_index) {
        Ordering::Less => return CheckNextDoc,
        // The client's operation was not one this stream sees.
        Ordering::Greater => return SurpassedToken,
        Ordering::Equal => {}
    }
    if stream.from_invalidate != client.from_invalidate {
        return if stream.from_invalidate {
            SurpassedToken
        } else {
            CheckNextDoc
        };
    }
    // On a replica set, the same time and index with another UUID cannot be the token.
    if stream.uuid != client.uuid {
        return SurpassedToken;
    }
    if stream.event_identifier != client.event_identifier {
        let s = stream.event_identifier.as_ref().map(|d| d.as_bytes());
        let c = client.event_identifier.as_ref().map(|d| d.as_bytes());
        return if s > c { SurpassedToken } else { CheckNextDoc };
    }
    match (stream.fragment_num, client.fragment_num) {
        (None, None) => FoundToken,
        (None, Some(_)) => NeedsSplit,
        (Some(_), None) => SurpassedToken,
        (Some(a), Some(b)) => match a.cmp(&b) {
            Ordering::Less => CheckNextDoc,
            Ordering::Equal => FoundToken,
            Ordering::Greater => SurpassedToken,
        },
    }
}

/// What to do with an event of a resumed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not for the client (before or at the token).
    Skip,
    /// Deliver it.
    Deliver,
    /// The token's own event, resumed inside its split: pass it to the `Splitter`, which
    /// returns only the fragments after the token's.
    Split,
}

/// The resume check of one stream.
#[derive(Debug, Clone)]
pub struct Resume {
    token: ResumeTokenData,
    /// The token is an event's (mongod adds `EnsureResumeTokenPresent`): it must be seen.
    must_see: bool,
    seen: bool,
    surpassed: bool,
}

impl Resume {
    /// The check for a stream of `spec`, or `None` when it starts at a time
    /// (`startAtOperationTime`, or none given).
    pub fn new(spec: &Spec) -> Option<Self> {
        let token = spec.resume_token()?.clone();
        Some(Resume {
            must_see: !token.is_high_water_mark(),
            token,
            seen: false,
            surpassed: false,
        })
    }

    /// The oplog position to read from (inclusive): the token's cluster time.
    pub fn start_time(&self) -> bson::Timestamp {
        self.token.cluster_time
    }

    /// Decides for the next event of the stream, in order. After the token, every event is
    /// delivered. Passing an event token's place without having seen it is mongod's
    /// `ChangeStreamFatalError` (280) "cannot resume stream; the resume token was not found".
    pub fn check(&mut self, event: &ResumeTokenData) -> Result<Step, CommandError> {
        if self.surpassed {
            return Ok(Step::Deliver);
        }
        match compare_against_client_token(event, &self.token) {
            ResumeStatus::CheckNextDoc => Ok(Step::Skip),
            ResumeStatus::FoundToken => {
                self.seen = true;
                self.surpassed = true;
                Ok(Step::Skip)
            }
            ResumeStatus::NeedsSplit => {
                self.seen = true;
                self.surpassed = true;
                Ok(Step::Split)
            }
            ResumeStatus::SurpassedToken => {
                if self.must_see && !self.seen {
                    return Err(CommandError::new(
                        ErrorCode::ChangeStreamFatalError,
                        format!(
                            "cannot resume stream; the resume token was not found. {}",
                            document_to_string(&event.to_document())
                        ),
                    ));
                }
                self.surpassed = true;
                Ok(Step::Deliver)
            }
        }
    }
}

/// mongod's `ChangeStreamHistoryLost` (286) for a resume point older than the oplog's history.
pub fn history_lost() -> CommandError {
    CommandError::new(
        ErrorCode::ChangeStreamHistoryLost,
        "Resume of change stream was not possible, as the resume point may no longer be in the \
         oplog.",
    )
}

#[cfg(test)]
mod tests {
    use bson::{Timestamp, Uuid, rawdoc};

    use super::*;

    fn ev(time: u32, index: u64, id: i32) -> ResumeTokenData {
        ResumeTokenData::event(
            Timestamp { time, increment: 0 },
            index,
            Some(Uuid::from_bytes([1; 16])),
            rawdoc! { "operationType": "insert", "documentKey": { "_id": id } },
        )
    }

    fn resuming(token: ResumeTokenData) -> Resume {
        Resume::new(&Spec {
            resume_after: Some(token),
            ..Spec::default()
        })
        .unwrap()
    }

    #[test]
    fn swallows_up_to_the_token() {
        let mut r = resuming(ev(5, 1, 2));
        assert_eq!(
            r.start_time(),
            Timestamp {
                time: 5,
                increment: 0
            }
        );
        assert_eq!(r.check(&ev(5, 0, 1)).unwrap(), Step::Skip);
        assert_eq!(r.check(&ev(5, 1, 2)).unwrap(), Step::Skip);
        assert_eq!(r.check(&ev(5, 2, 3)).unwrap(), Step::Deliver);
        assert_eq!(r.check(&ev(6, 0, 1)).unwrap(), Step::Deliver);
    }

    #[test]
    fn a_missing_token_is_an_error() {
        let mut r = resuming(ev(5, 1, 2));
        let e = r.check(&ev(6, 0, 1)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ChangeStreamFatalError);
        assert!(
            e.errmsg
                .starts_with("cannot resume stream; the resume token was not found. {_data: \"82"),
            "{}",
            e.errmsg
        );
        // Another document at the token's place.
        let mut r = resuming(ev(5, 1, 2));
        assert!(r.check(&ev(5, 1, 3)).is_err());
    }

    #[test]
    fn high_water_marks_and_invalidates() {
        let hwm = ResumeTokenData::high_water_mark(Timestamp {
            time: 5,
            increment: 0,
        });
        let mut r = resuming(hwm);
        assert_eq!(
            r.check(&ev(5, 0, 1)).unwrap(),
            Step::Deliver,
            "an event at the mark's time comes after it"
        );
        // startAfter an invalidate: the invalidating event and the invalidate are swallowed.
        let drop = ev(5, 0, 1);
        let mut inv = drop.clone();
        inv.from_invalidate = true;
        let mut r = Resume::new(&Spec {
            start_after: Some(inv.clone()),
            ..Spec::default()
        })
        .unwrap();
        assert_eq!(r.check(&drop).unwrap(), Step::Skip);
        assert_eq!(r.check(&inv).unwrap(), Step::Skip);
        assert_eq!(r.check(&ev(6, 0, 1)).unwrap(), Step::Deliver);
        assert!(Resume::new(&Spec::default()).is_none());
    }

    #[test]
    fn fragments() {
        let whole = ev(5, 0, 1);
        let mut client = whole.clone();
        client.fragment_num = Some(1);
        assert_eq!(
            compare_against_client_token(&whole, &client),
            ResumeStatus::NeedsSplit
        );
        let mut r = resuming(client.clone());
        assert_eq!(r.check(&whole).unwrap(), Step::Split);
        let mut f0 = whole.clone();
        f0.fragment_num = Some(0);
        assert_eq!(
            compare_against_client_token(&f0, &client),
            ResumeStatus::CheckNextDoc
        );
        assert_eq!(
            compare_against_client_token(&client, &client),
            ResumeStatus::FoundToken
        );
        assert_eq!(history_lost().code.code(), 286);
    }
}
