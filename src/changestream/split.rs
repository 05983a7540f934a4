//! `$changeStreamSplitLargeEvent` (mongod 7.0's `DocumentSourceChangeStreamSplitLargeEvent` and
//! `change_stream_split_event::splitChangeEvent`): an event larger than 16 MiB becomes
//! fragments `{_id, splitEvent: {fragment, of}, …fields}`, each with its own resume token (the
//! event's, with `fragmentNum`), the fields spread greedily by ascending size (then name) so
//! that the first fragments hold as many as fit.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::spec::Spec;
use super::token::ResumeTokenData;
use crate::error::{CommandError, ErrorCode};

/// The largest event returned whole (mongod's `kBSONObjMaxChangeEventSize`,
/// `BSONObjMaxUserSize`).
pub const MAX_EVENT_SIZE: usize = 16 * 1024 * 1024;

/// The split stage of one stream: remembers a resume point inside a split event.
#[derive(Debug, Clone, Default)]
pub struct Splitter {
    resume_after_split: Option<ResumeTokenData>,
}

impl Splitter {
    /// The stage for a stream of `spec` (which resumes inside a split event when its token has
    /// a `fragmentNum`).
    pub fn new(spec: &Spec) -> Self {
        Splitter {
            resume_after_split: spec
                .resume_token()
                .filter(|t| t.fragment_num.is_some())
                .cloned(),
        }
    }

    /// The event or its fragments, each with its token, to return after `token`'s event.
    ///
    /// When the stream resumes from fragment `n` of an event, the caller passes that event
    /// here (its token is the resume token without `fragmentNum`, so it must not be skipped as
    /// "not after the token"): the fragments after `n` come back, or mongod's
    /// `ChangeStreamFatalError` (280) when the event is no longer large enough to split, or
    /// splits differently. The first event passed ends the resume check, as in mongod.
    pub fn process(
        &mut self,
        token: &ResumeTokenData,
        event: RawDocumentBuf,
    ) -> Result<Vec<(ResumeTokenData, RawDocumentBuf)>, CommandError> {
        let size = event.as_bytes().len();
        let mut skip = 0;
        let mut resuming = false;
        if let Some(resume) = self.resume_after_split.take()
            && resume.without_fragment() == *token
        {
            if size <= MAX_EVENT_SIZE {
                return Err(CommandError::new(
                    ErrorCode::ChangeStreamFatalError,
                    "Attempted to resume from a split event fragment, but the event in the \
                     resumed stream was not large enough to be split",
                ));
            }
            skip = resume.fragment_num.map_or(0, |n| n as usize);
            resuming = true;
        }
        if size <= MAX_EVENT_SIZE {
            return Ok(vec![(token.clone(), event)]);
        }
        let token_size = token.to_document().as_bytes().len();
        let mut fragments = split_event(&event, token, MAX_EVENT_SIZE - token_size, skip)?;
        if resuming {
            if fragments.is_empty() {
                return Err(CommandError::new(
                    ErrorCode::ChangeStreamFatalError,
                    "Attempted to resume from a split event, but the resumed stream produced a \
                     different split. Ensure that the pipeline used to resume is the same as \
                     the original",
                ));
            }
            // The fragment of the resume token itself was already returned.
            fragments.remove(0);
        }
        Ok(fragments)
    }
}

/// Splits `event` (whose `_id` is `token`) into fragments of at most `max_fragment_size`
/// bytes, leaving out the first `skip` (mongod's `splitChangeEvent`): error 7182502 for an
/// event with nothing but `_id`, 7182500 when a single field does not fit.
pub fn split_event(
    event: &RawDocument,
    token: &ResumeTokenData,
    max_fragment_size: usize,
    skip: usize,
) -> Result<Vec<(ResumeTokenData, RawDocumentBuf)>, CommandError> {
    // Fields by (element size, name); `_id` left out, each fragment has its own.
    let mut fields: Vec<(usize, &str, RawBsonRef<'_>)> = Vec::new();
    for elem in event.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if elem.key().as_str() == "_id" {
            continue;
        }
        let value = elem
            .value()
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        // type byte, name, NUL, value
        let size = 1 + elem.key().as_str().len() + 1 + value_size(value);
        fields.push((size, elem.key().as_str(), value));
    }
    if fields.is_empty() {
        return Err(CommandError::new(
            ErrorCode::Location(7_182_502),
            "Cannot split an empty event or an event containing solely '_id' field",
        ));
    }
    fields.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
    });

    let mut built: Vec<(ResumeTokenData, Vec<usize>)> = Vec::new();
    let mut it = fields.iter().enumerate().peekable();
    while it.peek().is_some() {
        let mut fragment_token = token.clone();
        fragment_token.fragment_num = Some(u32::try_from(built.len()).unwrap_or(u32::MAX));
        let number = i32::try_from(built.len() + 1).unwrap_or(i32::MAX);
        let head = rawdoc! {
            "_id": fragment_token.to_document(),
            "splitEvent": { "fragment": number, "of": 0 },
        };
        // mongod measures the fragment with its metadata: the sort key `$sortKey: [token]`.
        let token_doc = fragment_token.to_document().as_bytes().len();
        let sort_key = 1 + "$sortKey".len() + 1 + (4 + 1 + 2 + token_doc + 1);
        let mut size = head.as_bytes().len() + sort_key;
        let mut members = Vec::new();
        // At least one field per fragment.
        while let Some((i, (field_size, _, _))) = it.next() {
            members.push(i);
            size += field_size;
            match it.peek() {
                Some((_, (next, _, _))) if size + next <= max_fragment_size => {}
                _ => break,
            }
        }
        if size > max_fragment_size {
            return Err(CommandError::new(
                ErrorCode::Location(7_182_500),
                format!(
                    "Splitting change event failed: fragment size {size} is greater than maximum \
                     allowed fragment size {max_fragment_size}"
                ),
            ));
        }
        built.push((fragment_token, members));
    }
    let total = i32::try_from(built.len()).unwrap_or(i32::MAX);
    let mut out = Vec::new();
    for (n, (fragment_token, members)) in built.into_iter().enumerate().skip(skip) {
        let number = i32::try_from(n + 1).unwrap_or(i32::MAX);
        let mut doc = rawdoc! {
            "_id": fragment_token.to_document(),
            "splitEvent": { "fragment": number, "of": total },
        };
        for i in members {
            let (_, name, value) = fields[i];
            let key = <&bson::raw::CStr>::try_from(name)
                .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            doc.append(key, value);
        }
        out.push((fragment_token, doc));
    }
    Ok(out)
}

/// The size of a value's bytes in BSON.
fn value_size(v: RawBsonRef<'_>) -> usize {
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::cstr!(""), v);
    // {<len:4> <type:1> "" <NUL> value <NUL>}
    doc.as_bytes().len().saturating_sub(4 + 1 + 1 + 1)
}

#[cfg(test)]
mod tests {
    use bson::{Timestamp, Uuid};

    use super::*;

    fn token() -> ResumeTokenData {
        ResumeTokenData::event(
            Timestamp {
                time: 9,
                increment: 1,
            },
            0,
            Some(Uuid::from_bytes([2; 16])),
            rawdoc! { "operationType": "update", "documentKey": { "_id": 1 } },
        )
    }

    fn big_event(a: usize, b: usize) -> RawDocumentBuf {
        rawdoc! {
            "_id": token().to_document(),
            "operationType": "update",
            "fullDocumentBeforeChange": { "_id": 1, "x": "a".repeat(a) },
            "fullDocument": { "_id": 1, "x": "b".repeat(b) },
            "ns": { "db": "test", "coll": "c" },
        }
    }

    #[test]
    fn small_events_pass_whole() {
        let event = big_event(10, 10);
        let out = Splitter::default()
            .process(&token(), event.clone())
            .unwrap();
        assert_eq!(out, vec![(token(), event)]);
    }

    #[test]
    fn splits_by_size_in_mongod_shape() {
        // Two 9 MiB images: each needs a fragment of its own.
        let event = big_event(9 << 20, 9 << 20);
        let out = Splitter::default().process(&token(), event).unwrap();
        assert_eq!(out.len(), 2);
        for (i, (t, doc)) in out.iter().enumerate() {
            assert_eq!(t.fragment_num, Some(u32::try_from(i).unwrap()));
            assert_eq!(t.without_fragment(), token());
            assert_eq!(doc.get_document("_id").unwrap(), &*t.to_document());
            let split = doc.get_document("splitEvent").unwrap();
            assert_eq!(
                split.get_i32("fragment").unwrap(),
                i32::try_from(i).unwrap() + 1
            );
            assert_eq!(split.get_i32("of").unwrap(), 2);
            assert!(doc.as_bytes().len() <= MAX_EVENT_SIZE);
        }
        assert!(out[0].0 < out[1].0 && token() < out[0].0);
        // Smallest fields first: operationType, ns, then the smaller image (by name on a tie).
        let keys = |d: &RawDocumentBuf| -> Vec<String> {
            d.iter().map(|r| r.unwrap().0.as_str().to_owned()).collect()
        };
        assert_eq!(
            keys(&out[0].1),
            ["_id", "splitEvent", "operationType", "ns", "fullDocument"]
        );
        assert_eq!(
            keys(&out[1].1),
            ["_id", "splitEvent", "fullDocumentBeforeChange"]
        );
    }

    #[test]
    fn errors() {
        // A single field larger than a fragment.
        let e = Splitter::default()
            .process(&token(), big_event(17 << 20, 1))
            .unwrap_err();
        assert_eq!(e.code.code(), 7_182_500);
        assert!(
            e.errmsg
                .starts_with("Splitting change event failed: fragment size ")
        );
        let only_id = rawdoc! { "_id": token().to_document() };
        let e = split_event(&only_id, &token(), 100, 0).unwrap_err();
        assert_eq!(e.code.code(), 7_182_502);
    }

    #[test]
    fn resumes_inside_a_split_event() {
        let event = big_event(9 << 20, 9 << 20);
        let mut resume = token();
        resume.fragment_num = Some(0);
        let spec = Spec {
            resume_after: Some(resume.clone()),
            ..Spec::default()
        };
        let out = Splitter::new(&spec)
            .process(&token(), event.clone())
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.fragment_num, Some(1));
        // Resuming from the last fragment: nothing more of this event.
        resume.fragment_num = Some(1);
        let spec = Spec {
            resume_after: Some(resume.clone()),
            ..Spec::default()
        };
        let mut splitter = Splitter::new(&spec);
        assert!(
            splitter
                .process(&token(), event.clone())
                .unwrap()
                .is_empty()
        );
        // Only the first event is checked.
        assert_eq!(splitter.process(&token(), event.clone()).unwrap().len(), 2);
        // The event no longer needs splitting (a different pipeline).
        let e = Splitter::new(&spec)
            .process(&token(), big_event(1, 1))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ChangeStreamFatalError);
        // It splits into fewer fragments than the token's.
        resume.fragment_num = Some(5);
        let spec = Spec {
            resume_after: Some(resume),
            ..Spec::default()
        };
        let e = Splitter::new(&spec).process(&token(), event).unwrap_err();
        assert_eq!(e.code, ErrorCode::ChangeStreamFatalError);
        assert!(e.errmsg.contains("produced a different split"));
    }
}
