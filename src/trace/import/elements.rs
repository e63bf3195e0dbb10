//! Reads the top-level elements of a JSON array, or the lines of a JSONL file, one at a time
//! from a reader: memory holds one element (plus a read buffer), however large the file, and
//! an element larger than a set size is only scanned, handed out as its place in the input.

use std::io::Read;

/// How the file holds its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[ e0, e1, … ]`
    Array,
    /// One JSON value per non-blank line.
    Lines,
}

/// A syntax problem the splitter can see (the parser reports the rest, with its own line).
#[derive(Debug, PartialEq, Eq)]
pub struct SplitError {
    /// 1-based line of the problem.
    pub line: usize,
    pub message: String,
}

/// One element: its bytes, its index and the 1-based line it starts on.
pub struct Element<'a> {
    pub index: usize,
    pub line: usize,
    /// The element's bytes, or nothing when it is [`Element::far`].
    pub bytes: &'a [u8],
    /// Where in the input an element too large to keep lies (its bytes were not kept).
    pub far: Option<std::ops::Range<u64>>,
    /// How many JSON objects the element opens: what a reader can size its output by.
    pub objects: usize,
}

/// Splits a reader's elements without parsing them: it tracks only strings, escapes and
/// nesting depth, so a whole element is known before any of it is parsed.
pub struct Elements<R> {
    reader: R,
    layout: Layout,
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out (the element before `start` is done with).
    start: usize,
    /// Bytes of `buf` filled from the reader.
    filled: usize,
    eof: bool,
    index: usize,
    /// Line of `buf[start]`.
    line: usize,
    /// After the array's `[`, a `,` waiting for its element, after the array's `]`.
    opened: bool,
    comma: bool,
    closed: bool,
    /// Largest element allowed, in bytes.
    cap: usize,
    /// Largest element kept in memory; larger ones come out [`Element::far`].
    keep: usize,
    /// Offset in the input of `buf[0]`.
    base: u64,
}

const CHUNK: usize = 1 << 20;

/// Bytes the splitter looks at in one step.
const WINDOW: usize = 64;

/// Where a window's quotes, backslashes and structural bytes (`{ } [ ] , \n`) are: bit k for
/// byte k.
#[derive(Debug, PartialEq, Eq)]
struct Marks {
    quote: u64,
    backslash: u64,
    structural: u64,
}

impl Marks {
    /// Sixteen bytes per comparison (SSE2 on x86-64, NEON on ARM).
    #[inline]
    fn of(w: &[u8; WINDOW]) -> Marks {
        use wide::u8x16;
        let mut m = Marks { quote: 0, backslash: 0, structural: 0 };
        for (k, part) in w.chunks_exact(16).enumerate() {
            let v = u8x16::new(part.try_into().expect("16 bytes"));
            let is = |x: u8x16, b: u8| x.cmp_eq(u8x16::splat(b));
            let bits = |x: u8x16| u64::from(x.move_mask() as u16) << (16 * k);
            // `{` and `[`, `}` and `]` differ only in bit 5.
            let folded = v | u8x16::splat(0x20);
            m.quote |= bits(is(v, b'"'));
            m.backslash |= bits(is(v, b'\\'));
            m.structural |= bits(is(folded, b'{') | is(folded, b'}') | is(v, b',') | is(v, b'\n'));
        }
        m
    }

    /// A byte at a time: the reference [`Marks::of`] is tested against.
    #[cfg(test)]
    fn one_by_one(w: &[u8; WINDOW]) -> Marks {
        let mut m = Marks { quote: 0, backslash: 0, structural: 0 };
        for (k, &b) in w.iter().enumerate() {
            m.quote |= u64::from(b == b'"') << k;
            m.backslash |= u64::from(b == b'\\') << k;
            m.structural |= u64::from(matches!(b, b'{' | b'}' | b'[' | b']' | b',' | b'\n')) << k;
        }
        m
    }

    /// Which bytes of the window (those in `within`) are inside a string, its opening quote
    /// included and its closing one not, for a window that starts `in_string` and with its
    /// first byte `escaped`; both are updated for the next window. A quote outside a string
    /// opens one; inside, a backslash escapes the next byte and a quote closes it.
    #[inline]
    fn strings(&self, within: u64, in_string: &mut bool, escaped: &mut bool) -> u64 {
        let started = if *in_string { u64::MAX } else { 0 };
        let last = within ^ (within >> 1);
        // Take every backslash not itself escaped for an escape, as JSON allows backslashes
        // only in strings; the quotes not escaped then delimit the strings.
        let (mut escapes, mut escaped_bytes) = (0u64, u64::from(*escaped));
        let mut rest = self.backslash & within & !escaped_bytes;
        while rest != 0 {
            let bit = rest & rest.wrapping_neg();
            escapes |= bit;
            escaped_bytes |= bit << 1;
            rest &= !(bit | bit << 1);
        }
        let delimiters = self.quote & within & !escaped_bytes;
        let inside = prefix_xor(delimiters) ^ started;
        if escapes & !inside == 0 {
            *in_string ^= delimiters.count_ones() % 2 == 1;
            *escaped = escapes & last != 0;
            return inside;
        }
        // A backslash outside a string (not JSON, which the parser will say): it escapes
        // nothing there, so walk the quotes and backslashes in order (`in_string` is still the
        // window's start).
        let (mut delimiters, mut skip) = (0u64, u64::from(std::mem::take(escaped)));
        let mut events = (self.quote | self.backslash) & within;
        while events != 0 {
            let bit = events & events.wrapping_neg();
            events ^= bit;
            if bit & skip != 0 {
                continue;
            }
            if self.quote & bit != 0 {
                delimiters |= bit;
                *in_string = !*in_string;
            } else if *in_string {
                skip = bit << 1;
                *escaped = bit == last;
            }
        }
        prefix_xor(delimiters) ^ started
    }
}

/// Bit k of the answer is the parity of bits 0..=k of `x`.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

impl<R: Read> Elements<R> {
    /// Starts reading `reader`, whose first non-blank byte is `[` for [`Layout::Array`].
    pub fn new(reader: R, layout: Layout, cap: usize) -> Elements<R> {
        Elements {
            reader,
            layout,
            buf: Vec::new(),
            start: 0,
            filled: 0,
            eof: false,
            index: 0,
            line: 1,
            opened: false,
            comma: false,
            closed: false,
            cap,
            keep: usize::MAX,
            base: 0,
        }
    }

    /// Hands out elements larger than `bytes` as their place in the input instead of their
    /// bytes, so memory holds at most about `bytes` of an element.
    pub fn keep_at_most(mut self, bytes: usize) -> Elements<R> {
        self.keep = bytes;
        self
    }

    /// Reads more input, keeping `buf[start..filled]`; false at the end of input.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.filled -= self.start;
            self.base += self.start as u64;
            self.start = 0;
        }
        if self.buf.capacity() > 2 * (self.filled + CHUNK) {
            // A large element has been handed out or let go: give back the room it took (the
            // buffer had doubled past `keep`, and would hold it while the element is converted).
            self.buf.truncate(self.filled + CHUNK);
            self.buf.shrink_to_fit();
        }
        if self.buf.len() < self.filled + CHUNK {
            self.buf.resize(self.filled + CHUNK, 0);
        }
        let n = self.reader.read(&mut self.buf[self.filled..])?;
        self.filled += n;
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// Skips blanks (and, in an array, the separating comma or the opening bracket) before the
    /// next element; `Ok(false)` at the end.
    fn skip_between(&mut self) -> Result<bool, SplitError> {
        loop {
            while self.start < self.filled {
                let b = self.buf[self.start];
                match (self.layout, b) {
                    (_, b'\n') => self.line += 1,
                    (_, b' ' | b'\t' | b'\r') => {}
                    (Layout::Array, b'[') if !self.opened => self.opened = true,
                    (Layout::Array, b',') if self.opened && self.index > 0 && !self.closed && !self.comma => {
                        self.comma = true
                    }
                    (Layout::Array, b']') if self.opened && !self.closed && (self.index == 0 || !self.comma) => {
                        self.closed = true;
                    }
                    _ if self.closed => return Err(self.error("nothing after the closing `]`")),
                    (Layout::Array, _) if !self.opened => return Err(self.error("a JSON array (`[`)")),
                    (Layout::Array, _) if self.index > 0 && !self.comma => return Err(self.error("`,` or `]`")),
                    (Layout::Array, b',' | b']') => return Err(self.error("an element")),
                    _ => return Ok(true),
                }
                self.start += 1;
            }
            if !self.fill().map_err(|e| self.error(&format!("a readable file ({e})")))? {
                return match self.layout {
                    Layout::Array if !self.closed => Err(self.error("the array's closing `]`")),
                    _ => Ok(false),
                };
            }
        }
    }

    fn error(&self, expected: &str) -> SplitError {
        SplitError { line: self.line, message: format!("expected {expected}") }
    }

    /// The next element, or `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Element<'_>, SplitError>> {
        match self.skip_between() {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        let (first_line, mut lines) = (self.line, 0);
        let (mut depth, mut in_string, mut escaped, mut objects) = (0usize, false, false, 0);
        let mut i = self.start;
        // Where the element starts in the input, once it has outgrown `keep` and is not kept.
        let mut far: Option<u64> = None;
        let end = 'scan: loop {
            if i == self.filled {
                let from = far.unwrap_or(self.base + self.start as u64);
                if self.base + i as u64 - from > self.cap as u64 {
                    return Some(Err(SplitError {
                        line: first_line,
                        message: format!("an element smaller than the {} MiB input cap", self.cap >> 20),
                    }));
                }
                if far.is_some() || i - self.start > self.keep {
                    // Scanned bytes are let go; only the place of the element is kept.
                    far = Some(from);
                    self.start = i;
                }
                let offset = i - self.start;
                let more = self.fill();
                // `fill` may have moved the element to the front of the buffer.
                i = self.start + offset;
                match more {
                    Ok(true) => continue,
                    Ok(false) => break i,
                    Err(e) => return Some(Err(self.error(&format!("a readable file ({e})")))),
                }
            }
            // The next window of up to 64 bytes, as bit masks (bit k: byte i + k).
            let n = (self.filled - i).min(WINDOW);
            let mut tail = [0u8; WINDOW];
            let w = match self.buf[i..self.filled].first_chunk::<WINDOW>() {
                Some(w) => w,
                None => {
                    tail[..n].copy_from_slice(&self.buf[i..i + n]);
                    &tail
                }
            };
            let within = if n == WINDOW { u64::MAX } else { (1u64 << n) - 1 };
            let marks = Marks::of(w);
            let inside = marks.strings(within, &mut in_string, &mut escaped);
            let mut structural = marks.structural & within & !inside;
            while structural != 0 {
                let k = structural.trailing_zeros() as usize;
                structural &= structural - 1;
                match w[k] {
                    b'{' => (depth, objects) = (depth + 1, objects + 1),
                    b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => {
                        depth -= 1;
                        if depth == 0 && self.layout == Layout::Array {
                            break 'scan i + k + 1;
                        }
                    }
                    // A scalar element ends at a separator; the array's `]` closes it.
                    b',' | b']' if depth == 0 && self.layout == Layout::Array => break 'scan i + k,
                    b'\n' if self.layout == Layout::Lines && depth == 0 => break 'scan i + k,
                    b'\n' => lines += 1,
                    _ => {}
                }
            }
            i += n;
        };
        let from = self.start;
        self.start = end;
        self.line += lines;
        self.comma = false;
        self.index += 1;
        let (index, line) = (self.index - 1, first_line);
        // One that came in whole but is larger than `keep` is handed out by its place too.
        let far = far.or_else(|| (end - from > self.keep).then(|| self.base + from as u64));
        Some(Ok(match far {
            Some(at) => Element { index, line, bytes: &[], far: Some(at..self.base + end as u64), objects },
            None => Element { index, line, bytes: &self.buf[from..end], far: None, objects },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives at most `.1` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Every element as (index, line, text), or the first error; `chunk` bytes per read so
    /// elements straddle reads.
    fn split(input: &str, layout: Layout, chunk: usize) -> Result<Vec<(usize, usize, String)>, SplitError> {
        split_keeping(input, layout, chunk, usize::MAX)
    }

    /// As [`split`], keeping at most `keep` bytes of an element: a larger one's text is read
    /// back from the input at the place it is handed out as.
    fn split_keeping(
        input: &str,
        layout: Layout,
        chunk: usize,
        keep: usize,
    ) -> Result<Vec<(usize, usize, String)>, SplitError> {
        let mut elements = Elements::new(Trickle(input.as_bytes(), chunk), layout, 1 << 20).keep_at_most(keep);
        let mut out = Vec::new();
        while let Some(e) = elements.next() {
            let e = e?;
            let bytes = match e.far {
                Some(r) => {
                    assert!(e.bytes.is_empty() && r.end - r.start > keep as u64, "only large elements are far");
                    &input.as_bytes()[r.start as usize..r.end as usize]
                }
                None => {
                    assert!(e.bytes.len() <= keep, "a kept element is small");
                    e.bytes
                }
            };
            out.push((e.index, e.line, String::from_utf8(bytes.to_vec()).unwrap()));
        }
        Ok(out)
    }

    fn texts(input: &str, layout: Layout) -> Vec<String> {
        let whole = split(input, layout, usize::MAX).unwrap();
        for chunk in [1, 2, 3, 7] {
            assert_eq!(split(input, layout, chunk).unwrap(), whole, "chunk {chunk}");
            for keep in [0, 1, 5] {
                assert_eq!(split_keeping(input, layout, chunk, keep).unwrap(), whole, "chunk {chunk}, keep {keep}");
            }
        }
        whole.into_iter().map(|(_, _, t)| t).collect()
    }

    #[test]
    fn array_elements_come_out_whole_with_their_lines() {
        let input = "[\n  {\"a\": [1, 2]},\n  {\"b\": {\"c\": 3}}\n]\n";
        let got = split(input, Layout::Array, usize::MAX).unwrap();
        assert_eq!(got, vec![(0, 2, "{\"a\": [1, 2]}".to_string()), (1, 3, "{\"b\": {\"c\": 3}}".to_string())]);
        assert_eq!(texts(input, Layout::Array).len(), 2);
    }

    #[test]
    fn brackets_quotes_and_escapes_inside_strings_do_not_split() {
        let input = r#"[{"s": "a ] , } [ { \" \\"}, {"t": "\\\""}, "x,]"]"#;
        assert_eq!(texts(input, Layout::Array), vec![r#"{"s": "a ] , } [ { \" \\"}"#, r#"{"t": "\\\""}"#, r#""x,]""#]);
    }

    #[test]
    fn scalars_and_empty_arrays() {
        assert_eq!(texts("[1, true ,null]", Layout::Array), vec!["1", "true ", "null"]);
        assert!(texts(" [ ] ", Layout::Array).is_empty());
    }

    #[test]
    fn jsonl_lines_skip_blanks_and_count_lines() {
        let input = "{\"a\": 1}\n\n  {\"b\": [2,\n3]}\n{\"c\": \"}\"}";
        let got = split(input, Layout::Lines, usize::MAX).unwrap();
        let lines: Vec<usize> = got.iter().map(|e| e.1).collect();
        assert_eq!(lines, vec![1, 3, 5]);
        assert_eq!(texts(input, Layout::Lines)[2], "{\"c\": \"}\"}");
    }

    #[test]
    fn syntax_the_splitter_sees_is_an_error_with_its_line() {
        let err = |input: &str| split(input, Layout::Array, 3).unwrap_err();
        assert_eq!(err("{}").message, "expected a JSON array (`[`)");
        assert_eq!(err("[{}, {}\n").message, "expected the array's closing `]`");
        assert_eq!(err("[{}, {}\n").line, 2);
        let after = err("[{}]\n\nx");
        assert_eq!((after.line, after.message.as_str()), (3, "expected nothing after the closing `]`"));
        assert_eq!(err("[{} {}]").message, "expected `,` or `]`");
        assert_eq!(err("[{},\n,{}]").line, 2);
        assert_eq!(err("[{},\n]").message, "expected an element");
    }

    /// The cap bounds each element, wherever it lies in the input: lines of exactly the cap
    /// all come out, kept or not, and a line one byte over it is refused.
    #[test]
    fn the_cap_is_on_each_element_not_its_place_in_the_input() {
        let line = |len: usize| format!("\"{}\"", "x".repeat(len - 2));
        let at_cap = [line(100), line(100), line(100), line(100)].join("\n");
        let over = [line(100), line(101)].join("\n");
        for chunk in [1, 7, 4096] {
            for keep in [usize::MAX, 10] {
                let mut elements =
                    Elements::new(Trickle(at_cap.as_bytes(), chunk), Layout::Lines, 100).keep_at_most(keep);
                let mut count = 0;
                while let Some(e) = elements.next() {
                    assert!(e.is_ok(), "chunk {chunk}, keep {keep}: element {count} refused");
                    count += 1;
                }
                assert_eq!(count, 4);
                let mut elements =
                    Elements::new(Trickle(over.as_bytes(), chunk), Layout::Lines, 100).keep_at_most(keep);
                assert!(elements.next().unwrap().is_ok());
                let err = elements.next().unwrap().err().expect("over the cap");
                assert_eq!(err.line, 2, "chunk {chunk}, keep {keep}");
            }
        }
    }

    #[test]
    fn the_room_a_large_element_took_is_given_back() {
        // 6 MiB kept up to 3 MiB: the buffer grows past 4 MiB (its capacity doubles) before the
        // element is let go; the next fill shrinks it back while the element is converted.
        let big = format!("[{{\"s\": \"{}\"}},\n{{\"small\": 1}},\n{{\"small\": 2}}]", "x".repeat(6 << 20));
        let mut elements = Elements::new(big.as_bytes(), Layout::Array, 16 << 20).keep_at_most(3 << 20);
        assert!(elements.next().unwrap().unwrap().far.is_some());
        assert_eq!(elements.next().unwrap().unwrap().bytes, b"{\"small\": 1}");
        assert!(elements.buf.capacity() <= 2 * CHUNK + 64, "capacity {}", elements.buf.capacity());
        assert_eq!(elements.next().unwrap().unwrap().bytes, b"{\"small\": 2}");
        assert!(elements.next().is_none());
    }

    #[test]
    fn an_element_over_the_cap_is_refused() {
        let big = format!("[{{\"s\": \"{}\"}}]", "x".repeat(3 << 20));
        for keep in [usize::MAX, 1000] {
            let mut elements = Elements::new(big.as_bytes(), Layout::Array, 1 << 20).keep_at_most(keep);
            let err = elements.next().unwrap().err().unwrap();
            assert_eq!(err.line, 1);
            assert!(err.message.contains("1 MiB"), "{}", err.message);
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z\\[\\]{},:\"\\\\\n é]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\"\\]]{0,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// [`Marks::strings`] a byte at a time: bytes inside a string, and the state after `n` bytes.
    fn strings_one_by_one(w: &[u8], mut in_string: bool, mut escaped: bool) -> (u64, bool, bool) {
        let mut inside = 0u64;
        for (k, &b) in w.iter().enumerate() {
            if !in_string {
                in_string = b == b'"';
            } else if escaped {
                escaped = false;
            } else if b == b'"' {
                in_string = false;
            } else {
                escaped = b == b'\\';
            }
            inside |= u64::from(in_string) << k;
        }
        (inside, in_string, escaped)
    }

    /// Windows made mostly of the bytes the splitter looks at.
    fn arb_window() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let byte = prop_oneof![
            Just(b'"'),
            Just(b'\\'),
            Just(b'{'),
            Just(b'}'),
            Just(b'['),
            Just(b']'),
            Just(b','),
            Just(b'\n'),
            Just(b'a'),
            any::<u8>()
        ];
        proptest::collection::vec(byte, 0..=WINDOW)
    }

    proptest::proptest! {
        /// The wide comparisons find the same bytes as a byte-at-a-time look.
        #[test]
        fn marks_are_found_sixteen_bytes_at_a_time(w in arb_window()) {
            let mut window = [0u8; WINDOW];
            window[..w.len()].copy_from_slice(&w);
            proptest::prop_assert_eq!(Marks::of(&window), Marks::one_by_one(&window));
        }

        /// Strings, escapes and the state carried to the next window are those of a byte-at-a-
        /// time walk, backslashes outside strings (not JSON) included.
        #[test]
        fn strings_of_a_window_are_those_of_a_walk(
            w in arb_window(),
            in_string in proptest::prelude::any::<bool>(),
            escaped in proptest::prelude::any::<bool>(),
        ) {
            proptest::prop_assume!(!w.is_empty(), "the splitter never looks at an empty window");
            let escaped = escaped && in_string;
            let mut window = [0u8; WINDOW];
            window[..w.len()].copy_from_slice(&w);
            let within = if w.len() == WINDOW { u64::MAX } else { (1u64 << w.len()) - 1 };
            let (mut s, mut e) = (in_string, escaped);
            let inside = Marks::of(&window).strings(within, &mut s, &mut e);
            proptest::prop_assert_eq!((inside & within, s, e), strings_one_by_one(&w, in_string, escaped));
        }

        /// However the reads fall (one byte at a time: a window per byte), any input, JSON or
        /// not, splits as it does read whole.
        #[test]
        fn reads_of_any_size_split_alike(w in proptest::collection::vec(arb_window(), 0..8), chunk in 1usize..80) {
            let input: Vec<u8> = std::iter::once(b'[').chain(w.into_iter().flatten()).collect();
            let Ok(input) = String::from_utf8(input) else { return Ok(()) };
            for layout in [Layout::Array, Layout::Lines] {
                proptest::prop_assert_eq!(split(&input, layout, chunk), split(&input, layout, usize::MAX));
            }
        }

        /// Whatever the values, however the reads fall, each element's bytes parse back to the
        /// value written, in an array (compact or pretty) and in JSONL.
        #[test]
        fn elements_parse_back_to_what_was_written(
            values in proptest::collection::vec(arb_json(), 0..6),
            chunk in 1usize..64,
            keep in proptest::prop_oneof![proptest::strategy::Just(usize::MAX), 0usize..40],
            pretty in proptest::prelude::any::<bool>(),
        ) {
            let array = if pretty {
                serde_json::to_string_pretty(&values).unwrap()
            } else {
                serde_json::to_string(&values).unwrap()
            };
            let jsonl: String = values.iter().map(|v| v.to_string() + "\n").collect();
            for (text, layout) in [(array, Layout::Array), (jsonl, Layout::Lines)] {
                let got = split_keeping(&text, layout, chunk, keep).unwrap();
                let parsed: Vec<serde_json::Value> =
                    got.iter().map(|(_, _, t)| serde_json::from_str(t).unwrap()).collect();
                proptest::prop_assert_eq!(&parsed, &values);
                for (i, (index, line, t)) in got.iter().enumerate() {
                    proptest::prop_assert_eq!(*index, i);
                    // The element starts on the line it names.
                    let first = t.lines().next().unwrap_or_default();
                    proptest::prop_assert!(text.lines().nth(line - 1).is_some_and(|l| l.contains(first)));
                    if layout == Layout::Lines {
                        proptest::prop_assert_eq!(*line, i + 1);
                    }
                }
            }
        }
    }
}
