//! Collations: the `collation` option of `find`, `count`, `distinct`, `aggregate`, update and
//! delete statements and `findAndModify`, and locale-aware string comparison.
//!
//! The option is parsed as mongod 7.0 parses it: first as its IDL struct `Collation` (`locale`
//! required; `caseLevel`, `numericOrdering`, `normalization` strict booleans; `caseFirst`,
//! `alternate`, `maxVariable` enumerations; `strength` any number, then 1–5; `backwards` a
//! boolean; `version`; no other field), then against ICU's locales and option rules. `{locale:
//! "simple"}` is binary comparison ([`Collation::parse`] answers `None`): as in mongod 7.0, its
//! other fields are type-checked but otherwise ignored.
//!
//! Strings are compared by ICU4X's collator (`icu_collator`, with its compiled CLDR data): the
//! Unicode Collation Algorithm with the locale's tailoring and the requested strength,
//! `caseLevel`, `caseFirst`, `numericOrdering`, `alternate: "shifted"` and `maxVariable`.
//!
//! What differs from mongod's ICU 57:
//! - `backwards` cannot be chosen in ICU4X: it follows the locale (on for `fr_CA` only). Asking
//!   for the other value answers `NotImplemented`.
//! - ICU4X always normalizes (NFD) before comparing, so `normalization: false` gives the
//!   `normalization: true` results for text that is not in FCD form (mongod's results there
//!   depend on the text).
//! - The locales are mongod's documented list; the `@collation=` variants ICU4X has no data for
//!   (`search`, `searchjl`, `big5han`, `gb2312han`, `phonetic`, `direct`) answer
//!   `NotImplemented`. CLDR's current data differs from ICU 57's in places.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};
use icu_locale_core::Locale;

use super::{display, not_implemented};
use crate::error::{CommandError, ErrorCode};

/// The ICU version mongod 7.0 is built with: the only `version` a collation may ask for.
pub const ICU_VERSION: &str = "57.1";

/// The locales mongod documents ("Supported Languages and Locales"), in ICU's spelling.
const LOCALES: &[&str] = &[
    "af",
    "am",
    "ar",
    "as",
    "az",
    "be",
    "bg",
    "bn",
    "bo",
    "bs",
    "bs_Cyrl",
    "ca",
    "chr",
    "cs",
    "cy",
    "da",
    "de",
    "de_AT",
    "dsb",
    "dz",
    "ee",
    "el",
    "en",
    "en_US",
    "en_US_POSIX",
    "eo",
    "es",
    "et",
    "fa",
    "fa_AF",
    "fi",
    "fil",
    "fo",
    "fr",
    "fr_CA",
    "ga",
    "gl",
    "gu",
    "ha",
    "haw",
    "he",
    "hi",
    "hr",
    "hsb",
    "hu",
    "hy",
    "id",
    "ig",
    "is",
    "it",
    "ja",
    "ka",
    "kk",
    "kl",
    "km",
    "kn",
    "ko",
    "kok",
    "ky",
    "lb",
    "lkt",
    "ln",
    "lo",
    "lt",
    "lv",
    "mk",
    "ml",
    "mn",
    "mr",
    "ms",
    "mt",
    "my",
    "nb",
    "ne",
    "nl",
    "nn",
    "om",
    "or",
    "pa",
    "pl",
    "ps",
    "pt",
    "ro",
    "ru",
    "se",
    "si",
    "sk",
    "sl",
    "smn",
    "sq",
    "sr",
    "sr_Latn",
    "sv",
    "sw",
    "ta",
    "te",
    "th",
    "to",
    "tr",
    "ug",
    "uk",
    "ur",
    "vi",
    "wae",
    "yi",
    "yo",
    "zh",
    "zh_Hant",
    "zu",
    "root",
];

/// `@collation=` variants ICU4X has data for: (locale, ICU keyword value, BCP 47 `co` value).
const VARIANTS: &[(&str, &str, &str)] = &[
    ("ar", "compat", "compat"),
    ("bn", "traditional", "trad"),
    ("de", "phonebook", "phonebk"),
    ("de_AT", "phonebook", "phonebk"),
    ("es", "traditional", "trad"),
    ("fi", "traditional", "trad"),
    ("ja", "unihan", "unihan"),
    ("kn", "traditional", "trad"),
    ("ko", "unihan", "unihan"),
    ("si", "dictionary", "dict"),
    ("vi", "traditional", "trad"),
    ("zh", "pinyin", "pinyin"),
    ("zh", "stroke", "stroke"),
    ("zh", "unihan", "unihan"),
    ("zh", "zhuyin", "zhuyin"),
];

/// `@collation=` values ICU knows but ICU4X's compiled data does not hold.
const MISSING_VARIANTS: &[&str] = &[
    "search",
    "searchjl",
    "big5han",
    "gb2312han",
    "phonetic",
    "direct",
];

/// A parsed, non-simple collation: an ICU4X collator and the spec as mongod resolves it.
pub struct Collation {
    collator: CollatorBorrowed<'static>,
    /// `{locale, caseLevel, caseFirst, strength, numericOrdering, alternate, maxVariable,
    /// normalization, backwards, version}`, with the locale's defaults filled in.
    spec: RawDocumentBuf,
}

impl fmt::Debug for Collation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&display::value(RawBsonRef::Document(&self.spec)))
    }
}

/// `caseFirst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseFirst {
    Upper,
    Lower,
    Off,
}

impl CaseFirst {
    fn name(self) -> &'static str {
        match self {
            CaseFirst::Upper => "upper",
            CaseFirst::Lower => "lower",
            CaseFirst::Off => "off",
        }
    }
}

/// The fields of a collation document, as the IDL reads them.
#[derive(Default)]
struct Fields<'a> {
    locale: Option<&'a str>,
    case_level: Option<bool>,
    case_first: Option<CaseFirst>,
    strength: Option<i32>,
    numeric_ordering: Option<bool>,
    /// `alternate: "shifted"`.
    shifted: Option<bool>,
    /// `maxVariable: "space"` (the default is `"punct"`).
    max_variable_space: Option<bool>,
    normalization: Option<bool>,
    backwards: Option<bool>,
    version: Option<&'a str>,
}

fn wrong_type(field: &str, v: RawBsonRef<'_>, expected: &str) -> CommandError {
    CommandError::type_mismatch(format!(
        "BSON field 'collation.{field}' is the wrong type '{}', expected type{expected}",
        display::type_name(v.element_type())
    ))
}

fn bad_enum(field: &str, value: &str) -> CommandError {
    CommandError::bad_value(format!(
        "Enumeration value '{value}' for field 'collation.{field}' is not a valid value."
    ))
}

/// The IDL `safeInt`: any number, truncated toward zero and clamped to an `i32` (NaN is 0).
fn safe_int(v: RawBsonRef<'_>) -> Option<i32> {
    let clamp = |n: i64| i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX });
    match v {
        RawBsonRef::Int32(n) => Some(n),
        RawBsonRef::Int64(n) => Some(clamp(n)),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => {
            let d = super::compare::number_as_f64(v).unwrap_or(f64::NAN);
            #[expect(
                clippy::cast_possible_truncation,
                reason = "saturating, as safeNumberInt"
            )]
            Some(if d.is_nan() { 0 } else { d as i32 })
        }
        _ => None,
    }
}

fn parse_fields(spec: &RawDocument) -> Result<Fields<'_>, CommandError> {
    let mut f = Fields::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in spec {
        let (key, v) = item.map_err(|e| super::invalid_bson(&e))?;
        let key = key.as_str();
        if seen.contains(&key) {
            return Err(CommandError::new(
                ErrorCode::IDLDuplicateField,
                format!("BSON field 'collation.{key}' is a duplicate field"),
            ));
        }
        seen.push(key);
        let boolean = || match v {
            RawBsonRef::Boolean(b) => Ok(b),
            other => Err(wrong_type(key, other, " 'bool'")),
        };
        let string = || match v {
            RawBsonRef::String(s) => Ok(s),
            other => Err(wrong_type(key, other, " 'string'")),
        };
        match key {
            "locale" => f.locale = Some(string()?),
            "caseLevel" => f.case_level = Some(boolean()?),
            "caseFirst" => {
                f.case_first = Some(match string()? {
                    "upper" => CaseFirst::Upper,
                    "lower" => CaseFirst::Lower,
                    "off" => CaseFirst::Off,
                    other => return Err(bad_enum(key, other)),
                });
            }
            "strength" => {
                let n = safe_int(v)
                    .ok_or_else(|| wrong_type(key, v, "s '[long, int, decimal, double']"))?;
                if !(0..=5).contains(&n) {
                    let bound = if n < 0 { ">= 0" } else { "<= 5" };
                    return Err(CommandError::new(
                        ErrorCode::Location(51024),
                        format!(
                            "BSON field 'collation.strength' value must be {bound}, actual value '{n}'"
                        ),
                    ));
                }
                f.strength = Some(n);
            }
            "numericOrdering" => f.numeric_ordering = Some(boolean()?),
            "alternate" => {
                f.shifted = Some(match string()? {
                    "non-ignorable" => false,
                    "shifted" => true,
                    other => return Err(bad_enum(key, other)),
                });
            }
            "maxVariable" => {
                f.max_variable_space = Some(match string()? {
                    "punct" => false,
                    "space" => true,
                    other => return Err(bad_enum(key, other)),
                });
            }
            "normalization" => f.normalization = Some(boolean()?),
            // An `optionalBool`, whose parser has its own message.
            "backwards" => match v {
                RawBsonRef::Boolean(b) => f.backwards = Some(b),
                other => {
                    return Err(CommandError::type_mismatch(format!(
                        "Field 'backwards' should be a boolean value, but found: {}",
                        display::type_name(other.element_type())
                    )));
                }
            },
            "version" => f.version = Some(string()?),
            other => {
                return Err(CommandError::unknown_field(&format!("collation.{other}")));
            }
        }
    }
    Ok(f)
}

/// ICU's canonical spelling of a locale ID (`EN-us` → `en_US`), for "Did you mean" hints.
fn canonical_id(id: &str) -> String {
    let (base, keywords) = id.split_once('@').map_or((id, None), |(b, k)| (b, Some(k)));
    let parts: Vec<String> = base
        .split(['_', '-'])
        .enumerate()
        .map(|(i, p)| match (i, p.len()) {
            (0, _) => p.to_ascii_lowercase(),
            (_, 4) if p.chars().all(|c| c.is_ascii_alphabetic()) => {
                let lower = p.to_ascii_lowercase();
                let mut chars = lower.chars();
                chars.next().map_or_else(String::new, |c| {
                    c.to_ascii_uppercase().to_string() + chars.as_str()
                })
            }
            _ => p.to_ascii_uppercase(),
        })
        .collect();
    let mut out = parts.join("_");
    if let Some(k) = keywords {
        out.push('@');
        out.push_str(&k.to_ascii_lowercase());
    }
    out
}

/// What a requested locale ID resolves to.
enum LocaleMatch {
    /// A locale Ebb supports, as a BCP 47 tag for ICU4X.
    Supported(String),
    /// A locale ICU knows that ICU4X's data lacks.
    Missing,
    /// Not a locale ID ICU would use as given; the one it would use instead, if not the root.
    Invalid(Option<String>),
}

/// The BCP 47 tag of a supported locale ID; `Err(true)` if ICU knows the ID but ICU4X's data
/// lacks it, `Err(false)` if it is no ID that ICU would use as given.
fn supported_tag(id: &str) -> Result<String, bool> {
    let (base, keywords) = id.split_once('@').map_or((id, None), |(b, k)| (b, Some(k)));
    if !LOCALES.contains(&base) {
        return Err(false);
    }
    let bcp47 = base.replace('_', "-");
    let Some(keywords) = keywords else {
        return Ok(if base == "root" {
            "und".to_owned()
        } else {
            bcp47
        });
    };
    let Some(value) = keywords.strip_prefix("collation=") else {
        return Err(false);
    };
    if let Some((_, _, co)) = VARIANTS.iter().find(|(l, v, _)| *l == base && *v == value) {
        return Ok(format!("{bcp47}-u-co-{co}"));
    }
    Err(MISSING_VARIANTS.contains(&value))
}

fn resolve_locale(id: &str) -> LocaleMatch {
    match supported_tag(id) {
        Ok(tag) => return LocaleMatch::Supported(tag),
        Err(true) => return LocaleMatch::Missing,
        Err(false) => {}
    }
    // ICU falls back to the longest known prefix of the canonical form (the root if none).
    let canonical = canonical_id(id);
    if canonical != id && supported_tag(&canonical).is_ok() {
        return LocaleMatch::Invalid(Some(canonical));
    }
    let mut candidate = canonical.split('@').next().unwrap_or_default();
    let hint = loop {
        if LOCALES.contains(&candidate) {
            break (candidate != "root").then(|| candidate.to_owned());
        }
        match candidate.rfind('_') {
            Some(i) => candidate = &candidate[..i],
            None => break None,
        }
    };
    LocaleMatch::Invalid(hint)
}

impl Collation {
    /// Parses a collation document; `None` for the simple (binary) collation.
    pub fn parse(spec: &RawDocument) -> Result<Option<Collation>, CommandError> {
        let f = parse_fields(spec)?;
        let shown = || display::value(RawBsonRef::Document(spec));
        let Some(locale) = f.locale else {
            return Err(CommandError::missing_field("collation.locale"));
        };
        if locale.contains('\0') {
            return Err(CommandError::bad_value(format!(
                "Field 'locale' cannot contain null byte. Collation spec: {}",
                shown()
            )));
        }
        if locale == "simple" {
            return Ok(None);
        }
        if locale.is_empty() {
            return Err(CommandError::bad_value(format!(
                "Field 'locale' cannot be the empty string in: {}",
                shown()
            )));
        }
        let tag = match resolve_locale(locale) {
            LocaleMatch::Supported(tag) => tag,
            LocaleMatch::Missing => {
                return Err(not_implemented(&format!("the collation locale '{locale}'")));
            }
            LocaleMatch::Invalid(hint) => {
                let hint = hint.map(|h| format!(". Did you mean '{h}'?"));
                return Err(CommandError::bad_value(format!(
                    "Field 'locale' is invalid in: {}{}",
                    shown(),
                    hint.unwrap_or_default()
                )));
            }
        };
        let strength = match f.strength {
            None => None,
            Some(n @ 1..=5) => Some(n),
            Some(n) => {
                return Err(CommandError::bad_value(format!(
                    "Enumeration value '{n}' for field 'collation.strength' is not a valid value."
                )));
            }
        };
        let icu_locale = Locale::try_from_str(&tag)
            .map_err(|e| CommandError::internal(format!("locale {tag}: {e}")))?;
        let mut prefs = CollatorPreferences::from(&icu_locale);
        if let Some(c) = f.case_first {
            prefs.case_first = Some(match c {
                CaseFirst::Upper => CollationCaseFirst::Upper,
                CaseFirst::Lower => CollationCaseFirst::Lower,
                CaseFirst::Off => CollationCaseFirst::False,
            });
        }
        if let Some(n) = f.numeric_ordering {
            prefs.numeric_ordering = Some(if n {
                CollationNumericOrdering::True
            } else {
                CollationNumericOrdering::False
            });
        }
        let mut options = CollatorOptions::default();
        options.strength = strength.map(|n| match n {
            1 => Strength::Primary,
            2 => Strength::Secondary,
            4 => Strength::Quaternary,
            5 => Strength::Identical,
            _ => Strength::Tertiary,
        });
        options.alternate_handling = f.shifted.map(|s| {
            if s {
                AlternateHandling::Shifted
            } else {
                AlternateHandling::NonIgnorable
            }
        });
        options.max_variable = f.max_variable_space.map(|space| {
            if space {
                MaxVariable::Space
            } else {
                MaxVariable::Punctuation
            }
        });
        options.case_level = f
            .case_level
            .map(|on| if on { CaseLevel::On } else { CaseLevel::Off });
        let collator = Collator::try_new(prefs, options)
            .map_err(|e| CommandError::internal(format!("collator for {tag}: {e}")))?;

        // mongod fills in what was not asked for from the collator's defaults for the locale.
        let resolved = collator.resolved_options();
        let strength = strength.unwrap_or(match resolved.strength {
            Strength::Primary => 1,
            Strength::Secondary => 2,
            Strength::Quaternary => 4,
            Strength::Identical => 5,
            _ => 3,
        });
        let case_first = f.case_first.unwrap_or(match resolved.case_first {
            CollationCaseFirst::Upper => CaseFirst::Upper,
            CollationCaseFirst::Lower => CaseFirst::Lower,
            _ => CaseFirst::Off,
        });
        let case_level = resolved.case_level == CaseLevel::On;
        // ICU4X cannot report it: in CLDR only Canadian French compares accents backwards.
        let locale_backwards = locale == "fr_CA";
        let backwards = f.backwards.unwrap_or(locale_backwards);
        if let Some(v) = f.version
            && v != ICU_VERSION
        {
            return Err(CommandError::new(
                ErrorCode::IncompatibleCollationVersion,
                format!(
                    "Requested collation version {v} but the only available collator version \
                     was {ICU_VERSION}. Requested collation spec: {}",
                    shown()
                ),
            ));
        }
        if backwards && strength == 1 {
            return Err(CommandError::bad_value(format!(
                "'backwards' is invalid with 'strength' of 1 in: {}",
                shown()
            )));
        }
        if case_first != CaseFirst::Off && !case_level && strength <= 2 {
            return Err(CommandError::bad_value(format!(
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than \
                 2 in: {}",
                shown()
            )));
        }
        if backwards != locale_backwards {
            return Err(not_implemented(&format!(
                "the collation option 'backwards: {backwards}' with locale '{locale}'"
            )));
        }
        let mut spec = RawDocumentBuf::new();
        spec.append(cstr!("locale"), locale);
        spec.append(cstr!("caseLevel"), case_level);
        spec.append(cstr!("caseFirst"), case_first.name());
        spec.append(cstr!("strength"), strength);
        spec.append(
            cstr!("numericOrdering"),
            resolved.numeric == CollationNumericOrdering::True,
        );
        spec.append(
            cstr!("alternate"),
            if resolved.alternate_handling == AlternateHandling::Shifted {
                "shifted"
            } else {
                "non-ignorable"
            },
        );
        spec.append(
            cstr!("maxVariable"),
            if resolved.max_variable == MaxVariable::Space {
                "space"
            } else {
                "punct"
            },
        );
        spec.append(cstr!("normalization"), f.normalization.unwrap_or(false));
        spec.append(cstr!("backwards"), backwards);
        spec.append(cstr!("version"), ICU_VERSION);
        Ok(Some(Collation { collator, spec }))
    }

    /// Reads a command's `collation` option (`path` names it in errors, as `find.collation`):
    /// a document, parsed; `None` for the simple collation.
    pub fn from_option(
        path: &str,
        value: RawBsonRef<'_>,
    ) -> Result<Option<Arc<Collation>>, CommandError> {
        match value {
            RawBsonRef::Document(d) => Ok(Collation::parse(d)?.map(Arc::new)),
            other => Err(CommandError::type_mismatch(format!(
                "BSON field '{path}' is the wrong type '{}', expected type 'object'",
                display::type_name(other.element_type())
            ))),
        }
    }

    /// The collation as mongod reports it, with the locale's defaults filled in.
    pub fn spec(&self) -> &RawDocument {
        &self.spec
    }

    /// Compares two strings.
    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// The sort key of a string: byte strings that compare as [`Collation::compare`] compares
    /// the strings (equal keys for equal strings), for hashing and grouping.
    pub fn sort_key(&self, s: &str) -> Vec<u8> {
        let mut key = Vec::new();
        let Ok(()) = self.collator.write_sort_key_to(s, &mut key);
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawDocumentBuf, rawdoc};

    fn coll(spec: &RawDocumentBuf) -> Collation {
        Collation::parse(spec).unwrap().unwrap()
    }

    #[test]
    fn parse_errors() {
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {},
                ErrorCode::IDLFailedToParse,
                "BSON field 'collation.locale' is missing but a required field",
            ),
            (
                rawdoc! {"strength": 2},
                ErrorCode::IDLFailedToParse,
                "BSON field 'collation.locale' is missing but a required field",
            ),
            (
                rawdoc! {"locale": 1},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.locale' is the wrong type 'int', expected type 'string'",
            ),
            (
                rawdoc! {"locale": "en", "foo": 1},
                ErrorCode::IDLUnknownField,
                "BSON field 'collation.foo' is an unknown field.",
            ),
            (
                rawdoc! {"locale": "simple", "foo": 1},
                ErrorCode::IDLUnknownField,
                "BSON field 'collation.foo' is an unknown field.",
            ),
            (
                rawdoc! {"locale": "en", "locale": "fr"},
                ErrorCode::IDLDuplicateField,
                "BSON field 'collation.locale' is a duplicate field",
            ),
            (
                rawdoc! {"locale": "en", "caseLevel": 1},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.caseLevel' is the wrong type 'int', expected type 'bool'",
            ),
            (
                rawdoc! {"locale": "en", "numericOrdering": "yes"},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.numericOrdering' is the wrong type 'string', expected \
                 type 'bool'",
            ),
            (
                rawdoc! {"locale": "en", "normalization": null},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.normalization' is the wrong type 'null', expected type \
                 'bool'",
            ),
            (
                rawdoc! {"locale": "en", "caseFirst": "first"},
                ErrorCode::BadValue,
                "Enumeration value 'first' for field 'collation.caseFirst' is not a valid value.",
            ),
            (
                rawdoc! {"locale": "en", "caseFirst": 1},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.caseFirst' is the wrong type 'int', expected type 'string'",
            ),
            (
                rawdoc! {"locale": "en", "alternate": "blanked"},
                ErrorCode::BadValue,
                "Enumeration value 'blanked' for field 'collation.alternate' is not a valid \
                 value.",
            ),
            (
                rawdoc! {"locale": "en", "maxVariable": "symbol"},
                ErrorCode::BadValue,
                "Enumeration value 'symbol' for field 'collation.maxVariable' is not a valid \
                 value.",
            ),
            (
                rawdoc! {"locale": "en", "strength": "1"},
                ErrorCode::TypeMismatch,
                "BSON field 'collation.strength' is the wrong type 'string', expected types \
                 '[long, int, decimal, double']",
            ),
            (
                rawdoc! {"locale": "en", "strength": 6},
                ErrorCode::Location(51024),
                "BSON field 'collation.strength' value must be <= 5, actual value '6'",
            ),
            (
                rawdoc! {"locale": "en", "strength": -1},
                ErrorCode::Location(51024),
                "BSON field 'collation.strength' value must be >= 0, actual value '-1'",
            ),
            (
                rawdoc! {"locale": "en", "strength": 0},
                ErrorCode::BadValue,
                "Enumeration value '0' for field 'collation.strength' is not a valid value.",
            ),
            (
                rawdoc! {"locale": "en", "backwards": 1},
                ErrorCode::TypeMismatch,
                "Field 'backwards' should be a boolean value, but found: int",
            ),
            (
                rawdoc! {"locale": ""},
                ErrorCode::BadValue,
                "Field 'locale' cannot be the empty string in: { locale: \"\" }",
            ),
            (
                rawdoc! {"locale": "xx"},
                ErrorCode::BadValue,
                "Field 'locale' is invalid in: { locale: \"xx\" }",
            ),
            (
                rawdoc! {"locale": "en_XX"},
                ErrorCode::BadValue,
                "Field 'locale' is invalid in: { locale: \"en_XX\" }. Did you mean 'en'?",
            ),
            (
                rawdoc! {"locale": "fr-CA"},
                ErrorCode::BadValue,
                "Field 'locale' is invalid in: { locale: \"fr-CA\" }. Did you mean 'fr_CA'?",
            ),
            (
                rawdoc! {"locale": "DE@collation=phonebook"},
                ErrorCode::BadValue,
                "Field 'locale' is invalid in: { locale: \"DE@collation=phonebook\" }. Did you \
                 mean 'de@collation=phonebook'?",
            ),
            (
                rawdoc! {"locale": "es@collation=search"},
                ErrorCode::NotImplemented,
                "the collation locale 'es@collation=search' is not supported by Ebb yet",
            ),
            (
                rawdoc! {"locale": "en", "version": "1.0"},
                ErrorCode::IncompatibleCollationVersion,
                "Requested collation version 1.0 but the only available collator version was \
                 57.1. Requested collation spec: { locale: \"en\", version: \"1.0\" }",
            ),
            (
                rawdoc! {"locale": "en", "strength": 1, "backwards": true},
                ErrorCode::BadValue,
                "'backwards' is invalid with 'strength' of 1 in: { locale: \"en\", strength: 1, \
                 backwards: true }",
            ),
            (
                rawdoc! {"locale": "en", "strength": 2, "caseFirst": "upper"},
                ErrorCode::BadValue,
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than 2 \
                 in: { locale: \"en\", strength: 2, caseFirst: \"upper\" }",
            ),
            (
                // fr_CA compares accents backwards by default, which strength 1 cannot honour.
                rawdoc! {"locale": "fr_CA", "strength": 1},
                ErrorCode::BadValue,
                "'backwards' is invalid with 'strength' of 1 in: { locale: \"fr_CA\", strength: \
                 1 }",
            ),
            (
                rawdoc! {"locale": "en", "backwards": true},
                ErrorCode::NotImplemented,
                "the collation option 'backwards: true' with locale 'en' is not supported by Ebb \
                 yet",
            ),
        ];
        for (spec, code, msg) in cases {
            let err = Collation::parse(&spec).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{spec:?}");
        }
    }

    #[test]
    fn simple_and_accepted_specs() {
        assert!(
            Collation::parse(&rawdoc! {"locale": "simple"})
                .unwrap()
                .is_none()
        );
        // mongod 7.0 type-checks the other fields of a simple collation but ignores them.
        assert!(
            Collation::parse(&rawdoc! {"locale": "simple", "strength": 2})
                .unwrap()
                .is_none()
        );
        let accepted = [
            rawdoc! {"locale": "en"},
            rawdoc! {"locale": "en_US", "strength": 2.0},
            rawdoc! {"locale": "en_US_POSIX"},
            rawdoc! {"locale": "de@collation=phonebook"},
            rawdoc! {"locale": "zh_Hant"},
            rawdoc! {"locale": "root"},
            rawdoc! {"locale": "fr_CA", "backwards": true},
            rawdoc! {"locale": "fr", "backwards": false, "normalization": true},
            rawdoc! {"locale": "en", "strength": 1, "caseLevel": true, "caseFirst": "upper"},
            rawdoc! {"locale": "en", "version": "57.1", "alternate": "shifted", "maxVariable": "space"},
        ];
        for spec in accepted {
            assert!(Collation::parse(&spec).unwrap().is_some(), "{spec:?}");
        }
        let c = coll(&rawdoc! {"locale": "en", "strength": 2});
        assert_eq!(
            c.spec().to_owned(),
            rawdoc! {
                "locale": "en", "caseLevel": false, "caseFirst": "off", "strength": 2,
                "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
                "normalization": false, "backwards": false, "version": "57.1",
            }
        );
    }

    #[test]
    fn comparisons() {
        use Ordering::{Equal, Greater, Less};
        let cases: Vec<(RawDocumentBuf, &str, &str, Ordering)> = vec![
            // Strength 1: base letters only.
            (rawdoc! {"locale": "en", "strength": 1}, "a", "A", Equal),
            (rawdoc! {"locale": "en", "strength": 1}, "e", "é", Equal),
            (
                rawdoc! {"locale": "en", "strength": 1},
                "Straße",
                "STRASSE",
                Equal,
            ),
            (rawdoc! {"locale": "en", "strength": 1}, "a", "b", Less),
            // Strength 2: accents count, case does not.
            (rawdoc! {"locale": "en", "strength": 2}, "a", "A", Equal),
            (rawdoc! {"locale": "en", "strength": 2}, "e", "é", Less),
            (rawdoc! {"locale": "en", "strength": 2}, "Ä", "ä", Equal),
            // Strength 3 (the default): lower case first.
            (rawdoc! {"locale": "en"}, "a", "A", Less),
            (rawdoc! {"locale": "en", "strength": 3}, "a", "A", Less),
            (rawdoc! {"locale": "en"}, "B", "a", Greater),
            (rawdoc! {"locale": "en"}, "a", "a", Equal),
            // caseFirst upper.
            (
                rawdoc! {"locale": "en", "caseFirst": "upper"},
                "A",
                "a",
                Less,
            ),
            (
                rawdoc! {"locale": "en", "caseFirst": "lower"},
                "A",
                "a",
                Greater,
            ),
            // caseLevel at strength 1: case matters, accents do not.
            (
                rawdoc! {"locale": "en", "strength": 1, "caseLevel": true},
                "a",
                "A",
                Less,
            ),
            (
                rawdoc! {"locale": "en", "strength": 1, "caseLevel": true},
                "e",
                "é",
                Equal,
            ),
            // numericOrdering.
            (rawdoc! {"locale": "en"}, "10", "9", Less),
            (
                rawdoc! {"locale": "en", "numericOrdering": true},
                "10",
                "9",
                Greater,
            ),
            (
                rawdoc! {"locale": "en", "numericOrdering": true},
                "a2",
                "a10",
                Less,
            ),
            // alternate shifted: punctuation and spaces are ignored at strength <= 3.
            (rawdoc! {"locale": "en"}, "a-b", "ab", Less),
            (
                rawdoc! {"locale": "en", "alternate": "shifted"},
                "a-b",
                "ab",
                Equal,
            ),
            (
                rawdoc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"},
                "a b",
                "ab",
                Equal,
            ),
            (
                rawdoc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"},
                "a-b",
                "ab",
                Less,
            ),
            // Identical strength tells apart what every level ties.
            (rawdoc! {"locale": "en", "strength": 5}, "a", "a", Equal),
            // Tailorings: Swedish sorts ä after z; German phonebook sorts ä as ae.
            (rawdoc! {"locale": "sv"}, "ä", "z", Greater),
            (rawdoc! {"locale": "de"}, "ä", "z", Less),
            (
                rawdoc! {"locale": "de@collation=phonebook", "strength": 1},
                "ä",
                "ae",
                Equal,
            ),
        ];
        for (spec, a, b, want) in cases {
            let c = coll(&spec);
            assert_eq!(c.compare(a, b), want, "{spec:?}: {a} vs {b}");
            assert_eq!(c.compare(b, a), want.reverse(), "{spec:?}: {b} vs {a}");
            assert_eq!(
                c.sort_key(a).cmp(&c.sort_key(b)),
                want,
                "{spec:?}: sort keys of {a} vs {b}"
            );
        }
    }

    #[test]
    fn option_type() {
        let err = Collation::from_option("find.collation", RawBsonRef::String("en")).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::TypeMismatch,
                "BSON field 'find.collation' is the wrong type 'string', expected type 'object'"
            )
        );
        let doc = rawdoc! {"locale": "simple"};
        assert!(
            Collation::from_option("find.collation", RawBsonRef::Document(&doc))
                .unwrap()
                .is_none()
        );
    }
}
