//! The query-time BM25 scorer equals a brute-force oracle for any k1/b, and tantivy's own
//! BM25 (over tantivy's postings of the same texts) at the defaults.

use std::collections::HashSet;

use finder_core::{bm25_idf, bm25_term_score, Bm25Params, Settings};
use finder_index::testing::{analyze, query_terms, text_field, top_k, word_analyzer};
use proptest::prelude::*;
use tantivy::collector::TopDocs;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, TextFieldIndexing, TextOptions};

use crate::support::{record, Fixture};

const VOCAB: &[&str] = &[
    "token", "expired", "client", "session", "restore", "backup", "database", "deploy", "rollback",
    "cache", "latency", "error", "retry", "queue", "index", "search",
];

/// The length tantivy stores for a field of `len` tokens (one byte, lossy above ~40).
fn quantized(len: u32) -> f32 {
    (0..=255u8)
        .map(FieldNormReader::id_to_fieldnorm)
        .filter(|&n| n <= len)
        .max()
        .unwrap_or(0) as f32
}

fn docs_strategy() -> impl Strategy<Value = Vec<Vec<usize>>> {
    proptest::collection::vec(proptest::collection::vec(0..VOCAB.len(), 1..60), 2..40)
}

fn build(docs: &[Vec<usize>]) -> (Fixture, finder_index::Finder) {
    let fx = Fixture::new();
    let lines: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, words)| {
            let text: Vec<&str> = words.iter().map(|&w| VOCAB[w]).collect();
            record(&format!("d{i}"), "", &text.join(" "))
        })
        .collect();
    let input = fx.write("docs.jsonl", &lines.join("\n"));
    let mut settings = Settings::default();
    settings.index.trigrams = false;
    fx.index(&[&input], &settings);
    let finder = fx.open();
    (fx, finder)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn scorer_equals_brute_force_oracle(
        docs in docs_strategy(),
        query in proptest::collection::vec(0..VOCAB.len(), 1..5),
        k1 in 0.0f32..3.0,
        b in 0.0f32..1.0,
    ) {
        let (_fx, finder) = build(&docs);
        let index = finder.tantivy_index();
        let field = text_field(index);
        let searcher = index.reader().unwrap().searcher();
        let mut analyzer = word_analyzer("english");
        let query_text: Vec<&str> = query.iter().map(|&w| VOCAB[w]).collect();
        let q = analyze(&mut analyzer, &query_text.join(" "));
        let params = Bm25Params { k1, b };
        let fast = top_k(&searcher, field, &query_terms(field, &q), params, 10).unwrap();

        // Oracle: tokenize every document again and score it from scratch.
        let analyzed: Vec<Vec<String>> = docs.iter().map(|words| {
            let text: Vec<&str> = words.iter().map(|&w| VOCAB[w]).collect();
            analyze(&mut analyzer, &format!("\n{}", text.join(" ")))
        }).collect();
        let n = analyzed.len() as u64;
        let avg = analyzed.iter().map(|d| d.len()).sum::<usize>() as f32 / n as f32;
        // A word repeated in the query counts once.
        let distinct: HashSet<&String> = q.iter().collect();
        let mut oracle: Vec<f32> = analyzed.iter().map(|d| {
            distinct.iter().map(|t| {
                let tf = d.iter().filter(|x| x == t).count() as u32;
                if tf == 0 { return 0.0; }
                let df = analyzed.iter().filter(|d| d.contains(t)).count() as u64;
                bm25_term_score(params, bm25_idf(n, df), tf, quantized(d.len() as u32), avg)
            }).sum()
        }).collect();
        let by_doc: Vec<f32> = oracle.clone();
        oracle.retain(|&s| s > 0.0);
        oracle.sort_by(|a, b| b.total_cmp(a));
        oracle.truncate(10);

        prop_assert_eq!(fast.len(), oracle.len());
        for (i, (address, score)) in fast.iter().enumerate() {
            let doc: tantivy::TantivyDocument = searcher.doc(*address).unwrap();
            use tantivy::schema::Value;
            let id = doc.get_first(index.schema().get_field("source_id").unwrap()).unwrap().as_str().unwrap().to_string();
            let ordinal: usize = id[1..].parse().unwrap();
            prop_assert!((score - by_doc[ordinal]).abs() <= 1e-4 * by_doc[ordinal].max(1.0), "doc {} {} vs {}", id, score, by_doc[ordinal]);
            prop_assert!((score - oracle[i]).abs() <= 1e-4 * oracle[i].max(1.0), "rank {} {} vs {}", i, score, oracle[i]);
        }
    }

    #[test]
    fn defaults_rank_as_tantivy(
        docs in docs_strategy(),
        query in proptest::collection::vec(0..VOCAB.len(), 1..5),
    ) {
        let (_fx, finder) = build(&docs);
        let index = finder.tantivy_index();
        let field = text_field(index);
        let searcher = index.reader().unwrap().searcher();
        let mut analyzer = word_analyzer("english");
        let query_text: Vec<&str> = query.iter().map(|&w| VOCAB[w]).collect();
        let q = analyze(&mut analyzer, &query_text.join(" "));
        let ours = top_k(&searcher, field, &query_terms(field, &q), Bm25Params { k1: 1.2, b: 0.75 }, 10).unwrap();
        let id_field = index.schema().get_field("source_id").unwrap();
        let ordinal = |address| {
            use tantivy::schema::Value;
            let doc: tantivy::TantivyDocument = searcher.doc(address).unwrap();
            doc.get_first(id_field).unwrap().as_str().unwrap()[1..].parse::<u32>().unwrap()
        };

        // tantivy's own postings and scorer over the same texts, as Finder indexes them (an
        // empty title, then the text), one document per record in order.
        let mut schema = tantivy::schema::Schema::builder();
        let text = schema.add_text_field("text", TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer("words").set_index_option(IndexRecordOption::WithFreqs),
        ));
        let reference = tantivy::Index::create_in_ram(schema.build());
        reference.tokenizers().register("words", word_analyzer("english"));
        let mut writer: tantivy::IndexWriter = reference.writer_with_num_threads(1, 15_000_000).unwrap();
        for words in &docs {
            let words: Vec<&str> = words.iter().map(|&w| VOCAB[w]).collect();
            writer.add_document(tantivy::doc!(text => format!("\n{}", words.join(" ")))).unwrap();
        }
        writer.commit().unwrap();
        let their_searcher = reference.reader().unwrap().searcher();
        // tantivy's query parser keeps one clause per distinct word, as Finder weighs them.
        let mut seen = HashSet::new();
        let clauses: Vec<(Occur, Box<dyn Query>)> = q.iter().filter(|t| seen.insert(*t)).map(|t| {
            let term = tantivy::Term::from_field_text(text, t);
            (Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as Box<dyn Query>)
        }).collect();
        let theirs = their_searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(10).order_by_score()).unwrap();
        prop_assert_eq!(ours.len(), theirs.len());
        for ((addr, score), (their_score, their_addr)) in ours.iter().zip(&theirs) {
            prop_assert!((score - their_score).abs() <= 1e-4 * their_score.max(1.0), "{} vs {}", score, their_score);
            // Same document unless tantivy saw an exact tie at this score.
            if ordinal(*addr) != their_addr.doc_id {
                // (A tie across the cut at the tenth place counts: Finder's index stacks its
                // segments in another order than the reference's, so ties break otherwise.)
                let tied = theirs.iter().filter(|(s, _)| (s - their_score).abs() <= 1e-4).count();
                let at_cut = (their_score - theirs[theirs.len() - 1].0).abs() <= 1e-4;
                prop_assert!(tied > 1 || at_cut, "different document at a non-tied score");
            }
        }
    }
}

/// The scorer keeps its accumulator between queries on a thread: a query must find it clean,
/// whatever the queries before it touched, and list each document once.
#[test]
fn queries_leave_no_scores_behind() {
    let docs: Vec<Vec<usize>> = (0..30)
        .map(|i| {
            (0..(3 + i % 7))
                .map(|j| (i * 5 + j * 3) % VOCAB.len())
                .collect()
        })
        .collect();
    let (_fx, finder) = build(&docs);
    let index = finder.tantivy_index();
    let field = text_field(index);
    let searcher = index.reader().unwrap().searcher();
    let params = Bm25Params { k1: 1.2, b: 0.75 };
    let run = |text: &str, k: usize| {
        let q = analyze(&mut word_analyzer("english"), text);
        top_k(&searcher, field, &query_terms(field, &q), params, k).unwrap()
    };
    let first = run("token client restore", 5);
    let other = run("backup deploy token cache queue", 50);
    let again = run("token client restore", 5);
    assert_eq!(first, again, "a query after another ranks as before it");
    assert!(first.len() == 5 && other.len() > 5);

    // On a thread that never scored: the same list.
    let fresh = std::thread::scope(|s| {
        s.spawn(|| run("backup deploy token cache queue", 50))
            .join()
            .unwrap()
    });
    assert_eq!(other, fresh);
    let mut addresses: Vec<_> = other.iter().map(|(a, _)| *a).collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), other.len(), "each document listed once");
}

#[test]
fn a_repeated_query_word_weighs_by_k3() {
    // "restore" in many documents, "token" in few: weighed by its repeats, "restore" puts
    // the documents full of it ahead of the one that holds both words.
    let docs: Vec<Vec<usize>> = vec![
        vec![4, 4, 4, 4, 5],  // restore ×4, backup
        vec![4, 4, 4, 6],     // restore ×3, database
        vec![0, 4, 5, 6, 7],  // token, restore, backup, database, deploy
        vec![4, 9, 10],       // restore, cache, latency
        vec![4, 11, 12, 13],  // restore, error, retry, queue
        vec![8, 9, 10, 11],   // none of the query's words
        vec![12, 13, 14, 15], // none
    ];
    let (_fx, finder) = build(&docs);
    let mut settings = finder.settings().clone();
    settings.vector.enabled = false;
    settings.lexical.k3 = 0.0;
    let graph = &mut settings.graph;
    (
        graph.boost,
        graph.entities,
        graph.neighbours,
        graph.communities,
        graph.events,
    ) = (false, false, false, false, false);
    let lexical_at = |text: &str, settings: &finder_core::Settings| -> Vec<(String, f32)> {
        let response = finder.search(text, settings, 0, 10).unwrap();
        response
            .hits
            .iter()
            .map(|h| {
                let list = &h.explain.parts[0].lists;
                assert_eq!(list.len(), 1, "{}: only the lexical list ran", h.id);
                (h.id.clone(), list[0].score)
            })
            .collect()
    };
    let lexical = |text: &str| lexical_at(text, &settings);
    let once = lexical("token restore");
    assert_eq!(
        once[0].0, "d2",
        "the document with both words first: {once:?}"
    );
    for repeated in [
        "token restore restore",
        "restore token restore restore",
        "Restore, restore: token",
    ] {
        assert_eq!(
            lexical(repeated),
            once,
            "{repeated:?} ranks and scores as its words once at k3 = 0"
        );
    }

    // With k3, "restore" said three times weighs (k3 + 1)·3 / (k3 + 3): each document's
    // score grows by its "restore" part times that less one, so the documents full of it
    // close on the one that holds both words.
    let k3 = 3.0;
    let mut weighed = settings.clone();
    weighed.lexical.k3 = k3;
    let thrice = lexical_at("restore token restore restore", &weighed);
    let only_restore = lexical("restore");
    let extra = finder_core::query_term_weight(3, k3) - 1.0;
    for (id, score) in &thrice {
        let base = once.iter().find(|(i, _)| i == id).unwrap().1;
        let part = only_restore
            .iter()
            .find(|(i, _)| i == id)
            .map_or(0.0, |h| h.1);
        assert!(
            (score - (base + extra * part)).abs() < 1e-4,
            "{id}: {score} against {base} + {extra} × {part}"
        );
    }
    let share = |hits: &[(String, f32)]| {
        let of = |id: &str| hits.iter().find(|(i, _)| i == id).unwrap().1;
        of("d0") / of("d2")
    };
    assert!(share(&thrice) > share(&once), "{thrice:?} against {once:?}");
}
