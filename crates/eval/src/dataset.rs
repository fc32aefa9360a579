//! BEIR dataset layout: loading `queries.jsonl` and `qrels/<split>.tsv`, and fingerprinting the corpus.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::EvalError;

/// One evaluation query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: String,
    pub text: String,
}

/// A BEIR dataset restricted to one qrels split.
///
/// Invariant: `queries` and `qrels` cover the same query ids. Queries without judgments in the
/// split are dropped (they cannot be scored), and judgments for queries absent from
/// `queries.jsonl` are dropped too (they cannot be run).
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The directory's last component, e.g. `scifact`.
    pub name: String,
    pub dir: PathBuf,
    /// Judged queries, in the order of `queries.jsonl`.
    pub queries: Vec<Query>,
    /// query id → corpus id → grade.
    pub qrels: HashMap<String, HashMap<String, u32>>,
    /// Every source id, for a dataset whose queries are sources of the corpus themselves
    /// ([`crate::links_dataset`]): each query's own source takes no part in its ranking.
    pub sources: Option<Vec<String>>,
    /// What the index cache is keyed by, when not `corpus.jsonl`'s bytes.
    pub fingerprint: Option<String>,
}

impl Dataset {
    /// Loads `dir/queries.jsonl` and `dir/qrels/<split>.tsv`.
    pub fn load(dir: &Path, split: &str) -> Result<Dataset, EvalError> {
        let mut qrels = read_qrels(&dir.join("qrels").join(format!("{split}.tsv")))?;
        let all = read_queries(&dir.join("queries.jsonl"))?;
        let queries: Vec<Query> = all
            .into_iter()
            .filter(|q| qrels.contains_key(&q.id))
            .collect();
        let kept: HashSet<&str> = queries.iter().map(|q| q.id.as_str()).collect();
        qrels.retain(|id, _| kept.contains(id.as_str()));
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        Ok(Dataset {
            name,
            dir: dir.to_path_buf(),
            queries,
            qrels,
            sources: None,
            fingerprint: None,
        })
    }

    /// Number of (query, document) judgments, grade 0 included.
    pub fn judged_pairs(&self) -> usize {
        self.qrels.values().map(HashMap::len).sum()
    }
}

/// Short blake3 hex digest (16 chars) of `dir/corpus.jsonl`, used to key an index cache.
/// The file is streamed because BEIR corpora run to gigabytes.
pub fn corpus_fingerprint(dir: &Path) -> Result<String, EvalError> {
    let path = dir.join("corpus.jsonl");
    let mut file = File::open(&path).map_err(|e| EvalError::io(&path, e))?;
    let mut hasher = blake3::Hasher::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| EvalError::io(&path, e))?;
    let mut hex = hasher.finalize().to_hex().to_string();
    hex.truncate(16);
    Ok(hex)
}

/// Yields `(1-based line number, line)` for non-blank lines, with a leading BOM removed
/// (some BEIR mirrors were saved by editors that add one).
fn lines(
    path: &Path,
) -> Result<impl Iterator<Item = Result<(usize, String), EvalError>>, EvalError> {
    let file = File::open(path).map_err(|e| EvalError::io(path, e))?;
    let owned = path.to_path_buf();
    Ok(BufReader::new(file)
        .lines()
        .enumerate()
        .filter_map(move |(i, line)| match line {
            Err(e) => Some(Err(EvalError::io(&owned, e))),
            Ok(mut text) => {
                if i == 0 && text.starts_with('\u{feff}') {
                    text.drain(..'\u{feff}'.len_utf8());
                }
                if text.trim().is_empty() {
                    None
                } else {
                    Some(Ok((i + 1, text)))
                }
            }
        }))
}

fn read_queries(path: &Path) -> Result<Vec<Query>, EvalError> {
    let mut queries = Vec::new();
    let mut seen = HashSet::new();
    for item in lines(path)? {
        let (line, text) = item?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| EvalError::parse(path, line, format!("invalid JSON: {e}")))?;
        let id = match value.get("_id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            // Some BEIR exports write numeric ids; qrels always carry them as text.
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(_) => {
                return Err(EvalError::parse(
                    path,
                    line,
                    "`_id` must be a string or a number",
                ))
            }
            None => return Err(EvalError::parse(path, line, "missing `_id`")),
        };
        let text = match value.get("text") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(_) => return Err(EvalError::parse(path, line, "`text` must be a string")),
            None => return Err(EvalError::parse(path, line, "missing `text`")),
        };
        if !seen.insert(id.clone()) {
            return Err(EvalError::parse(
                path,
                line,
                format!("duplicate query id `{id}`"),
            ));
        }
        queries.push(Query { id, text });
    }
    Ok(queries)
}

fn read_qrels(path: &Path) -> Result<HashMap<String, HashMap<String, u32>>, EvalError> {
    let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
    let mut first = true;
    for item in lines(path)? {
        let (line, text) = item?;
        // Tabs are the BEIR format; ids could in principle hold spaces, so only fall back to
        // whitespace splitting when the line has no tab at all.
        let cols: Vec<&str> = if text.contains('\t') {
            text.split('\t').map(str::trim).collect()
        } else {
            text.split_whitespace().collect()
        };
        let is_header = first
            && cols
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case("query-id"));
        first = false;
        if is_header {
            continue;
        }
        let [query, doc, score] = cols[..] else {
            return Err(EvalError::parse(
                path,
                line,
                format!("expected 3 columns, found {}", cols.len()),
            ));
        };
        if query.is_empty() || doc.is_empty() {
            return Err(EvalError::parse(path, line, "empty query or corpus id"));
        }
        let grade: u32 = score.parse().map_err(|_| {
            EvalError::parse(
                path,
                line,
                format!("score `{score}` is not an integer >= 0"),
            )
        })?;
        // A pair judged twice keeps its highest grade: rejecting the file would make a whole
        // public dataset unusable over one redundant line.
        match qrels
            .entry(query.to_string())
            .or_default()
            .entry(doc.to_string())
        {
            Entry::Occupied(mut e) => *e.get_mut() = (*e.get()).max(grade),
            Entry::Vacant(e) => {
                e.insert(grade);
            }
        }
    }
    Ok(qrels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fixture(queries: &str, split: &str, qrels: &str) -> tempfile::TempDir {
        let tmp = tempfile::Builder::new()
            .prefix("tinyset")
            .tempdir()
            .unwrap();
        fs::write(tmp.path().join("queries.jsonl"), queries).unwrap();
        fs::create_dir(tmp.path().join("qrels")).unwrap();
        fs::write(tmp.path().join("qrels").join(format!("{split}.tsv")), qrels).unwrap();
        tmp
    }

    const QUERIES: &str = concat!(
        "{\"_id\": \"q1\", \"text\": \"first\", \"metadata\": {}}\n",
        "{\"_id\": 2, \"text\": \"second\"}\n",
        "\n",
        "{\"_id\": \"q3\", \"text\": \"third\"}\n",
        "{\"_id\": \"q4\", \"text\": \"fourth\"}\n",
    );

    #[test]
    fn loads_judged_queries_in_file_order() {
        let tmp = fixture(
            QUERIES,
            "test",
            "query-id\tcorpus-id\tscore\nq4\td1\t1\n2\td2\t2\n2\td3\t0\nq1 d9 1\nghost\td1\t1\n",
        );
        let ds = Dataset::load(tmp.path(), "test").unwrap();
        let ids: Vec<&str> = ds.queries.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["q1", "2", "q4"]);
        assert_eq!(ds.queries[1].text, "second");
        assert_eq!(ds.qrels["2"]["d2"], 2);
        assert_eq!(ds.qrels["2"]["d3"], 0);
        assert_eq!(ds.qrels["q1"]["d9"], 1);
        assert!(
            !ds.qrels.contains_key("ghost"),
            "judgments for unknown queries are dropped"
        );
        assert_eq!(ds.judged_pairs(), 4);
        assert!(ds.name.starts_with("tinyset"));
        assert_eq!(ds.dir, tmp.path());
    }

    #[test]
    fn header_is_optional_and_duplicates_keep_the_highest_grade() {
        let tmp = fixture(QUERIES, "dev", "q1\td1\t1\nq1\td1\t3\nq1\td1\t2\n");
        let ds = Dataset::load(tmp.path(), "dev").unwrap();
        assert_eq!(ds.qrels["q1"]["d1"], 3);
        assert_eq!(ds.queries.len(), 1);
    }

    #[test]
    fn wrong_column_count_names_file_and_line() {
        let tmp = fixture(
            QUERIES,
            "test",
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n",
        );
        let err = Dataset::load(tmp.path(), "test").unwrap_err().to_string();
        assert!(
            err.ends_with("qrels/test.tsv:3: expected 3 columns, found 2"),
            "{err}"
        );
    }

    #[test]
    fn negative_or_fractional_grades_are_rejected() {
        for bad in ["-1", "0.5", "x"] {
            let tmp = fixture(QUERIES, "test", &format!("q1\td1\t{bad}\n"));
            let err = Dataset::load(tmp.path(), "test").unwrap_err().to_string();
            assert!(err.contains("qrels/test.tsv:1: score"), "{err}");
        }
    }

    #[test]
    fn bad_query_lines_name_file_and_line() {
        let cases = [
            (
                "{\"_id\": \"a\", \"text\": \"x\"}\nnot json\n",
                "queries.jsonl:2: invalid JSON",
            ),
            ("{\"text\": \"x\"}\n", "queries.jsonl:1: missing `_id`"),
            (
                "{\"_id\": [1], \"text\": \"x\"}\n",
                "queries.jsonl:1: `_id` must be",
            ),
            ("{\"_id\": \"a\"}\n", "queries.jsonl:1: missing `text`"),
            (
                "{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"a\", \"text\": \"y\"}\n",
                "queries.jsonl:2: duplicate query id `a`",
            ),
        ];
        for (queries, want) in cases {
            let tmp = fixture(queries, "test", "a\td\t1\n");
            let err = Dataset::load(tmp.path(), "test").unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn bom_is_ignored() {
        let tmp = fixture(
            "\u{feff}{\"_id\": \"q1\", \"text\": \"a\"}\n",
            "test",
            "\u{feff}query-id\tcorpus-id\tscore\nq1\td1\t1\n",
        );
        let ds = Dataset::load(tmp.path(), "test").unwrap();
        assert_eq!(ds.queries.len(), 1);
        assert_eq!(ds.judged_pairs(), 1);
    }

    #[test]
    fn missing_split_is_an_io_error_naming_the_file() {
        let tmp = fixture(QUERIES, "test", "");
        let err = Dataset::load(tmp.path(), "train").unwrap_err();
        assert!(matches!(err, EvalError::Io { .. }));
        assert!(err.to_string().contains("qrels/train.tsv"), "{err}");
    }

    #[test]
    fn fingerprint_is_short_hex_of_the_corpus_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let body = b"{\"_id\":\"d1\",\"title\":\"\",\"text\":\"hello\"}\n";
        fs::write(tmp.path().join("corpus.jsonl"), body).unwrap();
        let fp = corpus_fingerprint(tmp.path()).unwrap();
        assert_eq!(fp.len(), 16);
        assert_eq!(fp, blake3::hash(body).to_hex()[..16]);
        fs::write(tmp.path().join("corpus.jsonl"), b"other").unwrap();
        assert_ne!(corpus_fingerprint(tmp.path()).unwrap(), fp);
        let empty = tempfile::tempdir().unwrap();
        assert!(corpus_fingerprint(empty.path()).is_err());
    }

    #[test]
    fn scifact_test_split_when_present() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/scifact");
        if !dir.join("queries.jsonl").exists() {
            println!("skipping: {} not present", dir.display());
            return;
        }
        let ds = Dataset::load(&dir, "test").unwrap();
        assert_eq!(ds.name, "scifact");
        assert_eq!(ds.queries.len(), 300);
        assert_eq!(ds.qrels.len(), 300);
        assert_eq!(ds.judged_pairs(), 339);
    }
}
