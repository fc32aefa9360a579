//! Fixture helpers: temporary index folders and record files.

use std::path::{Path, PathBuf};

use finder_core::Settings;
use finder_index::{index_inputs, Finder, RunReport};

pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn index_dir(&self) -> PathBuf {
        self.path("index")
    }

    pub fn index(&self, inputs: &[&Path], settings: &Settings) -> RunReport {
        let inputs: Vec<PathBuf> = inputs.iter().map(|p| p.to_path_buf()).collect();
        index_inputs(&self.index_dir(), &inputs, settings, &mut |_| {}).expect("index run")
    }

    pub fn open(&self) -> Finder {
        Finder::open(&self.index_dir(), Settings::default()).expect("open index")
    }
}

/// The files in the `lexical/` folder of the index in `index_dir` with `extension`, sorted.
pub fn lexical_files(index_dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(index_dir.join("lexical"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    out.sort();
    out
}

/// One JSON Lines record.
pub fn record(id: &str, title: &str, text: &str) -> String {
    serde_json::json!({ "id": id, "title": title, "text": text }).to_string()
}

/// Ids of the hits of a query, best first.
pub fn ids(finder: &Finder, query: &str, settings: &Settings) -> Vec<String> {
    finder
        .search(query, settings, 0, 50)
        .expect("search")
        .hits
        .into_iter()
        .map(|h| h.id)
        .collect()
}

/// The graph an index holds, but for the commit time it was built from: a run that changed
/// nothing commits again and keeps its graph.
pub fn graph_file(index: &Path) -> serde_json::Value {
    let bytes = std::fs::read(index.join("graph/graph.json")).unwrap();
    let mut graph: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    graph.as_object_mut().unwrap().remove("built_from");
    graph
}
