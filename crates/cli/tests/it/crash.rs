//! Crash safety: `finder index` and `finder serve` are killed with SIGKILL at random points
//! and the index is reopened each time.
//!
//! Index runs: a notes folder (links, tags) and a JSON Lines stream with precomputed vectors
//! change between runs; each run is killed after a random delay within the time a full run
//! takes (ingest, commit, graph build, vector build). After every kill the index must open,
//! hold exactly the previous committed state or exactly the new one (never a mix), find every
//! source it holds by its own word, and report a consistent status; re-running must complete
//! and converge to the state a clean build of the same inputs reaches.
//!
//! Server writes: documents are PUT one after another and the server is killed at a random
//! moment; after a restart every acknowledged write must be there, with its latest content.
//!
//! Watch: `finder watch` is killed during bursts of edits, deletions and additions; the index must
//! open and be consistent after each kill, and a restarted watch must converge to the files.
//!
//! Kill counts: `FINDER_CRASH_KILLS` (index runs, default 20), `FINDER_CRASH_WATCH_KILLS`
//! (default 5) and `FINDER_CRASH_SERVER_KILLS` (default 5); `FINDER_CRASH_SEED` varies the
//! schedule.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use finder_core::Query;
use finder_index::{load_settings, Finder};

use crate::write;

/// A small deterministic generator (xorshift64*), so a failing schedule can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    env_count("FINDER_CRASH_SEED", 0x5eed) as u64 | 1
}

const WORDS: &[&str] = &[
    "token", "backup", "deploy", "cache", "session", "schema", "index", "replica", "queue",
    "shard", "latency", "budget", "rollback", "snapshot", "cluster", "metric", "alert", "owner",
    "review", "incident",
];

/// The inputs of one generation: the id and title of every source they hold.
struct Corpus {
    notes: PathBuf,
    stream: PathBuf,
    /// Note number → the generation that last wrote it.
    note_gen: BTreeMap<u32, u32>,
    /// Record number → the generation that last wrote it.
    record_gen: BTreeMap<u32, u32>,
    next_note: u32,
    next_record: u32,
}

const DIM: usize = 8;

impl Corpus {
    fn new(root: &Path, notes: u32, records: u32) -> Corpus {
        let mut c = Corpus {
            notes: root.join("notes"),
            stream: root.join("stream.jsonl"),
            note_gen: BTreeMap::new(),
            record_gen: BTreeMap::new(),
            next_note: notes,
            next_record: records,
        };
        for n in 0..notes {
            c.note_gen.insert(n, 0);
        }
        for r in 0..records {
            c.record_gen.insert(r, 0);
        }
        for n in 0..notes {
            c.write_note(n, 0);
        }
        c.write_stream();
        c
    }

    fn write_note(&self, n: u32, generation: u32) {
        let mut body = String::new();
        for p in 0..3 {
            body.push_str(&format!("## Part {p}\n\n"));
            for w in 0..30 {
                body.push_str(WORDS[((n as usize) * 7 + p * 3 + w) % WORDS.len()]);
                body.push(' ');
            }
            body.push_str(&format!(
                "uqn{n}x. See [[n{}]].\n\n",
                (n * 13 + p as u32) % 50
            ));
        }
        write(
            &self.notes,
            &format!("n{n}.md"),
            &format!(
                "---\ntitle: Note {n} g{generation}\ntags: [t{}]\n---\n# Note {n}\n\n{body}",
                n % 7
            ),
        );
    }

    fn write_stream(&self) {
        let mut out = String::new();
        for (&r, &generation) in &self.record_gen {
            let vector: Vec<f32> = (0..DIM)
                .map(|d| (((r as usize + 1) * (d + 3) + generation as usize) % 17) as f32 - 8.0)
                .collect();
            let record = serde_json::json!({
                "id": format!("r{r}"),
                "title": format!("Record {r} g{generation}"),
                "text": format!("{} {} uqr{r}x about {}", WORDS[r as usize % WORDS.len()],
                    WORDS[(r as usize * 3) % WORDS.len()], WORDS[(r as usize * 5) % WORDS.len()]),
                "vector": vector,
            });
            out.push_str(&record.to_string());
            out.push('\n');
        }
        let tmp = self.stream.with_extension("jsonl.tmp");
        std::fs::write(&tmp, out).unwrap();
        std::fs::rename(&tmp, &self.stream).unwrap();
    }

    /// Changes, removes and adds a few sources of each kind.
    fn mutate(&mut self, rng: &mut Rng, generation: u32) {
        let notes: Vec<u32> = self.note_gen.keys().copied().collect();
        for _ in 0..8 {
            let n = notes[rng.below(notes.len() as u64) as usize];
            self.note_gen.insert(n, generation);
            self.write_note(n, generation);
        }
        for _ in 0..2 {
            let n = notes[rng.below(notes.len() as u64) as usize];
            if self.note_gen.remove(&n).is_some() {
                std::fs::remove_file(self.notes.join(format!("n{n}.md"))).unwrap();
            }
        }
        for _ in 0..3 {
            let n = self.next_note;
            self.next_note += 1;
            self.note_gen.insert(n, generation);
            self.write_note(n, generation);
        }
        let records: Vec<u32> = self.record_gen.keys().copied().collect();
        for _ in 0..20 {
            let r = records[rng.below(records.len() as u64) as usize];
            self.record_gen.insert(r, generation);
        }
        for _ in 0..5 {
            let r = records[rng.below(records.len() as u64) as usize];
            self.record_gen.remove(&r);
        }
        for _ in 0..10 {
            let r = self.next_record;
            self.next_record += 1;
            self.record_gen.insert(r, generation);
        }
        self.write_stream();
    }

    /// Source id → title, as an index of these inputs holds them.
    fn expected(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (n, g) in &self.note_gen {
            out.insert(format!("n{n}.md"), format!("Note {n} g{g}"));
        }
        for (r, g) in &self.record_gen {
            out.insert(format!("r{r}"), format!("Record {r} g{g}"));
        }
        out
    }
}

fn finder_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_finder"));
    cmd.env("FINDER_MODEL_DIR", "/nonexistent/finder-model")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

fn index_cmd(corpus: &Corpus, index: &Path) -> Command {
    let mut cmd = finder_cmd();
    cmd.arg("index")
        .arg(&corpus.notes)
        .arg(&corpus.stream)
        .arg("--index")
        .arg(index);
    cmd
}

fn run_index(corpus: &Corpus, index: &Path) {
    let out = index_cmd(corpus, index)
        .stderr(Stdio::piped())
        .output()
        .expect("run finder index");
    assert!(
        out.status.success(),
        "finder index failed on {}: {}",
        index.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn configure(index: &Path) {
    write(
        index,
        "finder.toml",
        &format!("[embed]\nbackend = \"precomputed\"\ndim = {DIM}\n"),
    );
}

/// What the index holds now: id → title for every id either state could have.
fn observe(index: &Path, ids: &[&String]) -> (Finder, BTreeMap<String, String>) {
    let finder = Finder::open(index, load_settings(index, None).unwrap())
        .unwrap_or_else(|e| panic!("the index does not open after a kill: {e}"));
    let mut held = BTreeMap::new();
    for id in ids {
        if let Some(view) = finder
            .source(id)
            .unwrap_or_else(|e| panic!("reading source {id}: {e}"))
        {
            held.insert((*id).clone(), view.envelope.title.clone());
        }
    }
    (finder, held)
}

/// Every held source is found by its own word, and the status agrees with what is held.
fn check_consistent(finder: &Finder, held: &BTreeMap<String, String>, rng: &mut Rng) {
    let status = finder.status().expect("status after a kill");
    assert_eq!(
        status.sources as usize,
        held.len(),
        "status counts {} sources, the snapshot holds {}",
        status.sources,
        held.len()
    );
    let ids: Vec<&String> = held.keys().collect();
    for _ in 0..40 {
        let id = ids[rng.below(ids.len() as u64) as usize];
        let word = format!("uq{}x", id.trim_end_matches(".md"));
        let query = Query::text(&word, 0, 3);
        let response = finder
            .query(&query, finder.settings())
            .unwrap_or_else(|e| panic!("search for {word}: {e}"));
        assert!(
            response.hits.iter().any(|h| &h.id == id),
            "source {id} is held but `{word}` does not find it"
        );
    }
}

#[test]
fn index_survives_sigkill_at_random_points() {
    let kills = env_count("FINDER_CRASH_KILLS", 20);
    let mut rng = Rng(seed());
    let tmp = tempfile::tempdir().unwrap();
    let notes = env_count("FINDER_CRASH_NOTES", 150) as u32;
    let records = env_count("FINDER_CRASH_RECORDS", 400) as u32;
    let mut corpus = Corpus::new(tmp.path(), notes, records);
    let index = tmp.path().join("idx");
    configure(&index);

    let started = Instant::now();
    run_index(&corpus, &index);
    let full_run = started.elapsed();

    let (mut landed, mut before_commit, mut after_commit, mut finished) = (0, 0, 0, 0);
    // Kills that left a derived layer behind the commit (repaired by the next run).
    let (mut graph_behind, mut vectors_behind) = (0, 0);
    let mut generation = 0;
    let mut runs = 0;
    while landed < kills {
        runs += 1;
        assert!(runs < kills * 5, "kills keep landing after the run ended");
        generation += 1;
        let before = corpus.expected();
        corpus.mutate(&mut rng, generation);
        let after = corpus.expected();

        let mut child = index_cmd(&corpus, &index).spawn().unwrap();
        // Anywhere from the start to a little past a typical full run.
        let delay = full_run.mul_f64(rng.unit() * 1.2);
        std::thread::sleep(delay);
        let exited_first = child.try_wait().unwrap().is_some();
        child.kill().ok(); // SIGKILL
        let status = child.wait().unwrap();
        if exited_first {
            assert!(status.success(), "finder index failed before the kill");
            finished += 1;
        } else {
            landed += 1;
        }

        let ids: Vec<&String> = before.keys().chain(after.keys()).collect();
        let (finder, held) = observe(&index, &ids);
        if held == after {
            after_commit += usize::from(!exited_first);
        } else if held == before {
            before_commit += 1;
        } else {
            let mixed: Vec<_> = held
                .iter()
                .filter(|(id, t)| before.get(*id) != Some(t) && after.get(*id) != Some(t))
                .take(5)
                .collect();
            panic!(
                "after a kill {delay:?} into run {runs} the index holds a mix of two commits \
                 ({} sources; before {}, after {}; e.g. {mixed:?})",
                held.len(),
                before.len(),
                after.len()
            );
        }
        check_consistent(&finder, &held, &mut rng);
        let status = finder.status().unwrap();
        graph_behind += usize::from(status.graph.as_ref().is_some_and(|g| !g.current));
        vectors_behind += usize::from(status.vectors.as_ref().is_some_and(|v| {
            v.pending || v.done != held.keys().filter(|id| id.starts_with('r')).count()
        }));
        drop(finder);

        // Re-running completes and holds the new inputs, with every layer current.
        run_index(&corpus, &index);
        let (finder, held) = observe(&index, &ids);
        assert_eq!(held, after, "re-running after a kill did not converge");
        let status = finder.status().unwrap();
        assert!(
            status.graph.as_ref().is_some_and(|g| g.current),
            "the graph is behind the commit after a complete run: {:?}",
            status.graph
        );
        let vectors = status.vectors.expect("vector layer");
        assert!(
            !vectors.pending,
            "vector build still pending after a complete run"
        );
        assert_eq!(
            vectors.done,
            corpus.record_gen.len(),
            "one vector per record"
        );
    }

    // The survivor holds and finds what a clean build of the same inputs holds and finds.
    // (Rankings of common words may differ a little: deleted documents still count in BM25
    // statistics until their segment is merged, as in any incremental index.)
    let clean = tmp.path().join("clean");
    configure(&clean);
    run_index(&corpus, &clean);
    let survivor = Finder::open(&index, load_settings(&index, None).unwrap()).unwrap();
    let fresh = Finder::open(&clean, load_settings(&clean, None).unwrap()).unwrap();
    let (a, b) = (survivor.status().unwrap(), fresh.status().unwrap());
    assert_eq!((a.sources, a.fragments), (b.sources, b.fragments));
    let ids: Vec<String> = corpus.expected().into_keys().collect();
    for _ in 0..20 {
        let picked: Vec<&String> = (0..4)
            .map(|_| &ids[rng.below(ids.len() as u64) as usize])
            .collect();
        let q: Vec<String> = picked
            .iter()
            .map(|id| format!("uq{}x", id.trim_end_matches(".md")))
            .collect();
        let found = |f: &Finder| -> std::collections::BTreeSet<String> {
            f.query(&Query::text(q.join(" "), 0, 10), f.settings())
                .unwrap()
                .hits
                .into_iter()
                .map(|h| h.id)
                .filter(|id| picked.contains(&id))
                .collect()
        };
        let (s, c) = (found(&survivor), found(&fresh));
        assert_eq!(s, c, "`{}` finds different sources", q.join(" "));
        assert_eq!(
            s.len(),
            picked
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
    }
    println!(
        "crash: {landed} kills of finder index survived ({before_commit} before the commit, \
         {after_commit} after it, of which {graph_behind} left the graph and {vectors_behind} \
         the vectors behind until the next run; {finished} runs ended before their kill); \
         {} sources, full run {:.0} ms",
        corpus.expected().len(),
        full_run.as_secs_f64() * 1000.0
    );
}

/// `finder watch` killed with SIGKILL in the middle of bursts of edits, deletions and additions:
/// after each kill the index opens, counts what it holds and finds each held source by its own
/// word; a restarted watch converges to the files, and ends as a clean build of them.
#[test]
fn watch_survives_sigkill_during_bursts() {
    let kills = env_count("FINDER_CRASH_WATCH_KILLS", 5);
    let mut rng = Rng(seed() ^ 0x77a7c4);
    let tmp = tempfile::tempdir().unwrap();
    let mut corpus = Corpus::new(tmp.path(), 60, 120);
    let index = tmp.path().join("idx");
    configure(&index);
    let watch = |corpus: &Corpus| {
        let mut cmd = finder_cmd();
        cmd.arg("watch")
            .arg(&corpus.notes)
            .arg(&corpus.stream)
            .args(["--debounce-ms", "20", "--rescan-secs", "0", "--index"])
            .arg(&index);
        cmd.spawn().expect("start finder watch")
    };
    // Every id any generation had: what the index may hold after a kill.
    let mut seen: std::collections::BTreeSet<String> = corpus.expected().into_keys().collect();
    let mut generation = 0;
    for _ in 0..kills {
        let mut child = watch(&corpus);
        let bursts = 1 + rng.below(4);
        for _ in 0..bursts {
            generation += 1;
            corpus.mutate(&mut rng, generation);
            seen.extend(corpus.expected().into_keys());
            std::thread::sleep(Duration::from_millis(rng.below(150)));
        }
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        assert!(
            child.try_wait().unwrap().is_none(),
            "finder watch exited by itself"
        );
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        let ids: Vec<&String> = seen.iter().collect();
        let (finder, held) = observe(&index, &ids);
        check_consistent(&finder, &held, &mut rng);
    }

    // A restarted watch catches up with the files without any event: its first run does.
    let mut child = watch(&corpus);
    let expected = corpus.expected();
    let ids: Vec<&String> = seen.iter().collect();
    let started = Instant::now();
    loop {
        let (_, held) = observe(&index, &ids);
        if held == expected {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the restarted watch did not converge: {} held, {} expected",
            held.len(),
            expected.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().ok();
    child.wait().unwrap();
    let clean = tmp.path().join("clean");
    configure(&clean);
    run_index(&corpus, &clean);
    let (watched, built) = (observe(&index, &ids).1, observe(&clean, &ids).1);
    assert_eq!(watched, built);
    println!(
        "crash: {kills} kills of finder watch during bursts survived; {generation} generations, \
         {} sources",
        expected.len()
    );
}

/// A running `finder serve`, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(index: &Path) -> Server {
        let mut child = finder_cmd()
            .args(["serve", "--addr", "127.0.0.1:0", "--index"])
            .arg(index)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("serve prints its address").unwrap();
        let addr = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in `{first}`"))
            .to_string();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// One HTTP/1.1 request on its own connection: the status code and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in `{answer}`")))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    Ok((code, body))
}

#[test]
fn acknowledged_writes_survive_sigkill_of_the_server() {
    let kills = env_count("FINDER_CRASH_SERVER_KILLS", 5);
    let mut rng = Rng(seed() ^ 0xabcdef);
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("idx");
    // id → the version of its text last acknowledged.
    let mut acknowledged: BTreeMap<u32, u32> = BTreeMap::new();
    let mut next_id = 0u32;
    let mut writes = 0usize;
    for round in 0..kills {
        let server = Server::start(&index);
        let addr = server.addr.clone();
        let kill_after = Duration::from_millis(200 + rng.below(1500));
        let started = Instant::now();
        // Writes go on until the kill cuts one off; only a 200 counts as acknowledged.
        let (tx, rx) = std::sync::mpsc::channel::<(u32, u32)>();
        let mut plan = Vec::new();
        for _ in 0..200 {
            if !acknowledged.is_empty() && rng.below(4) == 0 {
                let ids: Vec<u32> = acknowledged.keys().copied().collect();
                plan.push(ids[rng.below(ids.len() as u64) as usize]);
            } else {
                plan.push(next_id);
                next_id += 1;
            }
        }
        let writer = std::thread::spawn(move || {
            for id in plan {
                let version = round as u32 + 1;
                let body = serde_json::json!({
                    "title": format!("Doc {id} v{version}"),
                    "text": format!("uqd{id}x written in round {version}"),
                })
                .to_string();
                match http(&addr, "PUT", &format!("/v1/documents/d{id}"), &body) {
                    Ok((200, _)) => {
                        if tx.send((id, version)).is_err() {
                            return;
                        }
                    }
                    Ok((code, body)) => panic!("PUT d{id}: {code} {body}"),
                    Err(_) => return, // the server is gone
                }
            }
        });
        while started.elapsed() < kill_after && !writer.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(server); // SIGKILL
        writer.join().unwrap();
        for (id, version) in rx.try_iter() {
            acknowledged.insert(id, version);
            writes += 1;
        }

        // Restarted: every acknowledged write is there with its latest content.
        let server = Server::start(&index);
        for (id, version) in &acknowledged {
            let (code, body) = http(&server.addr, "GET", &format!("/v1/documents/d{id}"), "")
                .expect("GET after restart");
            assert_eq!(code, 200, "acknowledged d{id} lost after a kill: {body}");
            // A write cut off by the kill may have committed without its answer: the
            // version held is the acknowledged one or a later one, never an earlier one.
            let held: u32 = body
                .split(&format!("Doc {id} v"))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("d{id}: no version in {body}"));
            assert!(
                held >= *version,
                "d{id} lost its acknowledged version {version} (holds v{held})"
            );
        }
        let sample: Vec<u32> = acknowledged.keys().copied().rev().take(10).collect();
        for id in sample {
            let query = serde_json::json!({"query": format!("uqd{id}x"), "limit": 3}).to_string();
            let (code, body) = http(&server.addr, "POST", "/v1/search", &query).unwrap();
            assert_eq!(code, 200, "{body}");
            assert!(
                body.contains(&format!("\"d{id}\"")),
                "acknowledged d{id} not searchable after a restart: {body}"
            );
        }
    }
    println!(
        "crash: {kills} kills of finder serve survived; {writes} acknowledged writes, {} documents, none lost",
        acknowledged.len()
    );
}
