//! The seeded generator of bad inputs: note files, record lines, queries and settings values,
//! each with what reading it must give. Same seed, same corpus.

use std::path::Path;

/// A small deterministic generator (splitmix64): no dependency, same sequence everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// Some plain words.
    pub fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| *self.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

const WORDS: &[&str] = &[
    "token", "backup", "deploy", "cache", "refresh", "expired", "database", "nightly", "client",
    "restore", "engineer", "rotation", "snapshot", "warmup", "the", "of", "a", "kernel", "queue",
];

/// Characters that trouble text handling: zero-width, bidi controls, combining marks, BOM,
/// replacement, private use, astral.
pub const TRICKY: &[char] = &[
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{202e}',
    '\u{202d}',
    '\u{200f}',
    '\u{200e}',
    '\u{2066}',
    '\u{2069}',
    '\u{0301}',
    '\u{0336}',
    '\u{fffd}',
    '\u{e000}',
    '\u{1f980}',
    'ß',
    'İ',
    'ﬁ',
    '½',
    '\u{05d0}',
    '\u{0627}',
    '\u{00a0}',
    '\u{3000}',
];

/// A unique word for case `n`, made of letters only so the analyzer keeps it whole.
pub fn marker(n: usize) -> String {
    let mut s = String::from("qz");
    let mut n = n;
    for _ in 0..4 {
        s.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
    }
    s.push_str("xv");
    s
}

/// What reading one note file must give.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// A source and no problem.
    Source,
    /// A source, and a front-matter problem at a line up to `last_line` when the YAML fails.
    SourceMaybeProblem { last_line: usize },
    /// A source and a front-matter problem at a line up to `last_line` whose reason starts
    /// with `reason`.
    SourceAndProblem {
        last_line: usize,
        reason: &'static str,
    },
    /// No source; one problem at the file (with `line` when given) whose reason contains
    /// `reason`.
    Refused {
        line: Option<usize>,
        reason: &'static str,
    },
}

/// One generated note file.
pub struct NoteCase {
    /// File name under the bad folder (the source id is `bad/<name>`).
    pub name: String,
    pub bytes: Vec<u8>,
    pub expect: Expect,
    /// A word only this note holds, when it should be searchable.
    pub marker: Option<String>,
    pub kind: &'static str,
}

/// What any bytes give, by the rules ingestion states: UTF-16 and NULs refused, invalid UTF-8
/// refused at its line, front matter maybe a problem, anything else a source.
pub fn expect_of(bytes: &[u8]) -> Expect {
    if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        return Expect::Refused {
            line: None,
            reason: "UTF-16",
        };
    }
    if bytes.contains(&0) {
        return Expect::Refused {
            line: None,
            reason: "binary file",
        };
    }
    match std::str::from_utf8(bytes) {
        Err(e) => Expect::Refused {
            line: Some(
                1 + bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count(),
            ),
            reason: "not valid UTF-8",
        },
        Ok(text) => {
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            let first = text.split('\n').next().unwrap_or("");
            if first.trim_end() == "---" {
                Expect::SourceMaybeProblem {
                    last_line: 1 + text.matches('\n').count(),
                }
            } else {
                Expect::Source
            }
        }
    }
}

/// Generates the note cases: invalid UTF-8, binary files, front matter of every bad shape,
/// Unicode abuse, Markdown syntax abuse and empty files. `big` adds the huge files.
pub fn note_cases(rng: &mut Rng, first_marker: usize, big: bool) -> Vec<NoteCase> {
    let mut notes = Notes {
        out: Vec::new(),
        n: first_marker,
    };
    let out = &mut notes;

    // Invalid UTF-8 at a random line.
    const INVALID: &[&[u8]] = &[
        b"\xff",
        b"\xc3",
        b"\xe2\x82",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xf5\x80\x80\x80",
        b"\x80",
        b"\xf0\x9f\xa6",
    ];
    for i in 0..120 {
        let lines = rng.range(1, 30);
        let at = rng.below(lines);
        let mut bytes = Vec::new();
        for l in 0..lines {
            let k = rng.range(0, 12);
            bytes.extend_from_slice(rng.words(k).as_bytes());
            if l == at {
                let invalid: &&[u8] = rng.pick(INVALID);
                bytes.extend_from_slice(invalid);
            }
            bytes.push(b'\n');
        }
        out.push("invalid-utf8", format!("utf8-{i}.md"), bytes, None, false);
    }
    // UTF-16 with a byte-order mark, both orders.
    for (i, bom) in [[0xffu8, 0xfe], [0xfe, 0xff]].iter().enumerate() {
        let mut bytes = bom.to_vec();
        for c in "# Title\nbody".encode_utf16() {
            let pair = if i == 0 {
                c.to_le_bytes()
            } else {
                c.to_be_bytes()
            };
            bytes.extend_from_slice(&pair);
        }
        out.push("utf16", format!("utf16-{i}.md"), bytes, None, false);
    }

    // Binary files: headers of real formats, NULs, random bytes.
    const HEADERS: &[&[u8]] = &[
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        b"PK\x03\x04\x14\0\0\0\x08\0",
        b"\x1f\x8b\x08\0\0\0\0\0",
        b"\x7fELF\x02\x01\x01\0",
        b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n",
        b"\xff\xd8\xff\xe0\0\x10JFIF\0",
        b"GIF89a\x01\0\x01\0",
        b"SQLite format 3\0",
    ];
    for i in 0..160 {
        let mut bytes = match i % 4 {
            0 => rng.pick(HEADERS).to_vec(),
            1 => vec![0; rng.range(1, 64)],
            2 => format!("# Note {i}\n{}\0{}\n", rng.words(5), rng.words(5)).into_bytes(),
            _ => Vec::new(),
        };
        let len = rng.range(1, 3000);
        bytes.extend(rng.bytes(len));
        let ext = rng.pick(&["md", "txt", "markdown", "MD"]);
        out.push("binary", format!("binary-{i}.{ext}"), bytes, None, false);
    }
    // Random bytes that happen to be valid UTF-8 (ASCII noise and control characters).
    for i in 0..40 {
        let len = rng.range(1, 2000);
        let bytes: Vec<u8> = (0..len).map(|_| 1 + (rng.next() % 127) as u8).collect();
        out.push("ascii-noise", format!("noise-{i}.md"), bytes, None, false);
    }

    // Front matter of every bad shape; the body always holds the marker.
    for i in 0..260 {
        let body = |m: &str, rng: &mut Rng| format!("\n# Heading {i}\n\n{} {m}\n", rng.words(8));
        let m = out.next_marker();
        let variant = i % 13;
        let (fm, expect): (String, Option<Expect>) = match variant {
            // Flow nesting past YAML's recursion limit.
            0 => {
                let depth = rng.range(200, 6000);
                (
                    format!("---\nx: {}\n---", "[".repeat(depth)),
                    Some(Expect::SourceAndProblem {
                        last_line: 3,
                        reason: "front matter is not valid YAML",
                    }),
                )
            }
            // Block nesting past the limit.
            1 => {
                let depth = rng.range(150, 400);
                let mut fm = String::from("---\n");
                for d in 0..depth {
                    fm.push_str(&format!("{}k{d}:\n", " ".repeat(d)));
                }
                fm.push_str(&format!("{}leaf: 1\n---", " ".repeat(depth)));
                let last = depth + 3;
                (
                    fm,
                    Some(Expect::SourceAndProblem {
                        last_line: last,
                        reason: "front matter is not valid YAML",
                    }),
                )
            }
            // Valid front matter with one random corruption.
            2 => {
                let mut fm = format!(
                    "title: Note {i}\ntags: [a, b]\ndate: 2024-01-0{}\nteam: x",
                    1 + i % 9
                );
                let at = rng.below(fm.len());
                let junk = *rng.pick(&[
                    "\"", "'", "[", "{", ": :", "\t", "- ", "&", "*x", "!", "%", "@", "`", "|\n",
                ]);
                if fm.is_char_boundary(at) {
                    fm.insert_str(at, junk);
                }
                (format!("---\n{fm}\n---"), None)
            }
            // Not a mapping.
            3 => {
                let doc = *rng.pick(&[
                    "- a\n- b",
                    "just text",
                    "42",
                    "[1, 2]",
                    "\"quoted\"",
                    "true",
                    "|\n  block",
                    "!!binary aGk=",
                ]);
                (
                    format!("---\n{doc}\n---"),
                    Some(Expect::SourceAndProblem {
                        last_line: 5,
                        reason: "front matter is not",
                    }),
                )
            }
            // Duplicate keys.
            4 => {
                let key = *rng.pick(&["title", "tags", "date", "team"]);
                (
                    format!("---\n{key}: one\nother: x\n{key}: two\n---"),
                    Some(Expect::SourceAndProblem {
                        last_line: 5,
                        reason: "front matter is not valid YAML",
                    }),
                )
            }
            // Huge but valid: many keys or one huge value.
            5 => {
                let fm = if rng.chance(50) {
                    (0..rng.range(2_000, 12_000))
                        .map(|k| format!("key{k}: value {k}\n"))
                        .collect::<String>()
                } else {
                    format!(
                        "title: {}\nsummary: {}\n",
                        rng.words(2_000),
                        "s".repeat(200_000)
                    )
                };
                (format!("---\n{fm}---"), Some(Expect::Source))
            }
            // Never closed: the whole file is the body.
            6 => (
                format!("---\ntitle: open {i}\ntags: [x]"),
                Some(Expect::SourceAndProblem {
                    last_line: 1,
                    reason: "front matter has no closing",
                }),
            ),
            // Wrong types for the known keys: read leniently, no problem.
            7 => {
                let fm = *rng.pick(&[
                    "title: [a, b]\ntags: {a: 1}\ndate: [2024]\nsummary: {x: 1}",
                    "title: {nested: {deeper: 1}}\ntags: 42\ndate: true",
                    "title: ~\ntags: [[a], {b: c}, 3, null]\nextra: [1, 2]",
                    "title: 1e400\ndate: .nan\npriority: -.inf\nbig: 123456789012345678901234567890",
                ]);
                // A number too big for the YAML reader makes the block unreadable.
                let expect = if fm.contains("1234567890123") {
                    Expect::SourceMaybeProblem { last_line: 6 }
                } else {
                    Expect::Source
                };
                (format!("---\n{fm}\n---"), Some(expect))
            }
            // Alias expansion bombs and anchors.
            8 => {
                let mut fm = String::from("---\na: &a [x, x, x, x, x, x, x, x, x]\n");
                for level in 1..rng.range(3, 9) {
                    let prev = (b'a' + level as u8 - 1) as char;
                    let this = (b'a' + level as u8) as char;
                    fm.push_str(&format!("{this}: &{this} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
                }
                fm.push_str("---");
                let last = 1 + fm.matches('\n').count();
                (fm, Some(Expect::SourceMaybeProblem { last_line: last }))
            }
            // YAML oddities: tags, complex keys, directives, document markers, merges.
            9 => {
                let fm = *rng.pick(&[
                    "!!map {title: x}",
                    "? [a, b]\n: complex key",
                    "%YAML 1.2\n---\ntitle: directive",
                    "title: !custom x\ntags: !!set {a, b}",
                    "<<: {title: merged}\nbase: &b {x: 1}\nuse: *b",
                    "title: *undefined",
                    "title: 'unterminated",
                    "\ttitle: tabbed",
                    "title: x\n  bad indent: y",
                ]);
                let last = 3 + fm.matches('\n').count();
                (
                    format!("---\n{fm}\n---"),
                    Some(Expect::SourceMaybeProblem { last_line: last }),
                )
            }
            // Tricky characters in title, tags and values.
            10 => {
                let t: String = (0..rng.range(1, 12)).map(|_| *rng.pick(TRICKY)).collect();
                (
                    format!(
                        "---\ntitle: \"Note{t}{i}\"\ntags: [\"{t}\", \"a{t}b\"]\nwho: \"{t}\"\n---"
                    ),
                    Some(Expect::Source),
                )
            }
            // Empty front matter, BOM, CRLF, dots close.
            11 => {
                let fm = *rng.pick(&[
                    "---\n---",
                    "\u{feff}---\n---",
                    "---\r\ntitle: crlf\r\n---\r",
                    "---\ntitle: dots\n...",
                    "--- \n---   ",
                ]);
                (fm.to_string(), Some(Expect::Source))
            }
            // A fence line that is almost one.
            _ => {
                let fm = *rng.pick(&[
                    "----\ntitle: x\n----",
                    "-- -\n---",
                    " ---\ntitle: x\n---",
                    "---x\n---",
                ]);
                (fm.to_string(), Some(Expect::Source))
            }
        };
        let text = format!("{fm}{}", body(&m, rng));
        let expect = match expect {
            // The body is a file line too: widen the last line a problem may name.
            Some(Expect::SourceMaybeProblem { last_line }) => Expect::SourceMaybeProblem {
                last_line: last_line.max(1 + text.matches('\n').count()),
            },
            Some(e) => e,
            None => expect_of(text.as_bytes()),
        };
        out.push(
            "front-matter",
            format!("fm-{i}.md"),
            text.into_bytes(),
            Some(expect),
            true,
        );
    }

    // Zero-width, bidi and combining characters in text, headings, links, tags and names.
    for i in 0..140 {
        let t: String = (0..rng.range(1, 8)).map(|_| *rng.pick(TRICKY)).collect();
        let m = out.next_marker();
        let text = format!(
            "# Ti{t}tle {i}\n\n{} {m} [[li{t}nk]] [x{t}](./a{t}.md) #ta{t}g {t}\n\n## {t}\n\n{}{t}{}\n",
            rng.words(6),
            "\u{0301}".repeat(rng.range(0, 500)),
            rng.words(4)
        );
        let name = match i % 4 {
            0 => format!("uni-{i}-\u{202e}dm.md"),
            1 => format!("uni-{i}\u{200b}.md"),
            2 => format!("uni-{i}-{t}.md").replace(['/', '\0'], "_"),
            _ => format!("uni-{i}.md"),
        };
        out.push(
            "unicode",
            name,
            text.into_bytes(),
            Some(Expect::Source),
            true,
        );
    }

    // Markdown syntax abuse.
    for i in 0..120 {
        let m = out.next_marker();
        let k = rng.range(50, 3000);
        let abuse = match i % 15 {
            0 => "```\n".repeat(k),
            1 => "#".repeat(k),
            2 => format!("{}\n", "# ".repeat(k)),
            3 => "[[".repeat(k),
            4 => "](".repeat(k),
            5 => "`".repeat(k),
            6 => (0..k)
                .map(|d| format!("{}- item\n", "  ".repeat(d % 200)))
                .collect(),
            7 => format!("|{}\n|{}\n", "a|".repeat(k), "-|".repeat(k)),
            8 => format!("<!-- {}", "<div>".repeat(k)),
            9 => format!("[[{}]] [x]({})", "t".repeat(k), "d".repeat(k)),
            10 => "a\r".repeat(k),
            11 => "~~~\n```\n".repeat(k / 2),
            12 => format!("{}\n", "![[".repeat(k)),
            13 => "\\".repeat(k),
            _ => "*_~".repeat(k),
        };
        let text = format!("{} {m}\n\n{abuse}\n\n{}\n", rng.words(4), rng.words(4));
        out.push(
            "markdown",
            format!("md-{i}.md"),
            text.into_bytes(),
            Some(Expect::Source),
            true,
        );
    }

    // Empty and blank files.
    for (i, text) in [
        "",
        " ",
        "\n\n\n",
        "\u{feff}",
        "\r\n",
        "\t\t",
        "\u{200b}",
        "---\n---\n",
    ]
    .iter()
    .enumerate()
    {
        out.push(
            "empty",
            format!("empty-{i}.md"),
            text.as_bytes().to_vec(),
            Some(Expect::Source),
            false,
        );
    }

    documents(out, rng);
    if big {
        big_notes(out, rng);
    }
    notes.out
}

/// Documents of the other formats gone wrong: random bytes and zip headers named `.pdf` and
/// `.docx` (refused with the format named), HTML with nothing readable (refused), tag soup
/// and broken Org around a marker (read as far as they go).
fn documents(out: &mut Notes, rng: &mut Rng) {
    for i in 0..6 {
        let mut pdf = b"%PDF-1.7\n".to_vec();
        pdf.extend({
            let n = rng.range(0, 4096);
            rng.bytes(n)
        });
        let refused = |reason| Some(Expect::Refused { line: None, reason });
        out.push(
            "document",
            format!("doc-{i}.pdf"),
            pdf,
            refused("PDF file"),
            false,
        );
        let docx = if i % 2 == 0 {
            {
                let n = rng.range(0, 2048);
                rng.bytes(n)
            }
        } else {
            let mut zip = b"PK\x03\x04".to_vec();
            zip.extend({
                let n = rng.range(0, 2048);
                rng.bytes(n)
            });
            zip
        };
        out.push(
            "document",
            format!("doc-{i}.docx"),
            docx,
            refused("DOCX file"),
            false,
        );
        let empty = [
            "",
            "<html></html>",
            "<script>only()</script>",
            "<style>p{}</style><nav>x</nav>",
        ];
        out.push(
            "document",
            format!("doc-empty-{i}.html"),
            {
                let e: &&str = rng.pick(&empty);
                e.as_bytes().to_vec()
            },
            refused("HTML file"),
            false,
        );
        let soup = [
            "<div><p>",
            "<b>",
            "</i>",
            "<table><td>",
            "<h2>",
            "&amp;",
            "<li>",
            "\u{200f}",
        ];
        let mut html = String::new();
        let rounds = rng.range(1, 40);
        for _ in 0..rounds {
            let piece: &&str = rng.pick(&soup);
            html.push_str(piece);
            html.push_str(&{
                let n = rng.range(0, 4);
                rng.words(n)
            });
        }
        html.push_str(&format!("<p>{}</p>", out.next_marker()));
        out.push(
            "document",
            format!("doc-soup-{i}.html"),
            html.into_bytes(),
            Some(Expect::Source),
            true,
        );
        let pieces = [
            "* ",
            "** TODO ",
            ":PROPERTIES:\n",
            ":END:\n",
            "#+BEGIN_SRC\n",
            "[[",
            "]]",
            "][",
            "#+TITLE:",
            "\n",
            "- [ ] ",
            "<2024-01-01>",
        ];
        let mut org = String::new();
        let rounds = rng.range(1, 40);
        for _ in 0..rounds {
            let piece: &&str = rng.pick(&pieces);
            org.push_str(piece);
            org.push_str(&{
                let n = rng.range(0, 4);
                rng.words(n)
            });
        }
        org.push_str(&format!("\n\n{}\n", out.next_marker()));
        out.push(
            "document",
            format!("doc-{i}.org"),
            org.into_bytes(),
            Some(Expect::Source),
            true,
        );
    }
}

/// The cases made so far and the next marker number.
struct Notes {
    out: Vec<NoteCase>,
    n: usize,
}

impl Notes {
    /// The marker the next case gets.
    fn next_marker(&self) -> String {
        marker(self.n)
    }

    /// Adds a case; `expect` None means "as the rules say for these bytes"; `marked` cases
    /// that should give a source are checked to be searchable by their marker.
    fn push(
        &mut self,
        kind: &'static str,
        name: String,
        bytes: Vec<u8>,
        expect: Option<Expect>,
        marked: bool,
    ) {
        let expect = expect.unwrap_or_else(|| expect_of(&bytes));
        let source = !matches!(expect, Expect::Refused { .. });
        let marker = (marked && source).then(|| marker(self.n));
        self.n += 1;
        self.out.push(NoteCase {
            name,
            bytes,
            expect,
            marker,
            kind,
        });
    }
}

/// The huge files: megabytes on one line, runaway headings and brackets.
fn big_notes(out: &mut Notes, rng: &mut Rng) {
    let mut add = |name: &str, text: String| {
        let text = text.replace("MARKER", &out.next_marker());
        out.push(
            "huge",
            name.to_string(),
            text.into_bytes(),
            Some(Expect::Source),
            true,
        );
    };
    // 20 MB on one line, no line break at all.
    let mut line = String::with_capacity(20 << 20);
    while line.len() < 20 << 20 {
        line.push_str(&rng.words(64));
        line.push(' ');
    }
    line.push_str("MARKER");
    add("huge-line.md", line);
    add(
        "huge-brackets.md",
        format!("MARKER {}", "[".repeat(3 << 20)),
    );
    add(
        "huge-heading.md",
        format!("# {}\n\nMARKER\n", rng.words(300_000)),
    );
    add("huge-word.md", format!("MARKER\n\n{}", "x".repeat(3 << 20)));
    add(
        "huge-backticks.md",
        format!("MARKER\n\n{}", "`` `x` ".repeat(200_000)),
    );
    add(
        "huge-lines.md",
        (0..150_000)
            .map(|i| {
                format!(
                    "- [[note-{}]] #t{} {}\n",
                    i % 97,
                    i % 13,
                    if i == 7 { "MARKER" } else { "" }
                )
            })
            .collect(),
    );
}

/// What reading one record line must give.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordExpect {
    /// A source with this id (searchable by `marker` when given).
    Source { id: String, marker: Option<String> },
    /// A problem at the line whose reason contains this.
    Problem(String),
    /// A blank line: nothing.
    Nothing,
}

/// One generated record line (without its line break).
pub struct RecordCase {
    pub line: Vec<u8>,
    pub expect: RecordExpect,
    pub kind: &'static str,
}

/// Generates record lines: bad JSON, every field with a wrong type, missing and duplicate
/// ids, huge fields, nesting bombs, bad relations, Unicode ids. Ids start with `prefix`.
pub fn record_cases(
    rng: &mut Rng,
    prefix: &str,
    first_marker: usize,
    big: bool,
) -> Vec<RecordCase> {
    let mut out = Vec::new();
    let mut n = first_marker;
    let mut ok = |out: &mut Vec<RecordCase>, kind, value: serde_json::Value, id: String| {
        let m = marker(n);
        n += 1;
        let mut value = value;
        if let Some(text) = value
            .get_mut("text")
            .and_then(|t| t.as_str().map(str::to_string))
        {
            value["text"] = serde_json::Value::String(format!("{text} {m}"));
        }
        // Entities are searchable but never a hit.
        let entity = value.get("kind").and_then(|k| k.as_str()) == Some("entity");
        out.push(RecordCase {
            line: value.to_string().into_bytes(),
            expect: RecordExpect::Source {
                id,
                marker: (!entity).then_some(m),
            },
            kind,
        });
    };
    let problem = |out: &mut Vec<RecordCase>, kind, line: Vec<u8>, reason: &str| {
        out.push(RecordCase {
            line,
            expect: RecordExpect::Problem(reason.to_string()),
            kind,
        })
    };

    // Bad JSON: truncated, mangled, and not JSON at all.
    for i in 0..150 {
        let good = serde_json::json!({"id": format!("{prefix}bad-{i}"), "title": "T", "text": rng.words(6), "tags": ["a"]}).to_string();
        let line = match i % 10 {
            0..=2 => good[..rng.range(1, good.len() - 1)].to_string(),
            3 => good.replacen(':', "=", 1),
            4 => good.replacen('}', ",}", 1),
            5 => good.replace('"', "'"),
            6 => good.replacen("\"T\"", "NaN", 1),
            7 => format!("{good} // comment"),
            8 => good.replacen("\"T\"", "\"a\u{1}b\"", 1),
            _ => good.replacen("\"T\"", "\"a\tb\"", 1),
        };
        problem(&mut out, "bad-json", line.into_bytes(), "not valid JSON");
    }
    for v in [
        "[]",
        "5",
        "\"s\"",
        "null",
        "true",
        "[{\"id\": \"x\", \"text\": \"y\"}]",
    ] {
        problem(
            &mut out,
            "not-object",
            v.as_bytes().to_vec(),
            "expected a JSON object",
        );
    }
    for i in 0..40 {
        let len = rng.range(1, 400);
        let mut line = rng.bytes(len);
        line.retain(|&b| b != b'\n');
        if line.iter().all(u8::is_ascii_whitespace) {
            line.push(b'@');
        }
        let reason = match std::str::from_utf8(&line) {
            Err(_) => "not valid UTF-8",
            Ok(t) => match serde_json::from_str::<serde_json::Value>(t) {
                Err(_) => "not valid JSON",
                Ok(_) => "expected a JSON object",
            },
        };
        let _ = i;
        problem(&mut out, "random-bytes", line, reason);
    }
    for i in 0..10 {
        let mut line = format!("{{\"id\": \"{prefix}u{i}\", \"text\": \"a").into_bytes();
        line.push(*rng.pick(&[0xff, 0xc3, 0x80, 0xed]));
        line.extend_from_slice(b"\"}");
        problem(&mut out, "invalid-utf8", line, "not valid UTF-8");
    }

    // Every field with every wrong type.
    let wrong: &[(&str, &[&str], &str)] = &[
        (
            "id",
            &["true", "[1]", "{\"a\": 1}", "\"\"", "\"   \"", "null"],
            "`id`",
        ),
        ("text", &["5", "true", "[]", "{}", "[\"a\"]"], "`text`"),
        ("title", &["5", "true", "[]", "{}"], "`title`"),
        ("date", &["true", "[]", "{}"], "`date`"),
        (
            "tags",
            &["\"a\"", "5", "{}", "[1]", "[null]", "[[]]"],
            "`tags`",
        ),
        ("summary", &["5", "[]", "{}", "false"], "`summary`"),
        (
            "extras",
            &["[]", "\"x\"", "5", "{\"a\": []}", "{\"a\": {}}"],
            "`extras",
        ),
        ("kind", &["5", "\"bogus\"", "[]", "true", "\"\""], "`kind`"),
        ("aliases", &["\"x\"", "[1]", "{}", "[null]"], "`aliases`"),
        ("name", &["5", "[]", "{}"], "`name`"),
        ("label", &["5", "[]", "true"], "`label`"),
        (
            "vector",
            &["\"x\"", "[]", "[\"a\"]", "[1, null]", "{}", "true"],
            "`vector`",
        ),
        (
            "relations",
            &[
                "\"x\"",
                "[1]",
                "[{\"kind\": \"is\"}]",
                "[{\"to\": \"\"}]",
                "[{\"to\": [1]}]",
                "[{\"to\": \"a\", \"kind\": 3}]",
                "{}",
            ],
            "`relations",
        ),
    ];
    for round in 0..3 {
        for (field, values, reason) in wrong {
            for value in *values {
                let id = format!("{prefix}wt-{round}-{field}-{}", rng.next() % 1_000_000);
                let mut line = format!("{{\"id\": \"{id}\", \"text\": \"{}\"", rng.words(4));
                if *field == "id" {
                    line = format!("{{\"text\": \"{}\"", rng.words(4));
                }
                if *field == "text" {
                    line = format!("{{\"id\": \"{id}\"");
                }
                line.push_str(&format!(", \"{field}\": {value}}}"));
                let reason = if *field == "id" && *value == "null" {
                    "missing `id`"
                } else {
                    reason
                };
                problem(&mut out, "wrong-type", line.into_bytes(), reason);
            }
        }
        // `description` is read for entities without text.
        let id = format!("{prefix}ent-{round}");
        problem(
            &mut out,
            "wrong-type",
            format!(
                "{{\"id\": \"{id}\", \"kind\": \"entity\", \"name\": \"N\", \"description\": 5}}"
            )
            .into_bytes(),
            "`description`",
        );
    }
    // Numbers the JSON reader cannot hold.
    problem(
        &mut out,
        "bad-json",
        format!("{{\"id\": \"{prefix}big\", \"text\": \"x\", \"vector\": [1e400]}}").into_bytes(),
        "not valid JSON",
    );

    // Missing ids.
    for key in ["ID", "_id", "Id", "identifier"] {
        problem(
            &mut out,
            "missing-id",
            format!("{{\"{key}\": \"x\", \"text\": \"y\"}}").into_bytes(),
            "missing `id`",
        );
    }
    // Duplicate ids: the first stands.
    for i in 0..20 {
        let id = format!("{prefix}dup-{i}");
        ok(
            &mut out,
            "duplicate",
            serde_json::json!({"id": id, "text": rng.words(5)}),
            id.clone(),
        );
        problem(
            &mut out,
            "duplicate",
            serde_json::json!({"id": id, "text": "second"})
                .to_string()
                .into_bytes(),
            "duplicate id",
        );
    }

    // Nesting bombs: past the JSON reader's depth limit, and just under it.
    for i in 0..12 {
        let depth = [129, 200, 1_000, 100_000][i % 4];
        let line = if i % 2 == 0 {
            format!(
                "{{\"id\": \"{prefix}deep-{i}\", \"text\": \"x\", \"extras\": {{\"a\": {}}}}}",
                "[".repeat(depth)
            )
        } else {
            "[".repeat(depth) + &"]".repeat(depth)
        };
        problem(&mut out, "depth-bomb", line.into_bytes(), "not valid JSON");
    }
    let shallow = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    problem(
        &mut out,
        "depth-bomb",
        format!(
            "{{\"id\": \"{prefix}shallow\", \"text\": \"x\", \"extras\": {{\"a\": {shallow}}}}}"
        )
        .into_bytes(),
        "`extras.a`",
    );

    // Blank lines and line-ending oddities.
    for line in ["", "   ", "\t", "\r"] {
        out.push(RecordCase {
            line: line.as_bytes().to_vec(),
            expect: RecordExpect::Nothing,
            kind: "blank",
        });
    }
    problem(
        &mut out,
        "bom",
        format!("\u{feff}{{\"id\": \"{prefix}midbom\", \"text\": \"x\"}}").into_bytes(),
        "not valid JSON",
    );

    // Unicode in ids, titles and text; every one is its own source.
    for i in 0..40 {
        let t: String = (0..rng.range(1, 6)).map(|_| *rng.pick(TRICKY)).collect();
        let id = format!("{prefix}uni{t}{i}");
        ok(
            &mut out,
            "unicode",
            serde_json::json!({"id": id, "title": format!("T{t}"), "text": format!("{} {t}", rng.words(5)), "tags": [t], "extras": {t.clone(): t}}),
            id.clone(),
        );
    }
    // Well-formed records with odd but valid values.
    for i in 0..30 {
        let id = format!("{prefix}odd-{i}");
        let value = match i % 6 {
            0 => {
                serde_json::json!({"id": id, "text": rng.words(4), "date": 17e8, "extras": {"n": null, "b": true, "f": -0.0}})
            }
            1 => {
                serde_json::json!({"id": id, "text": rng.words(4), "relations": [{"to": "nowhere", "kind": "cites"}, {"to": 42}]})
            }
            2 => serde_json::json!({"id": id, "text": rng.words(4), "vector": [1, 2.5, -3]}),
            3 => {
                serde_json::json!({"id": id, "text": rng.words(4), "unknown": {"deep": [1, {"x": null}]}})
            }
            4 => {
                serde_json::json!({"id": id, "text": format!("{}\n\n# H\n\n{}", rng.words(3), rng.words(3)), "tags": []})
            }
            _ => {
                serde_json::json!({"id": id, "kind": "entity", "name": format!("Entity Name {i}"), "aliases": ["Alias One"], "text": rng.words(3)})
            }
        };
        ok(&mut out, "odd-valid", value, id);
    }
    // A numeric id is read as its digits.
    let numeric = 9_000_000 + rng.below(1_000_000);
    ok(
        &mut out,
        "numeric-id",
        serde_json::json!({"id": numeric, "text": rng.words(3)}),
        format!("{numeric}"),
    );

    if big {
        let id = format!("{prefix}huge-text");
        ok(
            &mut out,
            "huge",
            serde_json::json!({"id": id, "text": rng.words(800_000)}),
            id.clone(),
        );
        let id = format!("{prefix}huge-title");
        ok(
            &mut out,
            "huge",
            serde_json::json!({"id": id, "title": "t".repeat(1 << 20), "text": rng.words(3_000)}),
            id.clone(),
        );
        let id = format!("{prefix}huge-tags");
        let tags: Vec<String> = (0..100_000).map(|t| format!("tag{t}")).collect();
        ok(
            &mut out,
            "huge",
            serde_json::json!({"id": id, "text": "x", "tags": tags}),
            id.clone(),
        );
        let id = format!("{prefix}huge-extras");
        let extras: serde_json::Map<String, serde_json::Value> = (0..20_000)
            .map(|k| (format!("k{k}"), serde_json::Value::from(k)))
            .collect();
        ok(
            &mut out,
            "huge",
            serde_json::json!({"id": id, "text": "x", "extras": extras}),
            id.clone(),
        );
        let id = format!("{prefix}huge-summary");
        ok(
            &mut out,
            "huge",
            serde_json::json!({"id": id, "text": "x", "summary": "s ".repeat(1 << 20)}),
            id.clone(),
        );
        problem(
            &mut out,
            "huge",
            serde_json::json!({"id": "i".repeat(10_000), "text": "x"})
                .to_string()
                .into_bytes(),
            "bytes long",
        );
    }
    out
}

/// Writes `cases` into `path` as a JSON Lines file; returns the line number of each case.
pub fn write_records(path: &Path, head: &[String], cases: &[RecordCase]) -> Vec<usize> {
    let mut bytes = Vec::new();
    for line in head {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    let mut lines = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        lines.push(head.len() + i + 1);
        bytes.extend_from_slice(&case.line);
        bytes.push(b'\n');
    }
    std::fs::write(path, bytes).expect("write records");
    lines
}

/// Query texts that abuse syntax, characters and size.
pub fn queries(rng: &mut Rng, big: bool) -> Vec<String> {
    let mut out: Vec<String> = [
        "",
        " ",
        "\0",
        "\"",
        "\"\"\"",
        "((((",
        "))))",
        "[[",
        "]]",
        "AND",
        "OR NOT",
        "title:x",
        "*",
        "?",
        "~",
        "^2",
        "a~1",
        "field:\"x\"",
        "-",
        "--",
        "+a -b",
        "\\",
        "%",
        "%s%n%x",
        "'; DROP TABLE sources; --",
        "<script>alert(1)</script>",
        "{{x}}",
        "${HOME}",
        "$(rm -rf /)",
        "NaN",
        "1e400",
        "-0",
        "\u{202e}",
        "\u{200b}",
        "\u{feff}",
        "🦀🦀🦀",
        "ẞ straße",
        "AUTH-041",
        "a/b/c",
        "../../etc/passwd",
        "#tag",
        "[[link|x]]",
        "`code`",
        "\n\n",
        "\t",
        "\r\n",
        "the of a",
        "token token token token",
        "x:y:z",
        "*:*",
        "null",
        "SELECT * FROM",
        "שלום مرحبا",
        "e\u{0301}\u{0301}\u{0301}",
        "ｆｕｌｌｗｉｄｔｈ",
        "İstanbul",
        "\u{10ffff}",
        "\u{e000}",
        "a\u{0}b",
        "..",
        "/",
        "C:\\Windows",
        "\u{1b}[31mred",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for _ in 0..120 {
        let len = rng.range(1, 200);
        let q: String = (0..len)
            .map(|_| match rng.below(4) {
                0 => *rng.pick(TRICKY),
                1 => char::from_u32(rng.range(0, 0x7f) as u32).unwrap_or(' '),
                2 => char::from_u32(rng.range(0x80, 0x2_ffff) as u32).unwrap_or('x'),
                _ => ' ',
            })
            .collect();
        out.push(q);
    }
    for _ in 0..40 {
        let k = rng.range(1, 8);
        let mut q = rng.words(k);
        let junk = *rng.pick(&[
            "\"", "(", ")", ":", "*", "-", "+", "~", "^", "[", "]", "{", "}", "\\", "/", "|", "&&",
            "||", "!",
        ]);
        let at = rng.below(q.len() + 1);
        if q.is_char_boundary(at) {
            q.insert_str(at, junk);
        }
        out.push(q);
    }
    if big {
        out.push(rng.words(20_000));
        out.push("token ".repeat(200_000));
        // Many distinct words and identifier-like tokens (the trigram channel expands them).
        out.push((0..30_000).map(|i| format!("w{i}x ")).collect());
        out.push(
            (0..20_000)
                .map(|i| format!("ID-{i}-{}", i * 7))
                .collect::<Vec<_>>()
                .join(" "),
        );
        out.push("x".repeat(1 << 20));
        out.push(TRICKY.iter().cycle().take(200_000).collect());
    }
    out
}
