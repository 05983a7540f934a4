//! MongoDB's `$regex` (PCRE2 syntax) on top of the `regex` crate.
//!
//! mongod compiles patterns with PCRE2 in UTF mode, with the options `i` (caseless), `m`
//! (multiline), `s` (dot matches newline), `x` (extended) and `u` (accepted, no effect). The
//! `regex` crate guarantees linear-time matching, which PCRE cannot; in exchange it has no
//! backtracking-only features. [`Regex::compile`] translates the PCRE syntax the two share and
//! rewrites the differences that matter for matching:
//!
//! - `\d \w \s \b` are ASCII-only in PCRE without UCP (the `regex` crate's are Unicode);
//! - a `$` without `m` also matches before a final newline (`/a$/` matches `"a\n"`), and `\Z`
//!   is end-or-before-final-newline;
//! - `x` ignores whitespace and `#` comments outside character classes only;
//! - inside a class, `[` is literal (not a nested class) and `&&`, `~~` are not operators;
//! - `{` that does not start a valid quantifier (`{n}`, `{n,}`, `{n,m}`) is a literal;
//! - `\Q…\E` quotes, `(?#…)` comments, `(?'name'…)` groups, `\h \v \R \N \e \cX \0oo`.
//!
//! Constructs that need backtracking are rejected with mongod's "Regular expression is
//! invalid" error (code 51091) naming the construct: lookahead and lookbehind, backreferences
//! (`\1`, `\k<n>`, `\g{n}`, `(?P=n)`), atomic groups, possessive quantifiers, recursion and
//! subroutine calls, conditionals, branch reset, backtracking verbs (`(*…)`), `\K`, `\G`, `\X`,
//! `\C`. Other malformed patterns get the same code with the `regex` crate's message (mongod's
//! text is PCRE2's, so only the code and prefix are comparable).

use std::fmt::Write;

use bson::RawBsonRef;

use crate::error::{CommandError, ErrorCode};

/// The longest pattern, in bytes, mongod 7.0 compiles: the `max_pattern_length` it gives PCRE2
/// (`kMaxPatternLength` in `src/mongo/util/pcre.cpp`). The options letters do not count.
pub const MAX_PATTERN_LENGTH: usize = 16_384;

/// PCRE2's message for a pattern over the application's limit (its error 188), which mongod
/// passes on.
const PATTERN_TOO_LONG: &str = "pattern string is longer than the limit set by the application";

/// A compiled MongoDB regular expression.
#[derive(Debug, Clone)]
pub struct Regex {
    pattern: String,
    options: String,
    re: regex::Regex,
}

fn invalid(msg: impl std::fmt::Display) -> CommandError {
    CommandError::new(
        ErrorCode::Location(51091),
        format!("Regular expression is invalid: {msg}"),
    )
}

fn unsupported(what: &str) -> CommandError {
    invalid(format!(
        "{what} are not supported by Ebb (its regex engine never backtracks)"
    ))
}

impl Regex {
    /// Compiles `pattern` with MongoDB's `options` letters, with mongod's checks and errors.
    pub fn compile(pattern: &str, options: &str) -> Result<Regex, CommandError> {
        if pattern.contains('\0') {
            return Err(CommandError::bad_value(
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        if options.contains('\0') {
            return Err(CommandError::bad_value(
                "Regular expression options string cannot contain an embedded null byte",
            ));
        }
        let (mut i, mut m, mut s, mut x) = (false, false, false, false);
        for c in options.chars() {
            match c {
                'i' => i = true,
                'm' => m = true,
                's' => s = true,
                'x' => x = true,
                'u' => {}
                other => {
                    // mongod prefixes the operator name, which is empty for query `$regex`.
                    return Err(CommandError::new(
                        ErrorCode::Location(51108),
                        format!(" invalid flag in regex options: {other}"),
                    ));
                }
            }
        }
        // PCRE2 refuses the pattern before parsing it, and mongod reports that as any other
        // compile error.
        if pattern.len() > MAX_PATTERN_LENGTH {
            return Err(invalid(PATTERN_TOO_LONG));
        }
        let translated = translate(pattern, x)?;
        let re = regex::RegexBuilder::new(&translated)
            .case_insensitive(i)
            .multi_line(m)
            .dot_matches_new_line(s)
            .build()
            .map_err(|e| {
                let text = e.to_string();
                let last = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or(&text)
                    .trim()
                    .trim_start_matches("error: ")
                    .to_owned();
                invalid(last)
            })?;
        Ok(Regex {
            pattern: pattern.to_owned(),
            options: options.to_owned(),
            re,
        })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The option letters as written.
    pub fn options(&self) -> &str {
        &self.options
    }

    /// The compiled pattern, for operators that need match positions and captures
    /// (`$regexFind`).
    pub(crate) fn engine(&self) -> &regex::Regex {
        &self.re
    }

    /// Whether the pattern matches somewhere in `s`.
    pub fn is_match(&self, s: &str) -> bool {
        self.re.is_match(s)
    }

    /// mongod's `RegexMatchExpression::matchesSingleElement`: strings and symbols are searched;
    /// a regex value matches when its pattern and options are the same; nothing else matches.
    pub fn matches_value(&self, v: RawBsonRef<'_>) -> bool {
        match v {
            RawBsonRef::String(s) | RawBsonRef::Symbol(s) => self.is_match(s),
            RawBsonRef::RegularExpression(r) => {
                r.pattern.as_str() == self.pattern && r.options.as_str() == self.options
            }
            _ => false,
        }
    }
}

const VSPACE: &str = r"\n\x0B\x0C\r\x{85}\x{2028}\x{2029}";
const HSPACE: &str = r"\t \xA0\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}";

/// Rewrites a PCRE2 pattern into the `regex` crate's syntax (see the module documentation).
fn translate(pattern: &str, extended: bool) -> Result<String, CommandError> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                i = escape(&chars, i, false, &mut out)?;
                continue;
            }
            '[' => {
                i = class(&chars, i, &mut out)?;
                continue;
            }
            '(' => {
                i = group(&chars, i, &mut out)?;
                continue;
            }
            '$' => out.push_str(r"(?:$|\n\z)"),
            '{' => {
                if let Some(end) = quantifier_end(&chars, i) {
                    out.extend(&chars[i..=end]);
                    i = end + 1;
                    check_possessive(&chars, i)?;
                    continue;
                }
                out.push_str(r"\{");
            }
            '}' => out.push_str(r"\}"),
            '*' | '+' | '?' => {
                out.push(c);
                check_possessive(&chars, i + 1)?;
            }
            '#' if extended => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r' if extended => {}
            _ => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

/// A `+` right after a quantifier makes it possessive.
fn check_possessive(chars: &[char], i: usize) -> Result<(), CommandError> {
    if chars.get(i) == Some(&'+') {
        return Err(unsupported("possessive quantifiers"));
    }
    Ok(())
}

/// The index of the `}` closing a valid PCRE quantifier starting at `chars[start] == '{'`.
fn quantifier_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    let digits = |i: &mut usize| {
        let from = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    if !digits(&mut i) {
        return None;
    }
    if chars.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (chars.get(i) == Some(&'}')).then_some(i)
}

/// Translates the escape at `chars[i] == '\\'`; returns the index after it.
fn escape(
    chars: &[char],
    i: usize,
    in_class: bool,
    out: &mut String,
) -> Result<usize, CommandError> {
    let Some(&c) = chars.get(i + 1) else {
        return Err(invalid("\\ at end of pattern"));
    };
    let mut next = i + 2;
    match c {
        'd' | 'D' | 'w' | 'W' | 's' | 'S' => {
            let name = match c.to_ascii_lowercase() {
                'd' => "digit",
                'w' => "word",
                _ => "space",
            };
            let neg = if c.is_ascii_uppercase() { "^" } else { "" };
            if in_class {
                let _ = write!(out, "[:{neg}{name}:]");
            } else {
                let _ = write!(out, "[[:{neg}{name}:]]");
            }
        }
        'b' if in_class => out.push_str(r"\x08"),
        'b' | 'B' => {
            let _ = write!(out, "(?-u:\\{c})");
        }
        'h' | 'H' | 'v' | 'V' => {
            let set = if c.eq_ignore_ascii_case(&'h') {
                HSPACE
            } else {
                VSPACE
            };
            match (in_class, c.is_ascii_lowercase()) {
                (true, true) => out.push_str(set),
                (true, false) => {
                    return Err(invalid(format!(
                        "\\{c} inside a character class is not supported by Ebb"
                    )));
                }
                (false, true) => {
                    let _ = write!(out, "[{set}]");
                }
                (false, false) => {
                    let _ = write!(out, "[^{set}]");
                }
            }
        }
        'N' if !in_class => out.push_str(r"[^\n]"),
        'R' if !in_class => {
            let _ = write!(out, r"(?:\r\n|[{VSPACE}])");
        }
        'Z' if !in_class => out.push_str(r"(?:\z|\n\z)"),
        'e' => out.push_str(r"\x1B"),
        'c' => {
            let Some(&x) = chars.get(i + 2) else {
                return Err(invalid("\\c at end of pattern"));
            };
            if !x.is_ascii() {
                return Err(invalid("\\c must be followed by an ASCII character"));
            }
            let code = u32::from(x.to_ascii_uppercase()) ^ 0x40;
            let _ = write!(out, "\\x{{{code:X}}}");
            next = i + 3;
        }
        '0' => {
            let mut value = 0_u32;
            let mut j = i + 2;
            while j < i + 4 && chars.get(j).is_some_and(|d| ('0'..='7').contains(d)) {
                value = value * 8 + chars[j].to_digit(8).unwrap_or(0);
                j += 1;
            }
            let _ = write!(out, "\\x{{{value:X}}}");
            next = j;
        }
        '1'..='9' => return Err(unsupported("backreferences")),
        'g' | 'k' => return Err(unsupported("backreferences")),
        'K' | 'G' | 'X' | 'C' => {
            return Err(invalid(format!("\\{c} is not supported by Ebb")));
        }
        'Q' => {
            let mut j = i + 2;
            while j < chars.len() && !(chars[j] == '\\' && chars.get(j + 1) == Some(&'E')) {
                push_literal(chars[j], in_class, out);
                j += 1;
            }
            next = if j < chars.len() { j + 2 } else { j };
        }
        // `\E` without `\Q` is ignored by PCRE.
        'E' => {}
        c if c.is_ascii_alphanumeric() => {
            // Shared escapes (`\n`, `\t`, `\x..`, `\p{..}`, `\A`, `\z`, …) pass through; the
            // rest are errors in both engines.
            out.push('\\');
            out.push(c);
        }
        c => push_literal(c, in_class, out),
    }
    Ok(next)
}

/// A character that must match itself.
fn push_literal(c: char, in_class: bool, out: &mut String) {
    if in_class && matches!(c, '[' | ']' | '\\' | '^' | '-' | '&' | '~') {
        out.push('\\');
        out.push(c);
    } else if !in_class {
        out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
    } else {
        out.push(c);
    }
}

/// Translates a character class starting at `chars[i] == '['`; returns the index after it.
fn class(chars: &[char], start: usize, out: &mut String) -> Result<usize, CommandError> {
    let mut i = start + 1;
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    // A `]` first in the class is a literal.
    if chars.get(i) == Some(&']') {
        out.push_str(r"\]");
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            ']' => {
                out.push(']');
                return Ok(i + 1);
            }
            '\\' => {
                i = escape(chars, i, true, out)?;
                continue;
            }
            '[' => {
                // POSIX classes `[:name:]` / `[:^name:]` are shared; any other `[` is literal.
                if chars.get(i + 1) == Some(&':')
                    && let Some(len) = chars[i + 2..].windows(2).position(|w| w == [':', ']'])
                {
                    out.extend(&chars[i..i + 2 + len + 2]);
                    i += len + 4;
                    continue;
                }
                out.push_str(r"\[");
            }
            '&' | '~' => {
                out.push('\\');
                out.push(chars[i]);
            }
            '-' if chars.get(i + 1) == Some(&'-') => out.push_str(r"\-"),
            c => out.push(c),
        }
        i += 1;
    }
    Err(invalid("missing terminating ] for character class"))
}

/// Translates a group opening at `chars[i] == '('`; returns the index after the opening.
fn group(chars: &[char], start: usize, out: &mut String) -> Result<usize, CommandError> {
    let rest = &chars[start + 1..];
    let starts = |p: &str| {
        let p: Vec<char> = p.chars().collect();
        rest.starts_with(&p)
    };
    if starts("*") {
        return Err(unsupported("backtracking control verbs"));
    }
    if !starts("?") {
        out.push('(');
        return Ok(start + 1);
    }
    if starts("?#") {
        let Some(end) = rest.iter().position(|&c| c == ')') else {
            return Err(invalid("missing ) after (?# comment"));
        };
        return Ok(start + 1 + end + 1);
    }
    if starts("?=") || starts("?!") || starts("?<=") || starts("?<!") {
        return Err(unsupported("lookahead and lookbehind assertions"));
    }
    if starts("?>") {
        return Err(unsupported("atomic groups"));
    }
    if starts("?|") {
        return Err(unsupported("branch reset groups"));
    }
    if starts("?(") {
        return Err(unsupported("conditional groups"));
    }
    if starts("?P=") {
        return Err(unsupported("backreferences"));
    }
    if starts("?R") || starts("?&") || starts("?P>") || starts("?+") {
        return Err(unsupported("recursion and subroutine calls"));
    }
    if rest.get(1).is_some_and(|c| {
        c.is_ascii_digit() || (*c == '-' && rest.get(2).is_some_and(char::is_ascii_digit))
    }) {
        return Err(unsupported("recursion and subroutine calls"));
    }
    if starts("?'") {
        let Some(end) = rest[2..].iter().position(|&c| c == '\'') else {
            return Err(invalid(
                "syntax error in subpattern name (missing terminator?)",
            ));
        };
        out.push_str("(?<");
        out.extend(&rest[2..2 + end]);
        out.push('>');
        return Ok(start + 1 + 2 + end + 1);
    }
    out.push('(');
    Ok(start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_table() {
        let cases: &[(&str, &str, &str, bool)] = &[
            ("abc", "", "xabcx", true),
            ("^abc", "", "xabc", false),
            ("ABC", "i", "xabc", true),
            ("a.c", "", "a\nc", false),
            ("a.c", "s", "a\nc", true),
            ("^c", "m", "ab\nc", true),
            ("^c", "", "ab\nc", false),
            ("a$", "", "a\n", true),
            ("a$", "", "a\nb", false),
            ("a$", "m", "a\nb", true),
            ("a\\Z", "", "a\n", true),
            ("a\\z", "", "a\n", false),
            ("a  b # tail", "x", "ab", true),
            ("a\\ b", "x", "a b", true),
            ("[ ]", "x", " ", true),
            ("[]a]", "", "]", true),
            ("[^]a]", "", "]", false),
            ("[[]", "", "[", true),
            ("[a&&b]", "", "&", true),
            ("\\d+", "", "١٢", false),
            ("\\d+", "", "12", true),
            ("[\\d]", "", "7", true),
            ("[^\\D]", "", "7", true),
            ("\\w", "", "é", false),
            ("\\bfoo\\b", "", "a foo b", true),
            ("é", "u", "café", true),
            ("(?P<n>a)b", "", "ab", true),
            ("(?'n'a)b", "", "ab", true),
            ("a(?#comment)b", "", "ab", true),
            ("a{", "", "a{", true),
            ("x{1,2}", "", "xx", true),
            ("{foo}", "", "{foo}", true),
            ("\\Qa.b\\E", "", "a.b", true),
            ("\\Qa.b\\E", "", "axb", false),
            ("\\/", "", "/", true),
            ("\\<", "", "<", true),
            ("a\\hb", "", "a b", true),
            ("\\x41", "", "A", true),
            ("\\012", "", "\n", true),
            ("\\cA", "", "\u{1}", true),
            ("", "", "anything", true),
            ("a#b", "", "a#b", true),
            ("a b", "", "a b", true),
        ];
        for &(pattern, options, subject, want) in cases {
            let re = Regex::compile(pattern, options)
                .unwrap_or_else(|e| panic!("/{pattern}/{options}: {e:?}"));
            assert_eq!(
                re.is_match(subject),
                want,
                "/{pattern}/{options} on {subject:?}"
            );
        }
    }

    #[test]
    fn error_table() {
        let long = "a".repeat(MAX_PATTERN_LENGTH + 1);
        // Bytes, not characters: 8,193 two-byte characters are over the limit.
        let wide = "é".repeat(MAX_PATTERN_LENGTH / 2 + 1);
        let long_with_null = format!("{long}\0");
        let cases: Vec<(&str, &str, ErrorCode, &str)> = vec![
            (
                "(",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: ",
            ),
            (
                "a(?=b)",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: lookahead and lookbehind assertions",
            ),
            (
                "a(?<!b)",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: lookahead and lookbehind",
            ),
            (
                "(a)\\1",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: backreferences",
            ),
            (
                "(?>a)",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: atomic groups",
            ),
            (
                "a*+",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: possessive",
            ),
            (
                "(?R)",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: recursion",
            ),
            (
                "[a",
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: missing",
            ),
            (
                "a",
                "g",
                ErrorCode::Location(51108),
                " invalid flag in regex options: g",
            ),
            (
                "a\0b",
                "",
                ErrorCode::BadValue,
                "Regular expression cannot contain an embedded null byte",
            ),
            (
                "a",
                "i\0",
                ErrorCode::BadValue,
                "Regular expression options string cannot contain an embedded null byte",
            ),
            (
                &long,
                "i",
                ErrorCode::Location(51091),
                "Regular expression is invalid: pattern string is longer than the limit set by \
                 the application",
            ),
            (
                &wide,
                "",
                ErrorCode::Location(51091),
                "Regular expression is invalid: pattern string is longer than the limit",
            ),
            // The null byte is checked first, as mongod does.
            (
                &long_with_null,
                "",
                ErrorCode::BadValue,
                "Regular expression cannot contain an embedded null byte",
            ),
        ];
        // The limit itself is accepted.
        assert!(Regex::compile(&"a".repeat(MAX_PATTERN_LENGTH), "").is_ok());
        for (pattern, options, code, prefix) in cases {
            let err = Regex::compile(pattern, options).unwrap_err();
            assert_eq!(err.code, code, "/{pattern}/{options}: {}", err.errmsg);
            assert!(
                err.errmsg.starts_with(prefix),
                "/{pattern}/{options}: {}",
                err.errmsg
            );
        }
    }

    #[test]
    fn values() {
        let re = Regex::compile("^a", "i").unwrap();
        assert!(re.matches_value(RawBsonRef::String("Abc")));
        assert!(re.matches_value(RawBsonRef::Symbol("abc")));
        assert!(!re.matches_value(RawBsonRef::Int32(1)));
        let lit = crate::query::testutil::regex("^a", "i");
        assert!(re.matches_value(lit.as_raw_bson_ref()));
        let other = crate::query::testutil::regex("^a", "");
        assert!(!re.matches_value(other.as_raw_bson_ref()));
    }
}
