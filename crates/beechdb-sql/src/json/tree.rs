//! JSON as SQLite keeps it: a tree whose numbers and strings hold their text as written, so
//! that a document comes back out as it went in (SQLite's JSONB keeps the same: `32.40`,
//! `1E5`, `"\u00e9"` are not rewritten), with objects that may repeat a key (the first is
//! the one found). Parsing is a port of SQLite's `jsonTranslateTextToBlob` (json.c): RFC
//! 8259 JSON, and JSON5 (comments, single quotes, unquoted keys, hex integers, `.5`, `5.`,
//! `+1`, `Infinity`, `NaN`, trailing commas, JSON5 escapes), marked non-standard for
//! `json_valid`. Writing is `jsonTranslateBlobToText`: JSON5 forms become RFC 8259 JSON.
//!
//! [`extract`] reads one value by a path with the same parser, building that value alone; it
//! goes through the values it only checks, and along the path, by a quicker reader of RFC
//! 8259 JSON that hands anything else back to the parser.
//!
//! Owns: [`Node`], [`Text`], [`parse`], [`extract`], the writers and the reading of a
//! string's escapes.
//! May call: nothing of the crate. Invariant: every `Text` of kind `Json` or `Json5` holds
//! text its parser accepted (so its escapes are well formed); nesting is at most
//! [`MAX_DEPTH`] deep, which bounds every recursion over a tree.

use compact_str::CompactString;

/// How deep arrays and objects may nest (SQLite's `JSON_MAX_DEPTH`).
const MAX_DEPTH: usize = 1000;

/// What a number's text is: `Int` and `Real` are RFC 8259 numbers, written as they are;
/// `Hex` (`0x1F`) and `Real5` (`.5`, `5.`) are JSON5 forms, rewritten when written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    Int,
    Hex,
    Real,
    Real5,
}

/// How a string's text is written: `Json` as valid JSON between quotes (escapes as given),
/// `Json5` with JSON5 escapes or characters JSON does not allow (rewritten when written),
/// `Raw` as plain text from SQL (escaped when written).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Esc {
    Json,
    Json5,
    Raw,
}

/// A string or an object's key.
#[derive(Clone, Debug)]
pub(crate) struct Text {
    pub text: CompactString,
    pub esc: Esc,
}

impl Text {
    pub(crate) fn raw(text: &str) -> Text {
        Text {
            text: text.into(),
            esc: Esc::Raw,
        }
    }

    /// The text a string means, its escapes read (SQLite's `jsonUnescapeOneChar`).
    pub(crate) fn value(&self) -> String {
        match self.esc {
            Esc::Raw => self.text.to_string(),
            Esc::Json | Esc::Json5 => unescape(&self.text),
        }
    }

    /// Whether two keys say the same (SQLite's `jsonLabelCompare`: by what they mean).
    pub(crate) fn same(&self, other: &Text) -> bool {
        let plain = |t: &Text| t.esc == Esc::Raw || !t.text.contains('\\');
        match plain(self) && plain(other) {
            true => self.text == other.text,
            false => self.value() == other.value(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Null,
    True,
    False,
    Num(Num, CompactString),
    Str(Text),
    Array(Vec<Node>),
    Object(Vec<(Text, Node)>),
}

/// A parsed document, and whether it used anything beyond RFC 8259 (JSON5).
pub(crate) struct Parsed {
    pub node: Node,
    pub nonstandard: bool,
}

/// `text` parsed as SQLite parses JSON text (it stops at a zero byte), or `None` when it is
/// malformed.
pub(crate) fn parse(text: &str) -> Option<Parsed> {
    let mut p = Parser::new(text, Mode::Build);
    let node = p.document()?;
    Some(Parsed {
        node,
        nonstandard: p.nonstandard,
    })
}

/// One step of a path that [`extract`] follows: a member by its key (the first of that
/// name, keys compared as [`Text::same`] does), or an array's element by its index.
pub(crate) enum Seek {
    Key(Text),
    Index(usize),
}

/// The value at `path` in `text`, built alone: `Some(None)` when the document holds none
/// there, `None` when it is malformed. The whole document is checked by the same parser as
/// [`parse`], so it refuses exactly what `parse` refuses; but only the value found is built,
/// so no tree of the rest is made and dropped (most of a `json_extract` of a document read
/// once).
pub(crate) fn extract(text: &str, path: &[Seek]) -> Option<Option<Node>> {
    if path.is_empty() {
        return parse(text).map(|p| Some(p.node));
    }
    let mut p = Parser::new(text, Mode::Seek(path));
    p.document()?;
    Some(p.found)
}

/// What the parser does with the value it is at: builds it, only checks it, or looks inside
/// it for the rest of a path (every other value inside is only checked).
#[derive(Clone, Copy)]
enum Mode<'p> {
    Build,
    Check,
    Seek(&'p [Seek]),
}

/// What [`Parser::value`] found at a position: a value and where it ends, one of the
/// punctuation marks that end or separate values (with its position), or an error.
enum Got {
    Value(Node, usize),
    End,
    CloseObject(usize),
    CloseArray(usize),
    Comma(usize),
    Colon(usize),
    Error,
}

struct Parser<'a, 'p> {
    /// The document up to its first NUL.
    s: &'a str,
    nonstandard: bool,
    depth: usize,
    /// What to do with the value being parsed.
    mode: Mode<'p>,
    /// The value a path led to ([`extract`]).
    found: Option<Node>,
}

/// JSON's four whitespace bytes (SQLite's `jsonIsspace`).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A byte that may start (`id1`) or continue (`id2`) an unquoted key: SQLite's
/// `sqlite3JsonId1`/`Id2` (letters, `_`, `$`, any byte of a multi-byte character; digits
/// only after the first).
fn id1(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

fn id2(c: u8) -> bool {
    id1(c) || c.is_ascii_digit()
}

/// Bytes a string may hold as they are (SQLite's `jsonIsOk`), one entry per byte value.
static IS_OK: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 256 {
        t[c] = !matches!(c as u8, b'"' | b'\'' | b'\\');
        c += 1;
    }
    t
};

/// Bytes a string may hold as they are.
fn is_ok(c: u8) -> bool {
    IS_OK[c as usize]
}

impl<'a, 'p> Parser<'a, 'p> {
    fn new(text: &'a str, mode: Mode<'p>) -> Self {
        Parser {
            s: memchr::memchr(0, text.as_bytes()).map_or(text, |end| &text[..end]),
            nonstandard: false,
            depth: 0,
            mode,
            found: None,
        }
    }

    /// The document's one value, with nothing but whitespace after it.
    fn document(&mut self) -> Option<Node> {
        let Got::Value(node, end) = self.child_value(0, self.mode, false) else {
            return None;
        };
        let mut i = self.past_space(end);
        if i < self.s.len() {
            i += self.json5_space(i);
            if i < self.s.len() {
                return None;
            }
            self.nonstandard = true;
        }
        Some(node)
    }

    /// The member's or element's value at `i`, parsed as its container's mode says for it
    /// (`leads`: whether the path's next step leads to it).
    fn child(&mut self, i: usize, leads: impl FnOnce(&Seek) -> bool) -> Got {
        match self.mode {
            Mode::Build => self.value(i),
            Mode::Seek([first, rest @ ..]) if leads(first) => match rest {
                [] => self.child_value(i, Mode::Build, true),
                rest => self.child_value(i, Mode::Seek(rest), false),
            },
            Mode::Check | Mode::Seek(_) => self.child_value(i, Mode::Check, false),
        }
    }

    /// Parses the value at `i` in `mode`, keeping it as the value found when `target`.
    fn child_value(&mut self, i: usize, mode: Mode<'p>, target: bool) -> Got {
        let quick = match mode {
            Mode::Build => None,
            Mode::Check => self.skip_strict(i),
            Mode::Seek(path) => {
                let end = self.seek_strict(i, path);
                if end.is_none() {
                    // Read again from the start below: what was found on the way goes.
                    self.found = None;
                }
                end
            }
        };
        if let Some(end) = quick {
            return Got::Value(Node::Null, end);
        }
        let outer = std::mem::replace(&mut self.mode, mode);
        let got = self.value(i);
        self.mode = outer;
        match got {
            Got::Value(node, end) if target => {
                self.found = Some(node);
                Got::Value(Node::Null, end)
            }
            got => got,
        }
    }

    /// Where the RFC 8259 value at `i` (after whitespace) ends, checked and not built: the
    /// quick way through a value only checked. `None` for anything else (JSON5, a mistake,
    /// punctuation, a value followed by what does not end one, nesting past 64 levels or
    /// [`MAX_DEPTH`]): the general parser then reads it, so what is accepted, and where a
    /// value ends, stay the parser's (it reads RFC 8259 JSON exactly so).
    fn skip_strict(&self, i: usize) -> Option<usize> {
        let b = self.b();
        // Open containers, innermost in the lowest bit: 1 an object, 0 an array.
        let (mut open, mut depth) = (0u64, 0usize);
        let mut k = self.past_space(i);
        loop {
            // A value at `k`; an object's member at `k` begins with its key.
            k = match *b.get(k)? {
                b'{' | b'[' => {
                    if depth == 64 || self.depth + depth >= MAX_DEPTH {
                        return None;
                    }
                    let object = b[k] == b'{';
                    open = open << 1 | u64::from(object);
                    depth += 1;
                    k = self.past_space(k + 1);
                    match (b.get(k), object) {
                        (Some(b'}'), true) | (Some(b']'), false) => {
                            open >>= 1;
                            depth -= 1;
                            k + 1
                        }
                        (_, true) => {
                            k = self.past_space(self.skip_key(k)?.1);
                            continue;
                        }
                        (_, false) => continue,
                    }
                }
                b'"' => self.skip_string(k)?,
                b't' | b'f' | b'n' => {
                    let word: &[u8] = match b[k] {
                        b't' => b"true",
                        b'f' => b"false",
                        _ => b"null",
                    };
                    if !b[k..].starts_with(word) {
                        return None;
                    }
                    k + word.len()
                }
                b'-' | b'0'..=b'9' => self.skip_number(k)?,
                _ => return None,
            };
            // After a value: the next value, or the ends of containers, or (outside them)
            // what may end a value.
            loop {
                if depth == 0 {
                    let ends = matches!(
                        self.at(k),
                        0 | b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}'
                    );
                    return ends.then_some(k);
                }
                k = self.past_space(k);
                match (self.at(k), open & 1 == 1) {
                    (b',', object) => {
                        k = self.past_space(k + 1);
                        if object {
                            k = self.past_space(self.skip_key(k)?.1);
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => {
                        open >>= 1;
                        depth -= 1;
                        k += 1;
                    }
                    _ => return None,
                }
            }
        }
    }

    /// Where the RFC 8259 array or object at `i` (after whitespace) ends, with the value at
    /// `path` inside it found (built into `found`) and every other value inside checked:
    /// the quick way along a path. `None` where [`Parser::skip_strict`] gives up, and for a
    /// key written with escapes or a path's key that has some (compared by what they mean),
    /// or a value of another kind than the path's step; the general parser then reads the
    /// value from its start.
    fn seek_strict(&mut self, i: usize, path: &'p [Seek]) -> Option<usize> {
        let b = self.b();
        let (step, rest) = path.split_first()?;
        let mut k = self.past_space(i);
        let close = match (*b.get(k)?, step) {
            (b'{', Seek::Key(key)) if key.esc == Esc::Raw || !key.text.contains('\\') => b'}',
            (b'[', Seek::Index(_)) => b']',
            _ => return None,
        };
        if self.depth >= MAX_DEPTH {
            return None;
        }
        k = self.past_space(k + 1);
        if self.at(k) == close {
            return Some(k + 1);
        }
        self.depth += 1;
        let (mut found, mut count) = (false, 0);
        let end = loop {
            let hit = match step {
                Seek::Key(key) => {
                    let Some((label, value)) = self.skip_key(k) else {
                        break None;
                    };
                    if label.contains(&b'\\') {
                        break None;
                    }
                    k = value;
                    !found && label == key.text.as_bytes()
                }
                Seek::Index(n) => {
                    count += 1;
                    count - 1 == *n
                }
            };
            found |= hit;
            let next = match (hit, rest.is_empty()) {
                (false, _) => self.skip_strict(k),
                (true, false) => self.seek_strict(k, rest),
                (true, true) => match self.child_value(k, Mode::Build, true) {
                    Got::Value(_, end) => Some(end),
                    _ => None,
                },
            };
            let Some(next) = next else { break None };
            k = self.past_space(next);
            match self.at(k) {
                b',' => k = self.past_space(k + 1),
                c if c == close => break Some(k + 1),
                _ => break None,
            }
        };
        self.depth -= 1;
        end
    }

    /// An object member's key at `k` (RFC 8259: a string), as written between its quotes,
    /// and where its value begins, past the colon (before whitespace).
    #[inline(always)]
    fn skip_key(&self, k: usize) -> Option<(&'a [u8], usize)> {
        if self.at(k) != b'"' {
            return None;
        }
        let end = self.skip_string(k)?;
        let colon = self.past_space(end);
        let label = &self.b()[k + 1..end - 1];
        (self.at(colon) == b':').then_some((label, colon + 1))
    }

    /// Past the RFC 8259 string at `k` (its opening quote), for [`Parser::skip_strict`].
    #[inline(always)]
    fn skip_string(&self, mut k: usize) -> Option<usize> {
        let b = self.b();
        k += 1;
        loop {
            while b.get(k).copied().is_some_and(is_ok) {
                k += 1;
            }
            match *b.get(k)? {
                b'"' => return Some(k + 1),
                b'\'' => k += 1,
                b'\\' => match *b.get(k + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => k += 2,
                    b'u' if self.is_4hex(k + 2) => k += 6,
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// Past the RFC 8259 number at `k`, for [`Parser::skip_strict`].
    #[inline(always)]
    fn skip_number(&self, mut k: usize) -> Option<usize> {
        let digits = |mut k: usize| {
            let from = k;
            while self.at(k).is_ascii_digit() {
                k += 1;
            }
            (k > from).then_some(k)
        };
        if self.at(k) == b'-' {
            k += 1;
        }
        k = match self.at(k) {
            b'0' => k + 1,
            _ => digits(k)?,
        };
        if self.at(k) == b'.' {
            k = digits(k + 1)?;
        }
        if matches!(self.at(k), b'e' | b'E') {
            k += 1;
            if matches!(self.at(k), b'+' | b'-') {
                k += 1;
            }
            k = digits(k)?;
        }
        Some(k)
    }

    /// Where JSON's whitespace from `k` ends.
    fn past_space(&self, mut k: usize) -> usize {
        while is_space(self.at(k)) {
            k += 1;
        }
        k
    }

    fn b(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    /// The byte at `i`, zero past the end (the C code reads its terminator).
    fn at(&self, i: usize) -> u8 {
        self.b().get(i).copied().unwrap_or(0)
    }

    /// The document's text from `from` to `to` (none for a value only checked). The parser
    /// cuts between characters (at ASCII punctuation); a cut inside one would be read lossily.
    fn text(&self, from: usize, to: usize) -> CompactString {
        if let Mode::Check = self.mode {
            return CompactString::const_new("");
        }
        match self.s.get(from..to) {
            Some(t) => CompactString::from(t),
            None => CompactString::from(String::from_utf8_lossy(&self.b()[from..to])),
        }
    }

    fn is_4hex(&self, i: usize) -> bool {
        (i..i + 4).all(|k| self.at(k).is_ascii_hexdigit())
    }

    /// JSON5 whitespace and comments at `i`: their length (SQLite's `json5Whitespace`).
    fn json5_space(&self, i: usize) -> usize {
        let mut n = i;
        loop {
            match self.at(n) {
                0x09 | 0x0a | 0x0b | 0x0c | 0x0d | 0x20 => n += 1,
                b'/' if self.at(n + 1) == b'*' && self.at(n + 2) != 0 => {
                    let mut j = n + 3;
                    while self.at(j) != b'/' || self.at(j - 1) != b'*' {
                        if self.at(j) == 0 {
                            return n - i;
                        }
                        j += 1;
                    }
                    n = j + 1;
                }
                b'/' if self.at(n + 1) == b'/' => {
                    let mut j = n + 2;
                    loop {
                        let c = self.at(j);
                        if c == 0 || c == b'\n' || c == b'\r' {
                            break;
                        }
                        if c == 0xe2
                            && self.at(j + 1) == 0x80
                            && matches!(self.at(j + 2), 0xa8 | 0xa9)
                        {
                            j += 2;
                            break;
                        }
                        j += 1;
                    }
                    n = j;
                    if self.at(n) != 0 {
                        n += 1;
                    }
                }
                0xc2 if self.at(n + 1) == 0xa0 => n += 2,
                0xe1 if self.at(n + 1) == 0x9a && self.at(n + 2) == 0x80 => n += 3,
                0xe2 if self.at(n + 1) == 0x80 => {
                    let c = self.at(n + 2);
                    if c < 0x80 || !(c <= 0x8a || matches!(c, 0xa8 | 0xa9 | 0xaf)) {
                        return n - i;
                    }
                    n += 3;
                }
                0xe2 if self.at(n + 1) == 0x81 && self.at(n + 2) == 0x9f => n += 3,
                0xe3 if self.at(n + 1) == 0x80 && self.at(n + 2) == 0x80 => n += 3,
                0xef if self.at(n + 1) == 0xbb && self.at(n + 2) == 0xbf => n += 3,
                _ => return n - i,
            }
        }
    }

    /// The value (or punctuation) at `i`: SQLite's `jsonTranslateTextToBlob`.
    fn value(&mut self, mut i: usize) -> Got {
        loop {
            match self.at(i) {
                b'{' => return self.object(i),
                b'[' => return self.array(i),
                b'"' => return self.string(i),
                b'\'' => {
                    self.nonstandard = true;
                    return self.string(i);
                }
                b't' | b'f' | b'n' => {
                    for (word, node) in [
                        ("true", Node::True),
                        ("false", Node::False),
                        ("null", Node::Null),
                    ] {
                        let n = word.len();
                        if self.b()[i..].starts_with(word.as_bytes())
                            && !self.at(i + n).is_ascii_alphanumeric()
                        {
                            return Got::Value(node, i + n);
                        }
                    }
                    if self.at(i) != b'n' {
                        return Got::Error;
                    }
                    return self.nan_or_inf(i);
                }
                b'+' | b'.' | b'-' | b'0'..=b'9' => return self.number(i),
                b'}' => return Got::CloseObject(i),
                b']' => return Got::CloseArray(i),
                b',' => return Got::Comma(i),
                b':' => return Got::Colon(i),
                0 => return Got::End,
                0x09 | 0x0a | 0x0d | 0x20 => {
                    i += 1;
                    while is_space(self.at(i)) {
                        i += 1;
                    }
                }
                0x0b | 0x0c | b'/' | 0xc2 | 0xe1 | 0xe2 | 0xe3 | 0xef => {
                    let n = self.json5_space(i);
                    if n == 0 {
                        return Got::Error;
                    }
                    i += n;
                    self.nonstandard = true;
                }
                _ => return self.nan_or_inf(i),
            }
        }
    }

    /// `Infinity`, `inf`, `NaN`, `QNaN`, `SNaN` in any case: a JSON5 extension.
    fn nan_or_inf(&mut self, i: usize) -> Got {
        for (name, node) in [
            ("inf", None),
            ("infinity", None),
            ("nan", Some(Node::Null)),
            ("qnan", Some(Node::Null)),
            ("snan", Some(Node::Null)),
        ] {
            let n = name.len();
            let matches =
                self.s.len() >= i + n && self.b()[i..i + n].eq_ignore_ascii_case(name.as_bytes());
            if !matches || self.at(i + n).is_ascii_alphanumeric() {
                continue;
            }
            self.nonstandard = true;
            let node = node.unwrap_or_else(|| Node::Num(Num::Real, "9e999".into()));
            return Got::Value(node, i + n);
        }
        Got::Error
    }

    fn enter(&mut self) -> bool {
        self.depth += 1;
        self.depth <= MAX_DEPTH
    }

    fn object(&mut self, i: usize) -> Got {
        if !self.enter() {
            return Got::Error;
        }
        let mut members: Vec<(Text, Node)> = Vec::new();
        // Seeking a key: whether a member has had it (the first is the one found).
        let mut had_key = false;
        let mut j = i + 1;
        loop {
            let (label, mut j2) = match self.value(j) {
                Got::Value(Node::Str(t), x) => (t, x),
                Got::Value(..) => return Got::Error,
                Got::CloseObject(at) => {
                    if !members.is_empty() {
                        self.nonstandard = true;
                    }
                    j = at;
                    break;
                }
                _ => {
                    // An unquoted key (JSON5): an identifier, `\uXXXX` escapes allowed.
                    j += self.json5_space(j);
                    let escape = |k: usize| {
                        self.at(k) == b'\\' && self.at(k + 1) == b'u' && self.is_4hex(k + 2)
                    };
                    if !(id1(self.at(j)) || escape(j)) {
                        return Got::Error;
                    }
                    let mut k = j + 1;
                    while (id2(self.at(k)) && self.json5_space(k) == 0) || escape(k) {
                        k += 1;
                    }
                    self.nonstandard = true;
                    let text = self.text(j, k);
                    (
                        Text {
                            text,
                            esc: Esc::Json,
                        },
                        k,
                    )
                }
            };
            if self.at(j2) == b':' {
                j2 += 1;
            } else {
                let mut spaced = false;
                if is_space(self.at(j2)) {
                    while is_space(self.at(j2)) {
                        j2 += 1;
                    }
                    if self.at(j2) == b':' {
                        j2 += 1;
                        spaced = true;
                    }
                }
                if !spaced {
                    match self.value(j2) {
                        Got::Colon(at) => j2 = at + 1,
                        _ => return Got::Error,
                    }
                }
            }
            let Got::Value(node, x) = self.child(j2, |step| match step {
                Seek::Key(key) if !had_key && label.same(key) => {
                    had_key = true;
                    true
                }
                _ => false,
            }) else {
                return Got::Error;
            };
            if let Mode::Build = self.mode {
                members.push((label, node));
            }
            j = x;
            let Some((at, more)) = self.separator(j, b'}') else {
                return Got::Error;
            };
            j = at;
            if !more {
                break;
            }
            j += 1;
        }
        self.depth -= 1;
        Got::Value(Node::Object(members), j + 1)
    }

    fn array(&mut self, i: usize) -> Got {
        if !self.enter() {
            return Got::Error;
        }
        let mut items = Vec::new();
        let mut count = 0;
        let mut j = i + 1;
        loop {
            let got = self.child(j, |step| matches!(step, Seek::Index(n) if *n == count));
            count += 1;
            match got {
                Got::Value(node, x) => {
                    if let Mode::Build = self.mode {
                        items.push(node);
                    }
                    j = x;
                }
                Got::CloseArray(at) => {
                    if !items.is_empty() {
                        self.nonstandard = true;
                    }
                    j = at;
                    break;
                }
                _ => return Got::Error,
            }
            let Some((at, more)) = self.separator(j, b']') else {
                return Got::Error;
            };
            j = at;
            if !more {
                break;
            }
            j += 1;
        }
        self.depth -= 1;
        Got::Value(Node::Array(items), j + 1)
    }

    /// After a member or an element at `j`: a comma (`true`) or the closing `close`
    /// (`false`), with its position, whitespace and comments skipped.
    fn separator(&mut self, mut j: usize, close: u8) -> Option<(usize, bool)> {
        let at_mark = |p: &Self, k: usize| match p.at(k) {
            b',' => Some((k, true)),
            c if c == close => Some((k, false)),
            _ => None,
        };
        if let Some(found) = at_mark(self, j) {
            return Some(found);
        }
        if is_space(self.at(j)) {
            j += 1;
            while is_space(self.at(j)) {
                j += 1;
            }
            if let Some(found) = at_mark(self, j) {
                return Some(found);
            }
        }
        match (self.value(j), close) {
            (Got::Comma(at), _) => Some((at, true)),
            (Got::CloseObject(at), b'}') | (Got::CloseArray(at), b']') => Some((at, false)),
            _ => None,
        }
    }

    fn string(&mut self, i: usize) -> Got {
        let delim = self.at(i);
        let mut esc = Esc::Json;
        let mut j = i + 1;
        loop {
            // The run of bytes held as they are.
            while self.b().get(j).copied().is_some_and(is_ok) {
                j += 1;
            }
            let c = self.at(j);
            if c == delim {
                break;
            }
            if c == b'\\' {
                j += 1;
                let c = self.at(j);
                if matches!(c, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't')
                    || (c == b'u' && self.is_4hex(j + 1))
                {
                } else if c == b'\''
                    || c == b'v'
                    || c == b'\n'
                    || (c == b'0' && !self.at(j + 1).is_ascii_digit())
                    || (c == 0xe2
                        && self.at(j + 1) == 0x80
                        && matches!(self.at(j + 2), 0xa8 | 0xa9))
                    || (c == b'x'
                        && self.at(j + 1).is_ascii_hexdigit()
                        && self.at(j + 2).is_ascii_hexdigit())
                {
                    esc = Esc::Json5;
                    self.nonstandard = true;
                } else if c == b'\r' {
                    if self.at(j + 1) == b'\n' {
                        j += 1;
                    }
                    esc = Esc::Json5;
                    self.nonstandard = true;
                } else {
                    return Got::Error;
                }
            } else if c <= 0x1f {
                if c == 0 {
                    return Got::Error;
                }
                esc = Esc::Json5;
                self.nonstandard = true;
            } else if c == b'"' {
                // Inside a single-quoted string.
                esc = Esc::Json5;
            }
            j += 1;
        }
        let text = self.text(i + 1, j);
        Got::Value(Node::Str(Text { text, esc }), j + 1)
    }

    fn number(&mut self, mut i: usize) -> Got {
        let mut json5 = false;
        let mut real = false;
        let c = self.at(i);
        let digit = |p: &Self, k: usize| p.at(k).is_ascii_digit();
        let xdigit = |p: &Self, k: usize| p.at(k).is_ascii_hexdigit();
        let hex_end = |p: &Self, from: usize| (from..).find(|&k| !xdigit(p, k)).unwrap();
        let mut j;
        if c == b'+' {
            self.nonstandard = true;
        }
        'body: {
            if c == b'.' {
                if !digit(self, i + 1) {
                    return Got::Error;
                }
                self.nonstandard = true;
                json5 = true;
                real = true;
            } else if c <= b'0' {
                if c == b'0' {
                    if matches!(self.at(i + 1), b'x' | b'X') && xdigit(self, i + 2) {
                        self.nonstandard = true;
                        json5 = true;
                        j = hex_end(self, i + 3);
                        break 'body;
                    } else if digit(self, i + 1) {
                        return Got::Error;
                    }
                } else {
                    if !digit(self, i + 1) {
                        if matches!(self.at(i + 1), b'I' | b'i')
                            && self.s.len() >= i + 4
                            && self.b()[i + 1..i + 4].eq_ignore_ascii_case(b"inf")
                        {
                            self.nonstandard = true;
                            let text = if c == b'-' { "-9e999" } else { "9e999" };
                            let long = self.s.len() >= i + 9
                                && self.b()[i + 4..i + 9].eq_ignore_ascii_case(b"inity");
                            let end = i + if long { 9 } else { 4 };
                            return Got::Value(Node::Num(Num::Real, text.into()), end);
                        }
                        if self.at(i + 1) == b'.' {
                            self.nonstandard = true;
                            json5 = true;
                        } else {
                            return Got::Error;
                        }
                    } else if self.at(i + 1) == b'0' {
                        if digit(self, i + 2) {
                            return Got::Error;
                        } else if matches!(self.at(i + 2), b'x' | b'X') && xdigit(self, i + 3) {
                            self.nonstandard = true;
                            json5 = true;
                            j = hex_end(self, i + 4);
                            break 'body;
                        }
                    }
                }
            }
            let mut seen_e = false;
            j = i + 1;
            loop {
                let c = self.at(j);
                if c.is_ascii_digit() {
                    j += 1;
                    continue;
                }
                if c == b'.' {
                    if real {
                        return Got::Error;
                    }
                    real = true;
                    j += 1;
                    continue;
                }
                if c == b'e' || c == b'E' {
                    if self.at(j - 1) < b'0' {
                        if self.at(j - 1) == b'.' && j >= i + 2 && digit(self, j - 2) {
                            self.nonstandard = true;
                            json5 = true;
                        } else {
                            return Got::Error;
                        }
                    }
                    if seen_e {
                        return Got::Error;
                    }
                    real = true;
                    seen_e = true;
                    let mut c = self.at(j + 1);
                    if c == b'+' || c == b'-' {
                        j += 1;
                        c = self.at(j + 1);
                    }
                    if !c.is_ascii_digit() {
                        return Got::Error;
                    }
                    j += 1;
                    continue;
                }
                break;
            }
            if self.at(j - 1) < b'0' {
                if self.at(j - 1) == b'.' && j >= i + 2 && digit(self, j - 2) {
                    self.nonstandard = true;
                    json5 = true;
                } else {
                    return Got::Error;
                }
            }
        }
        if self.at(i) == b'+' {
            i += 1;
        }
        let kind = match (real, json5) {
            (false, false) => Num::Int,
            (false, true) => Num::Hex,
            (true, false) => Num::Real,
            (true, true) => Num::Real5,
        };
        Got::Value(Node::Num(kind, self.text(i, j)), j)
    }
}

/// The character a string's escape at the start of `z` (a backslash) stands for, and the
/// escape's length; `None` for one that stands for nothing (SQLite ignores it).
fn unescape_one(z: &[u8]) -> (Option<char>, usize) {
    let hex4 = |s: &[u8]| {
        std::str::from_utf8(s)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    match z.get(1) {
        None => (None, z.len()),
        Some(b'u') => {
            let Some(v) = z.get(2..6).and_then(hex4) else {
                return (None, z.len());
            };
            if v & 0xfc00 == 0xd800 && z.get(6..8) == Some(b"\\u") {
                if let Some(lo) = z
                    .get(8..12)
                    .and_then(hex4)
                    .filter(|lo| lo & 0xfc00 == 0xdc00)
                {
                    let c = ((v & 0x3ff) << 10) + (lo & 0x3ff) + 0x10000;
                    return (char::from_u32(c), 12);
                }
            }
            // A lone surrogate: SQLite writes its bytes, which no Rust string can hold.
            (Some(char::from_u32(v).unwrap_or('\u{fffd}')), 6)
        }
        Some(b'b') => (Some('\u{8}'), 2),
        Some(b'f') => (Some('\u{c}'), 2),
        Some(b'n') => (Some('\n'), 2),
        Some(b'r') => (Some('\r'), 2),
        Some(b't') => (Some('\t'), 2),
        Some(b'v') => (Some('\u{b}'), 2),
        Some(b'0') => match z.get(2).is_some_and(u8::is_ascii_digit) {
            true => (None, 2),
            false => (Some('\0'), 2),
        },
        Some(&c @ (b'\'' | b'"' | b'/' | b'\\')) => (Some(c as char), 2),
        Some(b'x') => match z.get(2..4).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        }) {
            Some(v) => (Some(v as char), 4),
            None => (None, z.len()),
        },
        Some(b'\r' | b'\n' | 0xe2) => {
            // A line continuation: the escaped line end stands for nothing.
            let skip = match z[1] {
                b'\r' if z.get(2) == Some(&b'\n') => 3,
                b'\r' | b'\n' => 2,
                _ => 4,
            };
            (None, skip.min(z.len()))
        }
        Some(_) => (None, 2),
    }
}

/// What a JSON or JSON5 string's text means.
fn unescape(text: &str) -> String {
    let z = text.as_bytes();
    let mut out = String::with_capacity(z.len());
    let mut i = 0;
    while i < z.len() {
        let next = z[i..]
            .iter()
            .position(|&c| c == b'\\')
            .map_or(z.len(), |k| i + k);
        out.push_str(&text[i..next]);
        if next == z.len() {
            break;
        }
        let (c, len) = unescape_one(&z[next..]);
        out.extend(c);
        i = next + len;
    }
    out
}

/// Appends `c` (a control character) as JSON writes it (SQLite's `jsonAppendControlChar`).
fn control(out: &mut String, c: u8) {
    match c {
        0x08 => out.push_str("\\b"),
        0x09 => out.push_str("\\t"),
        0x0a => out.push_str("\\n"),
        0x0c => out.push_str("\\f"),
        0x0d => out.push_str("\\r"),
        _ => out.push_str(&format!("\\u00{c:02x}")),
    }
}

impl Text {
    /// Appends the string as JSON (quoted).
    pub(crate) fn write(&self, out: &mut String) {
        out.push('"');
        match self.esc {
            Esc::Json => out.push_str(&self.text),
            Esc::Raw => {
                for c in self.text.chars() {
                    match c {
                        '"' | '\\' => {
                            out.push('\\');
                            out.push(c);
                        }
                        c if (c as u32) < 0x20 => control(out, c as u8),
                        c => out.push(c),
                    }
                }
            }
            Esc::Json5 => self.write_json5(out),
        }
        out.push('"');
    }

    /// A JSON5 string's text as JSON (SQLite's rendering of `JSONB_TEXT5`).
    fn write_json5(&self, out: &mut String) {
        let z = self.text.as_bytes();
        let mut i = 0;
        while i < z.len() {
            let run = z[i..]
                .iter()
                .position(|&c| !(is_ok(c) || c == b'\''))
                .map_or(z.len(), |k| i + k);
            out.push_str(&self.text[i..run]);
            i = run;
            if i == z.len() {
                break;
            }
            match z[i] {
                b'"' => {
                    out.push_str("\\\"");
                    i += 1;
                    continue;
                }
                c if c <= 0x1f => {
                    control(out, c);
                    i += 1;
                    continue;
                }
                _ => {}
            }
            // A backslash.
            let mut len = 2;
            match z.get(i + 1) {
                Some(b'\'') => out.push('\''),
                // (SQLite writes \v as \u0009.)
                Some(b'v') => out.push_str("\\u0009"),
                Some(b'x') => {
                    out.push_str("\\u00");
                    out.push_str(&self.text[i + 2..i + 4]);
                    len = 4;
                }
                Some(b'0') => out.push_str("\\u0000"),
                Some(b'\r') if z.get(i + 2) == Some(&b'\n') => len = 3,
                Some(b'\r' | b'\n') => {}
                Some(0xe2) => len = 4,
                _ => out.push_str(&self.text[i..i + 2]),
            }
            i += len;
        }
    }
}

impl Node {
    /// The node as compact JSON text.
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    /// Appends the node as compact JSON (SQLite's `jsonTranslateBlobToText`).
    pub(crate) fn write(&self, out: &mut String) {
        match self {
            Node::Null => out.push_str("null"),
            Node::True => out.push_str("true"),
            Node::False => out.push_str("false"),
            Node::Num(Num::Int | Num::Real, t) => out.push_str(t),
            Node::Num(Num::Hex, t) => write_hex(t, out),
            Node::Num(Num::Real5, t) => write_real5(t, out),
            Node::Str(t) => t.write(out),
            Node::Array(items) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Node::Object(members) => {
                out.push('{');
                for (k, (label, value)) in members.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    label.write(out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// Appends the node as `json_pretty` writes it, `indent` once per level.
    pub(crate) fn write_pretty(&self, indent: &str, level: usize, out: &mut String) {
        let pad = |out: &mut String, level: usize| (0..level).for_each(|_| out.push_str(indent));
        match self {
            Node::Array(items) if !items.is_empty() => {
                out.push_str("[\n");
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push_str(",\n");
                    }
                    pad(out, level + 1);
                    item.write_pretty(indent, level + 1, out);
                }
                out.push('\n');
                pad(out, level);
                out.push(']');
            }
            Node::Object(members) if !members.is_empty() => {
                out.push_str("{\n");
                for (k, (label, value)) in members.iter().enumerate() {
                    if k > 0 {
                        out.push_str(",\n");
                    }
                    pad(out, level + 1);
                    label.write(out);
                    out.push_str(": ");
                    value.write_pretty(indent, level + 1, out);
                }
                out.push('\n');
                pad(out, level);
                out.push('}');
            }
            other => other.write(out),
        }
    }
}

/// A JSON5 hex integer as a decimal (past 60 bits, `9.0e999`), as SQLite writes it.
fn write_hex(t: &str, out: &mut String) {
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    if negative {
        out.push('-');
    }
    let mut u: u64 = 0;
    let mut overflow = false;
    for c in digits.bytes().skip(2) {
        if u >> 60 != 0 {
            overflow = true;
        } else {
            u = u * 16 + (c as char).to_digit(16).unwrap_or(0) as u64;
        }
    }
    match overflow {
        true => out.push_str("9.0e999"),
        false => out.push_str(&u.to_string()),
    }
}

/// A JSON5 real (`.5`, `5.`, `5.e3`) with the digits JSON needs around its point.
fn write_real5(t: &str, out: &mut String) {
    let z = t.as_bytes();
    let mut k = 0;
    if z.first() == Some(&b'-') {
        out.push('-');
        k = 1;
    }
    if z.get(k) == Some(&b'.') {
        out.push('0');
    }
    for (n, &c) in z.iter().enumerate().skip(k) {
        out.push(c as char);
        if c == b'.' && !z.get(n + 1).is_some_and(u8::is_ascii_digit) {
            out.push('0');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(text: &str) -> Option<String> {
        parse(text).map(|p| p.node.to_json())
    }

    #[test]
    fn text_is_kept_as_written() {
        assert_eq!(
            round(r#" {"a" : [1.0, 32.40, 2E-2, -0, "\u00e9\/"]} "#).unwrap(),
            r#"{"a":[1.0,32.40,2E-2,-0,"\u00e9\/"]}"#
        );
        assert_eq!(round(r#"{"a":1,"a":2}"#).unwrap(), r#"{"a":1,"a":2}"#);
    }

    #[test]
    fn json5_becomes_json() {
        let p = parse("{a:0x1F, 'b':.5, c:5., d:+1, e:Infinity, f:NaN, g:'\\x41\\'\"',}").unwrap();
        assert!(p.nonstandard);
        assert_eq!(
            p.node.to_json(),
            r#"{"a":31,"b":0.5,"c":5.0,"d":1,"e":9e999,"f":null,"g":"\u0041'\""}"#
        );
        assert!(!parse("[1,2]").unwrap().nonstandard);
        assert!(parse("/* c */ [1, // x\n 2,]").unwrap().nonstandard);
    }

    #[test]
    fn malformed_is_refused() {
        for bad in [
            "",
            "[1,",
            "{\"a\"}",
            "01",
            "1.2.3",
            "[1 2]",
            "\"\u{0}\"",
            "{true:1}",
            "tru",
            "-",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).is_none());
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok).is_some());
    }

    /// The value at `path` in `text` as a whole parse finds it, written out (`Some(None)`:
    /// none there; `None`: malformed).
    fn looked_up(text: &str, path: &[Seek]) -> Option<Option<String>> {
        let mut cur = &parse(text)?.node;
        for step in path {
            let next = match (cur, step) {
                (Node::Object(m), Seek::Key(k)) => {
                    m.iter().find(|(l, _)| l.same(k)).map(|(_, v)| v)
                }
                (Node::Array(a), Seek::Index(i)) => a.get(*i),
                _ => None,
            };
            match next {
                Some(n) => cur = n,
                None => return Some(None),
            }
        }
        Some(Some(cur.to_json()))
    }

    fn extracted(text: &str, path: &[Seek]) -> Option<Option<String>> {
        extract(text, path).map(|found| found.map(|n| n.to_json()))
    }

    fn key(k: &str) -> Seek {
        Seek::Key(match k.contains('\\') {
            true => Text {
                text: k.into(),
                esc: Esc::Json5,
            },
            false => Text::raw(k),
        })
    }

    #[test]
    fn extract_finds_what_a_whole_parse_finds() {
        let docs = [
            r#"{"a":{"b":[10,{"c":"x"},30]},"a":2,"d":[]}"#,
            r#" { "a" : { "b" : [ 10 , { "c" : "x\n" } , 30 ] } } "#,
            r#"{"a\u0062":1,"ab":2}"#,
            r#"{a:{b:[0x1F,.5,'s',],},}"#,
            r#"{"a":{"b":[1,2,3]},"z":/* c */ 1}"#,
            r#"{"a":{"b":[1e5,-0,2E-2,true,false,null]}}"#,
            r#"[[1,[2,[3]]],{"a":1}]"#,
            r#"{"a":{"b":01}}"#,
            r#"{"a":{"b":[1,2]} x"#,
            "{\"a\":1}\u{0}garbage",
            "{\"a\":\"\u{1}\"}",
            r#"{"a":[1,2,]}"#,
            r#"{"a":0x1F}"#,
            r#"{"a":[Infinity,NaN,-inf]}"#,
            r#""just a string""#,
            r#"{"a":{"b":[1,2,3],"b":[4]}}"#,
            r#"{"é":{"k.dot":1}}"#,
            r#"{"a":[{"b":1},{"b":2}]}"#,
            r#"{"a":{}}"#,
            r#"{"a":[]}"#,
            "",
            "[1,",
            r#"{"a":[1 2]}"#,
        ];
        let paths: Vec<Vec<Seek>> = vec![
            vec![key("a")],
            vec![key("a"), key("b")],
            vec![key("a"), key("b"), Seek::Index(1)],
            vec![key("a"), key("b"), Seek::Index(1), key("c")],
            vec![key("a"), key("b"), Seek::Index(7)],
            vec![key("ab")],
            vec![key(r"a\u0062")],
            vec![key("z")],
            vec![Seek::Index(0), Seek::Index(1), Seek::Index(1)],
            vec![Seek::Index(1), key("a")],
            vec![key("é"), key("k.dot")],
            vec![key("a"), Seek::Index(1), key("b")],
            vec![key("a"), Seek::Index(0)],
            vec![key("d")],
            vec![Seek::Index(0)],
        ];
        for doc in docs {
            for path in &paths {
                assert_eq!(extracted(doc, path), looked_up(doc, path), "{doc:?}");
            }
        }
    }

    /// Random documents, RFC 8259 and JSON5 mixed, some cut short: the value a path leads
    /// to, or the refusal, is the whole parse's.
    #[test]
    fn extract_agrees_with_parse_on_random_documents() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        const SPACES: &[&str] = &["", "", " ", "\n\t", "/*c*/"];
        const SCALARS: &[&str] = &[
            "1",
            "-0",
            "2.5e3",
            "0x1F",
            ".5",
            "\"s\"",
            r#""\n\u00e9""#,
            "'q'",
            r#""a\x41""#,
            "\"é\"",
            "true",
            "false",
            "null",
            "NaN",
            "\"b\"",
        ];
        const MISTAKES: &[&str] = &["01", "1e", "-", "tru", "\"\\q\"", "[1 2]"];
        const KEYS: &[&str] = &["\"a\"", "\"b\"", "a", "'b'", r#""\u0061""#, "\"c\""];
        fn value(rng: &mut StdRng, depth: u32, out: &mut String) {
            out.push_str(SPACES[rng.gen_range(0..SPACES.len())]);
            let kinds = match depth {
                0 => 2..4,
                1..=3 => 0..4,
                _ => 0..2,
            };
            let (open, close) = match rng.gen_range(kinds) {
                0 | 1 => {
                    out.push_str(match rng.gen_bool(0.01) {
                        true => MISTAKES[rng.gen_range(0..MISTAKES.len())],
                        false => SCALARS[rng.gen_range(0..SCALARS.len())],
                    });
                    out.push_str(SPACES[rng.gen_range(0..SPACES.len())]);
                    return;
                }
                2 => ('[', ']'),
                _ => ('{', '}'),
            };
            out.push(open);
            for i in 0..rng.gen_range(0..5) {
                if i > 0 {
                    out.push(',');
                }
                if open == '{' {
                    out.push_str(KEYS[rng.gen_range(0..KEYS.len())]);
                    out.push(':');
                }
                value(rng, depth + 1, out);
            }
            if rng.gen_bool(0.05) {
                out.push(',');
            }
            out.push(close);
        }
        let mut rng = StdRng::seed_from_u64(7);
        let (mut found, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let mut doc = String::new();
            value(&mut rng, 0, &mut doc);
            if rng.gen_bool(0.05) {
                let at = rng.gen_range(0..=doc.len());
                if doc.is_char_boundary(at) {
                    doc.truncate(at);
                }
            }
            let path: Vec<Seek> = (0..rng.gen_range(1..4))
                .map(|_| match rng.gen_range(0..3) {
                    0 => Seek::Index(rng.gen_range(0..2)),
                    1 => key("a"),
                    _ => key("b"),
                })
                .collect();
            let got = extracted(&doc, &path);
            assert_eq!(got, looked_up(&doc, &path), "{doc:?}");
            found += matches!(got, Some(Some(_))) as u32;
            refused += got.is_none() as u32;
        }
        // The cases reach both outcomes often, not only the empty one.
        assert!(
            found > 1_500 && refused > 1_000,
            "{found} found, {refused} refused"
        );
    }

    /// Also where the quick reader hands a container back to the parser partway (an unquoted
    /// key, a key with an escape): the parser then counts the depth from the same start.
    #[test]
    fn extract_keeps_the_depth_limit() {
        for n in [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1] {
            let nested = "[".repeat(n - 1) + &"]".repeat(n - 1);
            for first in ["", "b:1,", "\"\\u0062\":1,"] {
                let doc = format!("{{{first}\"a\":{nested}}}");
                for path in [[key("a")], [key("b")]] {
                    assert_eq!(
                        extracted(&doc, &path),
                        looked_up(&doc, &path),
                        "{n} {first}"
                    );
                }
                let doc = format!("[{{{first}\"a\":{nested}}}]");
                let path = [Seek::Index(0), key("a")];
                assert_eq!(
                    extracted(&doc, &path),
                    looked_up(&doc, &path),
                    "{n} {first}"
                );
            }
        }
    }

    #[test]
    fn escapes_are_read() {
        let t = Text {
            text: r#"a\"\u00e9\ud83d\ude00\n\/"#.into(),
            esc: Esc::Json,
        };
        assert_eq!(t.value(), "a\"é😀\n/");
        assert!(t.same(&Text::raw("a\"é😀\n/")));
    }
}
