//! `finder watch`: the index follows creates, edits, renames, deletes and ignore rules, and
//! ends equal to a clean build of the same files; over PostgreSQL too.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ok, write};

/// The watching process, stopped when the test ends however it ends.
struct Watching(Child);

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `query` finds, by id; nothing while the index is not there yet.
fn ids(index: &Path, query: &str) -> Vec<String> {
    let out = crate::finder(&[
        "search",
        query,
        "--index",
        index.to_str().unwrap(),
        "--json",
    ]);
    if !out.status.success() {
        return Vec::new();
    }
    let response: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    response["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `query` finds exactly `expected`. Convergence, not speed, is what is tested:
/// the wait is long enough for a loaded machine.
fn until_found(index: &Path, query: &str, expected: &[&str]) {
    let started = Instant::now();
    loop {
        let found = ids(index, query);
        if found == expected {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "`{query}` still finds {found:?}, expected {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status(index: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&[
        "status",
        "--index",
        index.to_str().unwrap(),
        "--json",
    ]))
    .unwrap()
}

/// `finder watch` of `notes` into `index`, reacting fast and never rescanning, with no model.
fn start_watch(notes: &Path, index: &Path, stderr: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_finder"))
        .args(["watch", notes.to_str().unwrap(), "--index"])
        .arg(index)
        .args(["--debounce-ms", "50", "--rescan-secs", "0"])
        .env("FINDER_MODEL_DIR", "/nonexistent/finder-model")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start finder watch")
}

#[test]
fn watch_follows_creates_edits_renames_deletes_and_ignore_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let notes = crate::notes(tmp.path());
    let index = tmp.path().join("idx");
    let _watching = Watching(start_watch(&notes, &index, Stdio::null()));
    until_found(&index, "snapshots", &["backups.md"]);

    write(&notes, "glacier.md", "# Glacier\n\nMoraine and crevasse.\n");
    until_found(&index, "moraine", &["glacier.md"]);

    write(&notes, "glacier.md", "# Volcano\n\nCaldera and tephra.\n");
    until_found(&index, "caldera", &["glacier.md"]);
    until_found(&index, "moraine", &[]);

    std::fs::rename(notes.join("glacier.md"), notes.join("misc/volcano.md")).unwrap();
    until_found(&index, "caldera", &["misc/volcano.md"]);

    std::fs::remove_file(notes.join("backups.md")).unwrap();
    until_found(&index, "snapshots", &[]);

    // Churn in a hidden folder is not a change; an ignore rule is.
    write(&notes, ".git/HEAD", "ref: refs/heads/main\n");
    write(&notes, ".finderignore", "misc/\n");
    until_found(&index, "caldera", &[]);
    until_found(&index, "warmup", &[]);
    until_found(&index, "refresh token", &["tokens.md"]);

    // Every file is accounted for: one indexed, the folder the rule leaves out.
    let files: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        "--index",
        index.to_str().unwrap(),
        "--files",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        files["totals"],
        serde_json::json!({"indexed": 1, "ignored": 1}),
        "{files}"
    );
    assert_eq!(files["files"][0]["rule"], ".finderignore: misc/");

    // What the watch left equals a clean build of the same files.
    let clean = tmp.path().join("clean");
    ok(&[
        "index",
        notes.to_str().unwrap(),
        "--index",
        clean.to_str().unwrap(),
    ]);
    let (watched, built) = (status(&index), status(&clean));
    for key in ["sources", "fragments", "origins"] {
        assert_eq!(watched[key], built[key], "{key}: {watched} vs {built}");
    }
    for query in ["refresh token", "caldera", "snapshots", "cache warmup"] {
        assert_eq!(ids(&index, query), ids(&clean, query), "{query}");
    }
}

/// A run that fails (here: another writer holds the index past the watch's retries) loses no
/// change: the next change's run reads every file, the failed run's change with it.
#[test]
fn a_change_whose_run_failed_is_taken_by_the_next_run() {
    use std::io::BufRead;

    let tmp = tempfile::tempdir().unwrap();
    let notes = crate::notes(tmp.path());
    let index = tmp.path().join("idx");
    let mut child = start_watch(&notes, &index, Stdio::piped());
    let (tx, failures) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("indexing into") {
                let _ = tx.send(line);
            }
        }
    });
    let _watching = Watching(child);
    until_found(&index, "snapshots", &["backups.md"]);

    // Another writer holds the index while a note changes: the run gives up.
    let lock = std::fs::File::open(index.join("indexing.lock")).unwrap();
    lock.lock().unwrap();
    // Written beside the folder and moved in: one event, so no second run takes the note.
    let outside = write(
        tmp.path(),
        "glacier.md",
        "# Glacier\n\nMoraine and crevasse.\n",
    );
    std::fs::rename(outside, notes.join("glacier.md")).unwrap();
    let failure = failures
        .recv_timeout(Duration::from_secs(120))
        .expect("the run that found the index busy is reported");
    assert!(failure.contains("another process"), "{failure}");
    lock.unlock().unwrap();
    drop(lock);

    // The next change is another note; the first one's edit comes with it.
    write(&notes, "volcano.md", "# Volcano\n\nCaldera and tephra.\n");
    until_found(&index, "caldera", &["volcano.md"]);
    until_found(&index, "moraine", &["glacier.md"]);
}

#[test]
fn watch_follows_files_into_postgres_as_a_run_over_every_file() {
    let Some(server) = finder_pg::testing::server("finder watch over postgres") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = crate::notes(tmp.path());
    // A folder holding only the settings, one per database.
    let home = |name: &str| {
        let db = server.database(name);
        let home = crate::pg_home(&tmp.path().join(name), &db.url);
        (db, home)
    };
    let (_watched_db, watched) = home("watched");
    let child = Command::new(env!("CARGO_BIN_EXE_finder"))
        .args(["watch", notes.to_str().unwrap(), "--index"])
        .arg(&watched)
        .args(["--debounce-ms", "50", "--rescan-secs", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start finder watch");
    let _watching = Watching(child);
    until_found(&watched, "snapshots", &["backups.md"]);

    write(&notes, "glacier.md", "# Glacier\n\nMoraine and crevasse.\n");
    until_found(&watched, "moraine", &["glacier.md"]);
    write(&notes, "glacier.md", "# Volcano\n\nCaldera and tephra.\n");
    until_found(&watched, "caldera", &["glacier.md"]);
    until_found(&watched, "moraine", &[]);
    std::fs::rename(notes.join("glacier.md"), notes.join("misc/volcano.md")).unwrap();
    until_found(&watched, "caldera", &["misc/volcano.md"]);
    std::fs::remove_file(notes.join("backups.md")).unwrap();
    until_found(&watched, "snapshots", &[]);

    // What the watch left equals a run over every file into another database.
    let (_clean_db, clean) = home("clean");
    ok(&[
        "index",
        notes.to_str().unwrap(),
        "--index",
        clean.to_str().unwrap(),
    ]);
    let (w, c) = (&status(&watched)["shards"][0], &status(&clean)["shards"][0]);
    assert_eq!(
        (&w["sources"], &w["fragments"]),
        (&c["sources"], &c["fragments"]),
        "{w} vs {c}"
    );
    for query in ["refresh token", "caldera", "snapshots", "cache warmup"] {
        assert_eq!(ids(&watched, query), ids(&clean, query), "{query}");
    }
}
