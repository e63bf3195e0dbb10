//! Names the user controls (scenario and strategy names, trace ids, tool names, paths) made
//! safe for each output they land in: a POSIX shell line, Markdown, CSV cells, XML and JSON
//! inlined in HTML, and a terminal.

use std::borrow::Cow;

/// Text made safe for a terminal: control characters (escape sequences that could move the
/// cursor, clear the screen or set the title included) are shown as `\u{..}`.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() }).collect())
}

/// Words as one POSIX shell command line: plain words (`--run`, `42`, `scenarios/01-x.toml`)
/// as they are, every other one quoted so the shell reads it back as the same single word. A
/// NUL, which no argument can hold, is written U+FFFD.
pub fn shell_line<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    let quoter = shlex::Quoter::new();
    let quoted: Vec<String> = words
        .into_iter()
        .map(|w| {
            let w = if w.contains('\0') { Cow::Owned(w.replace('\0', "\u{FFFD}")) } else { Cow::Borrowed(w) };
            // With no NUL left the quoter cannot fail.
            quoter.quote(&w).map_or_else(|_| "''".to_owned(), Cow::into_owned)
        })
        .collect();
    quoted.join(" ")
}

/// A name in Markdown text (a heading, a list item, a table cell): on one line, `|` unable
/// to end a cell, no HTML, and nothing in it read as emphasis, a link, code, math or the
/// start of a block.
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    // An ordered-list marker at the start (`1.`, `12)`): its punctuation is escaped.
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    for (i, c) in s.char_indices() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '-' | '+' | '=' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            '.' | ')' if i == digits && digits > 0 => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text as a Markdown code span: on one line (control characters shown as `\u{..}`), fenced
/// by more backticks than any run of them inside, so it cannot end early.
pub fn md_code(s: &str) -> String {
    let s = printable(s).replace(['\u{2028}', '\u{2029}'], " ");
    if s.is_empty() {
        return "` `".to_owned();
    }
    let (mut run, mut longest) = (0, 0);
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    // A space each side is stripped again when both are there: it keeps a backtick at either
    // end from joining the fence, and spaces at both ends as they were.
    let pad = s.starts_with('`') || s.ends_with('`') || (s.starts_with(' ') && s.ends_with(' '));
    let pad = if pad { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// [`md_code`] in a GitHub table cell, where a `|` ends the cell even inside a code span
/// unless escaped (the table reads `\|` back as `|`).
pub fn md_code_in_table(s: &str) -> String {
    md_code(s).replace('|', "\\|")
}

/// A CSV cell holding a name: one starting with `=`, `+`, `-`, `@`, a tab or a CR gets a
/// leading `'`, so a spreadsheet shows it instead of evaluating it as a formula (OWASP, CSV
/// injection). Only for text: numbers are written as they are.
pub fn csv_text(s: &str) -> Cow<'_, str> {
    if s.starts_with(FORMULA_STARTS) { Cow::Owned(format!("'{s}")) } else { Cow::Borrowed(s) }
}

/// What a spreadsheet would read as the start of a formula.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A name cell read back: [`csv_text`] undone, so it matches the name where it was not escaped.
pub fn csv_text_read(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(FORMULA_STARTS) => rest,
        _ => cell,
    }
}

/// Name cells as the start of a CSV row (`a,b,`): each through [`csv_text`], quoted by the
/// csv crate where it needs it (a comma, a quote, a CR or a LF). Written as a record of its
/// own whose line end becomes the comma: a writer ending records with `,` would quote neither
/// CR nor LF.
pub fn csv_names(names: &[&str]) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    let cells: Vec<Cow<'_, str>> = names.iter().map(|n| csv_text(n)).collect();
    // Writing to memory cannot fail.
    let _ = w.write_record(cells.iter().map(|c| c.as_bytes()));
    let mut bytes = w.into_inner().unwrap_or_default();
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    bytes.push(b',');
    bytes
}

/// Text for XML (and HTML) content and attribute values: the five special characters as
/// entities; characters XML 1.0 does not allow (C0 controls but tab, LF and CR; U+FFFE, U+FFFF)
/// as U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// JSON text to inline in an HTML `<script>` block: `<`, `>` and `&` as `\u003c`, `\u003e` and
/// `\u0026` (no `</script>`, `<!--` or `<script` can open or close anything), U+2028 and U+2029
/// as `\u2028` and `\u2029` (line ends to older JavaScript). These occur only inside JSON
/// strings, where the escapes mean the same characters.
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a POSIX shell reads from `line` (the test machine's `sh`).
    fn sh_words(line: &str) -> Vec<String> {
        let out =
            std::process::Command::new("sh").arg("-c").arg(format!("printf '%s\\0' {line}")).output().expect("sh runs");
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        text.split_terminator('\0').map(str::to_owned).collect()
    }

    #[test]
    fn csv_text_reads_back_as_written() {
        for name in ["=cmd", "+1", "-x", "@a", "\tt", "plain", "'quoted"] {
            assert_eq!(csv_text_read(&csv_text(name)), name, "{name:?}");
        }
    }

    #[test]
    fn shell_lines_leave_plain_words_and_quote_the_rest() {
        assert_eq!(
            shell_line(["tracefault", "run", "scenarios/01-x.toml", "--strategy", "five-field", "--run", "42"]),
            "tracefault run scenarios/01-x.toml --strategy five-field --run 42"
        );
        assert_eq!(shell_line(["x; touch PWNED #"]), "'x; touch PWNED #'");
        assert_eq!(shell_line(["a b", ""]), "'a b' ''");
        let hostile = [
            "x; touch PWNED #",
            "it's",
            "$(id)",
            "`id`",
            "a\\b\"c'd",
            "new\nline",
            "tab\there",
            "!event",
            "^x",
            "~root",
            "*",
            "é",
            "-",
            "",
        ];
        for w in hostile {
            assert_eq!(sh_words(&shell_line([w])), [w], "{:?} -> {}", w, shell_line([w]));
        }
        assert_eq!(sh_words(&shell_line(hostile)), hostile);
        assert_eq!(shell_line(["a\0b"]), "'a\u{FFFD}b'");
    }

    #[test]
    fn markdown_text_cannot_start_blocks_or_inline_markup() {
        assert_eq!(md_text("five-field"), "five-field");
        assert_eq!(md_text("worked-example-503-503-400"), "worked-example-503-503-400");
        assert_eq!(md_text("x\n# Result: all gates passed."), "x \\# Result: all gates passed.");
        assert_eq!(md_text("a|b"), "a\\|b");
        assert_eq!(md_text("<img src=x onerror=alert(1)>"), "&lt;img src=x onerror=alert(1)&gt;");
        assert_eq!(md_text("[x](http://e) *b* _i_ `c` $m$"), "\\[x\\](http://e) \\*b\\* \\_i\\_ \\`c\\` \\$m\\$");
        assert_eq!(md_text("- item"), "\\- item");
        assert_eq!(md_text("12. x"), "12\\. x");
        assert_eq!(md_text("3) x"), "3\\) x");
        assert_eq!(md_text("1.5x"), "1\\.5x");
        assert_eq!(md_text("&amp;"), "&amp;amp;");
        assert_eq!(md_text("a\r\u{2028}b"), "a  b");
    }

    #[test]
    fn markdown_code_spans_outlast_backticks_inside() {
        assert_eq!(md_code("tracefault run x"), "`tracefault run x`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("``x"), "``` ``x ```");
        assert_eq!(md_code("x`"), "`` x` ``");
        assert_eq!(md_code(" x "), "`  x  `");
        assert_eq!(md_code("a\nb"), "`a\\u{a}b`");
        assert_eq!(md_code(""), "` `");
        assert_eq!(md_code_in_table("'a|b'"), "`'a\\|b'`");
    }

    #[test]
    fn csv_text_guards_formulas_and_leaves_the_rest() {
        for s in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(csv_text(s), format!("'{s}"));
        }
        for s in ["five-field", "a=b", "", "1"] {
            assert_eq!(csv_text(s), s);
        }
        assert_eq!(csv_names(&["a", "b"]), b"a,b,");
        assert_eq!(csv_names(&["=x", "a,b"]), b"'=x,\"a,b\",");
        assert_eq!(csv_names(&["a\rb", "c\nd"]), b"\"a\rb\",\"c\nd\",");
    }

    #[test]
    fn xml_text_has_only_allowed_characters() {
        assert_eq!(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
        assert_eq!(xml_escape("\u{0}\u{1b}\u{fffe}\u{ffff}\t\n\r"), "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\t\n\r");
        assert_eq!(xml_escape("héllo"), "héllo");
    }

    #[test]
    fn inline_json_cannot_end_or_open_a_script() {
        let json = serde_json::to_string(&serde_json::json!({"s": "</script><!--<script>&\u{2028}\u{2029}"})).unwrap();
        let safe = script_json(&json);
        assert_eq!(safe, r#"{"s":"\u003c/script\u003e\u003c!--\u003cscript\u003e\u0026\u2028\u2029"}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
            serde_json::from_str::<serde_json::Value>(&json).unwrap()
        );
    }
}
