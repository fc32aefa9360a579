//! Documents that are not Markdown: HTML, DOCX, Org and PDF, each read by a maintained crate
//! into Markdown-shaped text (headings as `#` lines, blocks separated by blank lines) that the
//! note pipeline then fragments like any note. Hints and `get` number the lines of that text;
//! a PDF's passages also carry their page.
//!
//! A file that cannot be read (truncated, encrypted, not what its name says, past a size
//! limit) is a problem with the reason, like any bad input; a parser that panics on a
//! malformed file is caught and reported the same way.

use std::collections::BTreeMap;
use std::io::Read;

/// The formats read here, by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Html,
    Docx,
    Org,
    Pdf,
}

/// Largest file of these formats read, in bytes; a larger one is reported, not read.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 64 << 20;
/// Largest XML part a DOCX may unpack to: a "zip bomb" stops here.
const MAX_DOCX_XML_BYTES: u64 = 64 << 20;

/// The format a file name says, `None` for notes and anything else.
pub(crate) fn format_of(name: &str) -> Option<Format> {
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.')?.1;
    Some(match ext {
        "html" | "htm" | "xhtml" => Format::Html,
        "docx" => Format::Docx,
        "org" => Format::Org,
        "pdf" => Format::Pdf,
        _ => return None,
    })
}

/// A document read into Markdown-shaped text, with what it says about itself.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Converted {
    pub text: String,
    pub title: Option<String>,
    pub date: Option<String>,
    pub tags: Vec<String>,
    pub summary: Option<String>,
    pub extras: BTreeMap<String, String>,
    /// For a PDF, the one-based line of `text` each page starts on, in page order.
    pub page_lines: Vec<u32>,
}

impl Format {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Html => "HTML",
            Format::Docx => "DOCX",
            Format::Org => "Org",
            Format::Pdf => "PDF",
        }
    }
}

/// Reads `bytes` as `format`; the error, headed by the format's name (`PDF file: …`), says
/// why it could not be read.
pub(crate) fn convert(format: Format, bytes: &[u8]) -> Result<Converted, String> {
    read(format, bytes).map_err(|reason| format!("{} file: {reason}", format.name()))
}

fn read(format: Format, bytes: &[u8]) -> Result<Converted, String> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "{} bytes is more than the {} MiB a document may hold; not read",
            bytes.len(),
            MAX_DOCUMENT_BYTES >> 20
        ));
    }
    // A parser's panic on a malformed file is that file's problem, not the run's.
    let read = std::panic::catch_unwind(|| match format {
        Format::Html => html(bytes),
        Format::Docx => docx(bytes),
        Format::Org => org(bytes),
        Format::Pdf => pdf(bytes),
    });
    let converted =
        read.unwrap_or_else(|_| Err("the file is malformed (its parser gave up)".to_string()))?;
    if converted.text.trim().is_empty() {
        return Err(match format {
            Format::Pdf => "no text layer (a scanned PDF needs OCR first)",
            _ => "no readable text",
        }
        .to_string());
    }
    Ok(converted)
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes)
        .map_err(|e| format!("not valid UTF-8 (byte offset {})", e.valid_up_to()))
}

/// Collapses runs of whitespace to one space.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Markdown-shaped text built block by block.
#[derive(Default)]
struct Blocks {
    text: String,
    /// Inline text of the block being read.
    line: String,
}

impl Blocks {
    fn inline(&mut self, text: &str) {
        self.line.push_str(text);
    }

    /// Ends the current block, prefixed (`## `, `- `) when it has text.
    fn end(&mut self, prefix: &str) {
        let line = squeeze(&self.line);
        self.line.clear();
        if line.is_empty() {
            return;
        }
        self.text.push_str(prefix);
        self.text.push_str(&line);
        self.text.push_str("\n\n");
    }

    fn heading(&mut self, level: usize, text: &str) {
        self.end("");
        let text = squeeze(text);
        if !text.is_empty() {
            self.text.push_str(&"#".repeat(level.clamp(1, 6)));
            self.text.push(' ');
            self.text.push_str(&text);
            self.text.push_str("\n\n");
        }
    }

    fn finish(mut self) -> String {
        self.end("");
        self.text
    }
}

/// HTML: the readable text of `<body>`, headings kept as headings; scripts, styles, forms and
/// the page's navigation (`nav`, `header`, `footer`, `aside`) dropped. The title is
/// `<title>`, else the first `<h1>`; `<meta name="description">` is the summary and
/// `keywords` the tags.
fn html(bytes: &[u8]) -> Result<Converted, String> {
    use scraper::{ElementRef, Html, Node, Selector};

    let page = Html::parse_document(&String::from_utf8_lossy(bytes));
    let select = |css: &str| Selector::parse(css).expect("a valid selector");
    let text_of = |e: ElementRef| squeeze(&e.text().collect::<String>());
    let meta = |name: &str| {
        page.select(&select(&format!("meta[name=\"{name}\" i]")))
            .find_map(|m| m.value().attr("content"))
            .map(squeeze)
            .filter(|s| !s.is_empty())
    };
    let mut out = Converted {
        title: page
            .select(&select("title"))
            .map(text_of)
            .find(|t| !t.is_empty())
            .or_else(|| {
                page.select(&select("h1"))
                    .map(text_of)
                    .find(|t| !t.is_empty())
            }),
        summary: meta("description"),
        tags: meta("keywords")
            .map(|k| {
                k.split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        date: meta("date"),
        ..Converted::default()
    };

    fn walk(node: ego_tree::NodeRef<'_, Node>, blocks: &mut Blocks) {
        match node.value() {
            Node::Text(text) => blocks.inline(text),
            Node::Element(element) => {
                let name = element.name();
                const DROPPED: &[&str] = &[
                    "script", "style", "noscript", "template", "nav", "header", "footer", "aside",
                    "form", "svg", "iframe", "head", "button", "select",
                ];
                if DROPPED.contains(&name) {
                    return;
                }
                if let Some(level) = name.strip_prefix('h').and_then(|l| l.parse::<usize>().ok()) {
                    if (1..=6).contains(&level) {
                        // Its text nodes apart: a block an unclosed heading swallowed
                        // must not glue its first word to the heading's last.
                        let text: String = ElementRef::wrap(node)
                            .map(|e| e.text().collect::<Vec<_>>().join(" "))
                            .unwrap_or_default();
                        blocks.heading(level, &text);
                        return;
                    }
                }
                const BLOCKS: &[&str] = &[
                    "p",
                    "div",
                    "section",
                    "article",
                    "main",
                    "blockquote",
                    "pre",
                    "table",
                    "tr",
                    "ul",
                    "ol",
                    "dl",
                    "dt",
                    "dd",
                    "figure",
                    "figcaption",
                    "body",
                ];
                let block = BLOCKS.contains(&name);
                if block || name == "li" {
                    blocks.end("");
                }
                if name == "br" {
                    blocks.inline(" ");
                }
                for child in node.children() {
                    walk(child, blocks);
                }
                if name == "li" {
                    blocks.end("- ");
                } else if block {
                    blocks.end("");
                } else if matches!(name, "td" | "th") {
                    blocks.inline(" ");
                }
            }
            _ => {
                for child in node.children() {
                    walk(child, blocks);
                }
            }
        }
    }
    let mut blocks = Blocks::default();
    let body = page.select(&select("body")).next();
    match body {
        Some(body) => walk(*body, &mut blocks),
        None => walk(page.tree.root(), &mut blocks),
    }
    out.text = blocks.finish();
    Ok(out)
}

/// DOCX: the paragraphs of `word/document.xml`, headings by their style (`Heading1` …,
/// `Title`), list paragraphs as items; the title from `docProps/core.xml` when it has one.
fn docx(bytes: &[u8]) -> Result<Converted, String> {
    use quick_xml::events::Event;

    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| {
        format!("not a DOCX file (a zip archive): {e}; an encrypted document cannot be read")
    })?;
    let mut part = |name: &str| -> Result<Option<String>, String> {
        let file = match archive.by_name(name) {
            Ok(file) => file,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(format!("{name}: {e}")),
        };
        let mut xml = String::new();
        file.take(MAX_DOCX_XML_BYTES + 1)
            .read_to_string(&mut xml)
            .map_err(|e| format!("{name}: {e}"))?;
        if xml.len() as u64 > MAX_DOCX_XML_BYTES {
            return Err(format!(
                "{name} unpacks to more than {} MiB; not read",
                MAX_DOCX_XML_BYTES >> 20
            ));
        }
        Ok(Some(xml))
    };
    let document = part("word/document.xml")?
        .ok_or("not a Word document: the archive has no word/document.xml")?;
    let core = part("docProps/core.xml")?;

    let mut blocks = Blocks::default();
    let mut reader = quick_xml::Reader::from_str(&document);
    let (mut style, mut in_text, mut listed) = (None::<String>, false, false);
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("word/document.xml: {e}"))?
        {
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                "p" => (style, listed) = (None, false),
                "pStyle" => {
                    style = e
                        .attributes()
                        .flatten()
                        .find(|a| a.key.local_name().as_ref() == "val")
                        .map(|a| a.value.to_string());
                }
                "numPr" => listed = true,
                "t" => in_text = true,
                "tab" => blocks.inline("\t"),
                "br" | "cr" => blocks.inline(" "),
                _ => {}
            },
            Event::Text(t) if in_text => blocks.inline(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => match r.resolve_char_ref() {
                Ok(Some(c)) => blocks.inline(c.encode_utf8(&mut [0; 4])),
                _ => blocks.inline(match &*r {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    _ => "",
                }),
            },
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => {
                    let level = style.as_deref().and_then(heading_level);
                    match level {
                        Some(level) => {
                            let line = std::mem::take(&mut blocks.line);
                            blocks.heading(level, &line);
                        }
                        None => blocks.end(if listed { "- " } else { "" }),
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    let title = core
        .as_deref()
        .and_then(|xml| xml_element_text(xml, "title"));
    Ok(Converted {
        text: blocks.finish(),
        title,
        ..Converted::default()
    })
}

/// The heading level a Word paragraph style names: `Heading1`..`Heading9` (English ids),
/// `Title` as level 1.
fn heading_level(style: &str) -> Option<usize> {
    let lower = style.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    lower
        .strip_prefix("heading")
        .and_then(|n| n.trim().parse::<usize>().ok())
        .map(|n| n.min(6))
}

/// The text of the first element named `local` (any namespace) in `xml`.
fn xml_element_text(xml: &str, local: &str) -> Option<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut inside = false;
    let mut text = String::new();
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) if AsRef::<str>::as_ref(&e.local_name()) == local => inside = true,
            Event::Text(t) if inside => text.push_str(&t.xml10_content()),
            Event::End(e) if AsRef::<str>::as_ref(&e.local_name()) == local => break,
            Event::Eof => break,
            _ => {}
        }
    }
    let text = squeeze(&text);
    (!text.is_empty()).then_some(text)
}

/// Org: headlines as headings (their tags join the source's), `#+TITLE`, `#+DATE` and
/// `#+FILETAGS`, other `#+KEY:` lines as extras, links as wiki links into the graph
/// (`[[file:other.org][Other]]` links to the note `other`).
fn org(bytes: &[u8]) -> Result<Converted, String> {
    use orgize::{Element, Event, Org};

    let text = utf8(bytes)?;
    let org = Org::parse(text);
    let mut out = Converted::default();
    let mut blocks = Blocks::default();
    let mut tags: Vec<String> = Vec::new();
    // A headline's own text comes again as events inside it: its `raw` has said it already.
    let mut in_title = false;
    for event in org.iter() {
        match event {
            Event::End(Element::Title(_)) => in_title = false,
            _ if in_title => {}
            Event::Start(Element::Keyword(k)) => {
                let (key, value) = (k.key.to_ascii_lowercase(), squeeze(&k.value));
                match key.as_str() {
                    "title" => out.title = Some(value),
                    "date" => out.date = Some(value.trim_matches(['<', '>', '[', ']']).to_string()),
                    "filetags" => tags.extend(
                        value
                            .split(':')
                            .filter(|t| !t.is_empty())
                            .map(str::to_string),
                    ),
                    "description" => out.summary = Some(value),
                    _ if !value.is_empty() => {
                        out.extras.insert(key, value);
                    }
                    _ => {}
                }
            }
            Event::Start(Element::Title(title)) => {
                in_title = true;
                tags.extend(title.tags.iter().map(|t| t.to_string()));
                blocks.heading(title.level, &title.raw);
            }
            Event::Start(Element::Text { value }) => blocks.inline(value),
            Event::Start(Element::Verbatim { value }) | Event::Start(Element::Code { value }) => {
                blocks.inline(value)
            }
            Event::Start(Element::Link(link)) => {
                let path = link.path.trim();
                let local = path.strip_prefix("file:").unwrap_or(path);
                let is_url = local.contains("://") || local.starts_with("mailto:");
                let label = link.desc.as_deref().map(squeeze);
                if is_url {
                    blocks.inline(label.as_deref().unwrap_or(local));
                } else {
                    let target = local
                        .trim_start_matches("./")
                        .trim_end_matches(".org")
                        .trim_end_matches(".md");
                    match label {
                        Some(label) if !label.is_empty() => {
                            blocks.inline(&format!("[[{target}|{label}]]"))
                        }
                        _ => blocks.inline(&format!("[[{target}]]")),
                    }
                }
            }
            Event::Start(Element::SourceBlock(b)) => {
                blocks.end("");
                blocks.inline(&b.contents);
                blocks.end("");
            }
            Event::Start(Element::ExampleBlock(b)) => {
                blocks.end("");
                blocks.inline(&b.contents);
                blocks.end("");
            }
            Event::End(Element::Paragraph { .. }) => blocks.end(""),
            Event::End(Element::ListItem(_)) => blocks.end("- "),
            _ => {}
        }
    }
    tags.sort();
    tags.dedup();
    out.tags = tags;
    out.text = blocks.finish();
    Ok(out)
}

/// PDF: the text layer, page by page; each page starts with a `## Page N` heading, so a
/// passage never spans pages and its extent names its page.
fn pdf(bytes: &[u8]) -> Result<Converted, String> {
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| {
        let e = e.to_string();
        if e.to_ascii_lowercase().contains("encrypt") {
            format!("the PDF is encrypted: {e}")
        } else {
            format!("not a readable PDF: {e}")
        }
    })?;
    let mut out = Converted::default();
    let mut line = 1u32;
    for (n, page) in pages.iter().enumerate() {
        let mut block = format!("## Page {}\n\n", n + 1);
        for paragraph in page.split("\n\n") {
            let paragraph = squeeze(paragraph);
            if !paragraph.is_empty() {
                block.push_str(&paragraph);
                block.push_str("\n\n");
            }
        }
        out.page_lines.push(line);
        line += block.matches('\n').count() as u32;
        out.text.push_str(&block);
    }
    if out
        .text
        .lines()
        .all(|l| l.is_empty() || l.starts_with("## Page "))
    {
        out.text.clear();
    }
    Ok(out)
}

/// The page (one-based) a line of a converted PDF's text is on.
pub(crate) fn page_of(page_lines: &[u32], line: u32) -> Option<u32> {
    let after = page_lines.partition_point(|&start| start <= line);
    (after > 0).then_some(after as u32)
}
