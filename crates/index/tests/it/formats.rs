//! Beyond English Markdown: a mixed Russian and English vault under `index.language = "auto"`,
//! Chinese, Japanese and Korean text, and documents in HTML, DOCX, Org and PDF, all written
//! here. Each is found by its words, and its hints point at the right lines (and page).

use std::io::Write;

use finder_core::Settings;

use crate::support::{ids, Fixture};

fn auto() -> Settings {
    let mut s = Settings::default();
    s.index.language = "auto".into();
    s.embed.backend = finder_core::EmbedBackend::None;
    s
}

#[test]
fn russian_forms_meet_and_english_terms_inside_stem_as_english() {
    let f = Fixture::new();
    let notes = f.path("notes");
    f.write("notes/backup.md", "# Резервные копии\n\nНастройка резервного копирования сервера: запускайте deployments по ночам.\n");
    f.write(
        "notes/cache.md",
        "# Cache\n\nThe cache servers restart nightly.\n",
    );
    f.index(&[&notes], &auto());
    let finder = f.open();
    let s = finder.settings().clone();
    // The nominative finds the genitive («сервер» → «сервера»), and back.
    assert_eq!(ids(&finder, "сервер", &s), ["backup.md"]);
    assert_eq!(ids(&finder, "настройки резервной копии", &s), ["backup.md"]);
    // An English word in a Russian note stems as English: `deployment` finds `deployments`.
    assert_eq!(ids(&finder, "deployment", &s), ["backup.md"]);
    assert_eq!(
        ids(&finder, "server", &s),
        ["cache.md"],
        "English words stay English"
    );

    // The same notes under `english`: Russian forms do not meet.
    let g = Fixture::new();
    let notes = g.path("notes");
    g.write(
        "notes/backup.md",
        "# Резервные копии\n\nНастройка резервного копирования сервера.\n",
    );
    let mut english = auto();
    english.index.language = "english".into();
    g.index(&[&notes], &english);
    let finder = g.open();
    assert!(ids(&finder, "сервер", finder.settings()).is_empty());
}

#[test]
fn latin_words_stem_in_their_sources_detected_language() {
    let f = Fixture::new();
    let notes = f.path("notes");
    f.write(
        "notes/stadt.md",
        "# Die Stadt\n\nDie alten Häuser der Stadt wurden im letzten Jahrhundert gebaut. Viele \
         von ihnen stehen heute leer, weil die Mieten für die meisten Familien zu hoch sind und \
         die Eigentümer lieber auf bessere Zeiten warten.\n",
    );
    f.write(
        "notes/town.md",
        "# The town\n\nThe old houses of the town were built in the last century. Many of them \
         stand empty today, because the rents are too high for most families.\n",
    );
    f.index(&[&notes], &auto());
    let finder = f.open();
    let s = finder.settings().clone();
    assert_eq!(finder.status().unwrap().languages, ["german"]);
    // German stems meet: `Haus` and `Häusern` find `Häuser`, which English stems as `hauser`.
    assert_eq!(ids(&finder, "Haus", &s), ["stadt.md"]);
    assert_eq!(ids(&finder, "Häusern", &s), ["stadt.md"]);
    // The English note keeps English stems, and English queries still find it.
    assert_eq!(ids(&finder, "house", &s), ["town.md"]);
    assert_eq!(ids(&finder, "centuries", &s), ["town.md"]);

    // Under `english` the German note's words stem as English: `Haus` misses `Häuser`.
    let g = Fixture::new();
    let notes = g.path("notes");
    g.write(
        "notes/stadt.md",
        &std::fs::read_to_string(f.path("notes/stadt.md")).unwrap(),
    );
    let mut english = auto();
    english.index.language = "english".into();
    g.index(&[&notes], &english);
    let finder = g.open();
    assert!(finder.status().unwrap().languages.is_empty());
    assert!(ids(&finder, "Haus", finder.settings()).is_empty());
}

#[test]
fn cjk_words_find_their_notes() {
    let f = Fixture::new();
    let notes = f.path("notes");
    f.write("notes/tokyo.md", "# 旅行\n\n東京都に住む友達を訪ねた。\n");
    f.write(
        "notes/search.md",
        "# 検索\n\n全文検索エンジンは単語の区切りが必要です。\n",
    );
    f.write(
        "notes/korean.md",
        "# 메모\n\n한국어 형태소 분석기를 사용합니다.\n",
    );
    f.write(
        "notes/chinese.md",
        "# 笔记\n\n我们使用混合检索来查找文档。\n",
    );
    f.index(&[&notes], &auto());
    let finder = f.open();
    let s = finder.settings().clone();
    assert_eq!(ids(&finder, "東京", &s), ["tokyo.md"]);
    assert_eq!(ids(&finder, "検索", &s), ["search.md"]);
    assert_eq!(ids(&finder, "분석", &s), ["korean.md"]);
    assert_eq!(ids(&finder, "检索", &s), ["chinese.md"]);
    let hit = &finder.search("全文検索", &s, 0, 1).unwrap().hits[0];
    assert_eq!(
        (hit.hints[0].extent.line_start, hit.hints[0].extent.line_end),
        (1, 3)
    );
    assert!(
        hit.hints[0].preview.contains("全文検索エンジン"),
        "{}",
        hit.hints[0].preview
    );
}

/// A DOCX holding `paragraphs` as `(style, text)`: a zip of the parts Word reads.
fn docx(title: &str, paragraphs: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (style, text) in paragraphs {
        body.push_str("<w:p>");
        if !style.is_empty() {
            body.push_str(&format!("<w:pPr><w:pStyle w:val=\"{style}\"/></w:pPr>"));
        }
        body.push_str(&format!(
            "<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>"
        ));
    }
    let document = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}</w:body></w:document>");
    let core = format!("<?xml version=\"1.0\"?><cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>{title}</dc:title></cp:coreProperties>");
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, text) in [("word/document.xml", document), ("docProps/core.xml", core)] {
        zip.start_file(name, options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// A PDF with one page per entry of `pages`, each line of it a line of Helvetica text.
fn pdf(pages: &[&[&str]]) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    let n = pages.len();
    // 1: catalog, 2: pages, 3: font, then a page and its content stream per page.
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    );
    for (i, lines) in pages.iter().enumerate() {
        objects.push(format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>", 5 + 2 * i));
        let mut stream = String::from("BT /F1 12 Tf 14 TL 72 720 Td\n");
        for line in lines.iter() {
            stream.push_str(&format!("({line}) Tj T*\n"));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn html_docx_org_and_pdf_are_read_with_extents_that_point_back() {
    let f = Fixture::new();
    let docs = f.path("docs");
    f.write("docs/page.html", "<!doctype html><html><head><title>Kiln guide</title><meta name=\"description\" content=\"How to fire the kiln.\"><style>.x{color:red}</style><script>var secret = 'scriptword';</script></head><body><nav>Home | navword</nav><h1>Kiln guide</h1><p>Preheat the kiln slowly.</p><h2>Venting</h2><p>Open the vent at 600 degrees.</p><footer>footerword</footer></body></html>");
    f.write("docs/plan.org", "#+TITLE: Garden plan\n#+FILETAGS: :garden:home:\n#+OWNER: Ana\n\n* Spring :seeds:\nSow tomatoes in March. See [[file:kiln.org][the kiln notes]].\n\n* Autumn\nPlant garlic cloves.\n");
    std::fs::write(
        f.path("docs/report.docx"),
        docx(
            "Quarterly report",
            &[
                ("Heading1", "Revenue"),
                ("", "Revenue grew by a third."),
                ("Heading1", "Hiring"),
                ("", "We hired four welders."),
            ],
        ),
    )
    .unwrap();
    std::fs::write(
        f.path("docs/manual.pdf"),
        pdf(&[
            &["Safety first.", "Wear gloves near the furnace."],
            &["Maintenance.", "Replace the thermocouple yearly."],
        ]),
    )
    .unwrap();
    let report = f.index(&[&docs], &auto());
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.sources, 4);
    let finder = f.open();
    let s = finder.settings().clone();
    let top = |q: &str| {
        finder
            .search(q, &s, 0, 3)
            .unwrap()
            .hits
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("nothing for {q}"))
    };

    // HTML: headings as structure, navigation and scripts left out.
    let vent = top("vent degrees");
    assert_eq!(
        (vent.id.as_str(), vent.envelope.title.as_str()),
        ("page.html", "Kiln guide")
    );
    assert_eq!(vent.summary, "How to fire the kiln.");
    for dropped in ["scriptword", "navword", "footerword"] {
        assert!(
            ids(&finder, dropped, &s).is_empty(),
            "{dropped} was indexed"
        );
    }
    let text = finder.source_text("page.html").unwrap().unwrap();
    let lines = text.lines();
    let hint = &vent.hints[0].extent;
    assert_eq!(lines[&hint.line_start], "## Venting", "{lines:?}");

    // Org: title, tags from the file and its headlines, keywords as extras.
    let garlic = top("garlic");
    assert_eq!(garlic.envelope.title, "Garden plan");
    assert_eq!(garlic.envelope.tags, ["garden", "home", "seeds"]);
    assert_eq!(
        garlic.envelope.extras.get("owner").map(String::as_str),
        Some("Ana")
    );
    let org = finder.source_text("plan.org").unwrap().unwrap();
    assert!(
        org.lines()
            .values()
            .any(|l| l.contains("[[kiln|the kiln notes]]")),
        "{:?}",
        org.lines()
    );

    // DOCX: heading styles become headings.
    let welders = top("welders");
    assert_eq!(
        (welders.id.as_str(), welders.envelope.title.as_str()),
        ("report.docx", "Quarterly report")
    );
    let docx_lines = finder.source_text("report.docx").unwrap().unwrap();
    assert_eq!(
        docx_lines.lines()[&welders.hints[0].extent.line_start],
        "# Hiring"
    );

    // PDF: each page's passages name their page.
    let thermo = top("thermocouple");
    assert_eq!(thermo.id, "manual.pdf");
    assert_eq!(thermo.hints[0].extent.page, Some(2), "{:?}", thermo.hints);
    assert_eq!(top("gloves furnace").hints[0].extent.page, Some(1));
}

#[test]
fn unreadable_documents_are_reported_and_nothing_else_is_lost() {
    let f = Fixture::new();
    let docs = f.path("docs");
    f.write("docs/fine.md", "# Fine\n\nThis note is fine.\n");
    let good_pdf = pdf(&[&["A readable page."]]);
    std::fs::write(
        f.path("docs/truncated.pdf"),
        &good_pdf[..good_pdf.len() / 2],
    )
    .unwrap();
    std::fs::write(f.path("docs/noise.pdf"), b"%PDF-1.7\n\x00\x01garbage\xff").unwrap();
    // Encrypted with a password nobody gave: the standard handler's entries in the trailer.
    let encrypted = String::from_utf8_lossy(&good_pdf).replace(
        "/Root 1 0 R >>",
        "/Root 1 0 R /Encrypt << /Filter /Standard /V 1 /R 2 /O <8a1f6c0e2b3d4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c> /U <0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff> /P -3904 >> /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>] >>",
    );
    std::fs::write(f.path("docs/encrypted.pdf"), encrypted).unwrap();
    std::fs::write(
        f.path("docs/encrypted.docx"),
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 an OLE file, as Word encrypts",
    )
    .unwrap();
    let good_docx = docx("t", &[("", "some text")]);
    std::fs::write(
        f.path("docs/truncated.docx"),
        &good_docx[..good_docx.len() - 30],
    )
    .unwrap();
    // A zip bomb: 70 MiB of spaces deflate to a few dozen KiB.
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(
        "word/document.xml",
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated),
    )
    .unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..70 {
        zip.write_all(&chunk).unwrap();
    }
    std::fs::write(f.path("docs/bomb.docx"), zip.finish().unwrap().into_inner()).unwrap();
    f.write(
        "docs/empty.html",
        "<html><body><script>only()</script></body></html>",
    );
    f.write("docs/broken.org", "* Heading without end [[link");

    let report = f.index(&[&docs], &auto());
    let reasons: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    for name in [
        "truncated.pdf",
        "noise.pdf",
        "encrypted.docx",
        "truncated.docx",
        "bomb.docx",
        "empty.html",
    ] {
        assert!(
            reasons.iter().any(|r| r.contains(name)),
            "{name} not reported: {reasons:?}"
        );
    }
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("bomb.docx") && r.contains("MiB")),
        "{reasons:?}"
    );
    let finder = f.open();
    assert_eq!(ids(&finder, "fine", finder.settings()), ["fine.md"]);
    assert_eq!(
        ids(&finder, "heading", finder.settings()),
        ["broken.org"],
        "a lenient parser reads what it can"
    );
}
