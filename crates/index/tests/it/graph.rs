//! The graph layer's text extraction against real data: the wiki-links of the Dendron and
//! SilverBullet vaults against their resolved `links.tsv`, and title mentions on the HotpotQA
//! slice. Each test is skipped, with a notice, when its data is absent.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use finder_index::graph::{
    links, wiki_links, DropReason, LinkResolver, LinkStyle, LinkSyntax, MentionConfig,
    MentionMatcher,
};

fn shared_data(rel: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if dir.exists() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

/// The body of a note: the text after a `---` … `---` front matter, if any.
fn body(text: &str) -> &str {
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return text;
    }
    let mut offset = text.find('\n').map_or(text.len(), |i| i + 1);
    for line in lines {
        offset += line.len();
        if line.trim_end() == "---" {
            return &text[offset..];
        }
    }
    text
}

/// Note ids (paths relative to `root`, `/`-separated, with extension) and texts, sorted.
fn notes(root: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| {
            let id = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (id, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// `links.tsv` rows as (source, target, kind) counts.
fn expected_links(path: &Path) -> BTreeMap<(String, String, String), usize> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() >= 3 {
            *out.entry((
                cols[0].to_string(),
                cols[1].to_string(),
                cols[2].to_string(),
            ))
            .or_default() += 1;
        }
    }
    out
}

struct Comparison {
    expected: usize,
    found: usize,
    unresolved: usize,
    /// Occurrences in both (multiset intersection on source, target, kind).
    shared: usize,
}

/// Extracts and resolves the wiki-links of every note of a vault and compares them with its
/// `links.tsv` (one row per resolved occurrence; embeds included; Markdown links not).
fn compare_vault(dir: &Path, style: LinkStyle) -> Comparison {
    let notes = notes(&dir.join("notes"));
    let resolver = LinkResolver::new(notes.iter().map(|(id, _)| id));
    let stem = |id: &str| id.strip_suffix(".md").unwrap_or(id).to_string();
    let mut found: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut unresolved = 0;
    for (id, text) in &notes {
        // Front matter included: SilverBullet states relations there (`partOf: "[[X]]"`).
        for link in wiki_links(text, style) {
            assert_eq!(link.syntax, LinkSyntax::Wiki);
            match resolver.resolve(id, &link.target) {
                Some(i) => {
                    let kind = if link.embed { "embed" } else { "link" };
                    *found
                        .entry((stem(id), stem(&notes[i].0), kind.to_string()))
                        .or_default() += 1;
                }
                None => unresolved += 1,
            }
        }
    }
    let expected = expected_links(&dir.join("links.tsv"));
    if std::env::var_os("GRAPH_DEBUG").is_some() {
        for (k, n) in &found {
            let e = expected.get(k).copied().unwrap_or(0);
            if *n != e {
                eprintln!("DIFF found {n} expected {e} {k:?}");
            }
        }
        for (k, e) in &expected {
            if !found.contains_key(k) {
                eprintln!("DIFF found 0 expected {e} {k:?}");
            }
        }
    }
    let shared = found
        .iter()
        .map(|(k, n)| (*n).min(expected.get(k).copied().unwrap_or(0)))
        .sum();
    Comparison {
        expected: expected.values().sum(),
        found: found.values().sum(),
        unresolved,
        shared,
    }
}

fn assert_close(name: &str, c: &Comparison) {
    eprintln!(
        "{name}: links.tsv {} occurrences, extracted and resolved {} ({:+.2}%), {} in both, {} unresolved",
        c.expected,
        c.found,
        100.0 * (c.found as f64 - c.expected as f64) / c.expected as f64,
        c.shared,
        c.unresolved
    );
    let tolerance = c.expected as f64 * 0.02;
    assert!(
        (c.found as f64 - c.expected as f64).abs() <= tolerance,
        "{name}: {} vs {}",
        c.found,
        c.expected
    );
    assert!(c.shared as f64 >= c.expected as f64 - tolerance);
}

#[test]
fn dendron_vault_links_match_links_tsv() {
    let Some(dir) = shared_data("dendron_site_vault") else {
        return;
    };
    assert_close("dendron", &compare_vault(&dir, LinkStyle::LabelFirst));
}

#[test]
fn silverbullet_vault_links_match_links_tsv() {
    let Some(dir) = shared_data("silverbullet_docs_vault") else {
        return;
    };
    assert_close("silverbullet", &compare_vault(&dir, LinkStyle::TargetFirst));
}

#[test]
fn a_note_with_every_link_form() {
    let note =
        "---\ntitle: x\n---\n# Links\n\nSee [[Guide|guides.setup#install]], ![[snippets.intro]],\n\
        [the faq](faq.md#top) and [site](https://example.org).\n\n```\n[[not.a.link]]\n```\n";
    let found: Vec<(String, bool, LinkSyntax)> = links(body(note), LinkStyle::LabelFirst)
        .into_iter()
        .map(|l| (l.target, l.embed, l.syntax))
        .collect();
    assert_eq!(
        found,
        vec![
            ("guides.setup".to_string(), false, LinkSyntax::Wiki),
            ("snippets.intro".to_string(), true, LinkSyntax::Wiki),
            ("faq".to_string(), false, LinkSyntax::Markdown),
        ]
    );
    let resolver = LinkResolver::new(["faq.md", "guides.setup.md", "snippets.intro.md"]);
    assert_eq!(resolver.resolve("x.md", "Guides.Setup"), Some(1));
}

/// Paragraphs (title, text) of the HotpotQA slice, and each question's two gold titles.
type Slice = (Vec<(String, String)>, Vec<Vec<String>>);

fn hotpot_slice(dir: &Path) -> Slice {
    let read = |name: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.join(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let paragraphs = read("corpus.jsonl")
        .into_iter()
        .map(|v| {
            (
                v["title"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let gold = read("queries.jsonl")
        .into_iter()
        .map(|v| {
            v["metadata"]["supporting_titles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    (paragraphs, gold)
}

/// Each paragraph is an entity named by its title; a paragraph that mentions another's title
/// links to it. The prototype (GRAPH_NOTES.md) joined 75 of 100 questions' gold pairs.
#[test]
fn hotpotqa_title_mentions_join_gold_pairs() {
    let Some(dir) = shared_data("hotpotqa_slice100") else {
        return;
    };
    let (paragraphs, gold) = hotpot_slice(&dir);
    let started = Instant::now();
    let matcher = MentionMatcher::build_with_corpus(
        paragraphs
            .iter()
            .enumerate()
            .map(|(i, (title, _))| (i as u32, [title.as_str()])),
        &MentionConfig::default(),
        paragraphs.iter().map(|(_, text)| text.as_str()),
    )
    .unwrap();
    let built = started.elapsed();
    let started = Instant::now();
    let mut edges: HashMap<(u32, u32), u32> = HashMap::new();
    for (i, (_, text)) in paragraphs.iter().enumerate() {
        for m in matcher.mentions(text) {
            if m.entity != i as u32 {
                edges.insert((i as u32, m.entity), m.count);
            }
        }
    }
    let scanned = started.elapsed();
    let index: HashMap<&str, u32> = paragraphs
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (t.as_str(), i as u32))
        .collect();
    let joined = gold
        .iter()
        .filter(|titles| {
            let (Some(&a), Some(&b)) = (
                titles.first().and_then(|t| index.get(t.as_str())),
                titles.get(1).and_then(|t| index.get(t.as_str())),
            ) else {
                return false;
            };
            edges.contains_key(&(a, b)) || edges.contains_key(&(b, a))
        })
        .count();
    let frequent: Vec<&str> = matcher
        .dropped()
        .iter()
        .filter(|d| matches!(d.reason, DropReason::Frequent { .. }))
        .map(|d| d.alias.as_str())
        .collect();
    eprintln!(
        "hotpotqa: {} paragraphs, {} aliases kept, {} dropped ({} as frequent: {:?}), \
         {} mention edges, gold pairs joined in {joined} of {} questions; \
         build+count {built:?}, scan {scanned:?}",
        paragraphs.len(),
        matcher.aliases().len(),
        matcher.dropped().len(),
        frequent.len(),
        frequent,
        edges.len(),
        gold.len()
    );
    assert!(joined >= 65, "only {joined} gold pairs joined");
}
