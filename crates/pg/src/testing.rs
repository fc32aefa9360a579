//! A real PostgreSQL for tests: the one `FINDER_PG_URL` names, or a throwaway server that
//! `scripts/postgres.sh` starts in a temporary folder while any test of the process holds it.
//! Only when neither works is a test skipped, saying so. Compiled with the `testing` feature,
//! for this crate's tests and the tests of crates that serve over PostgreSQL.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use postgres::{Client, NoTls};

use crate::with_database;

fn script() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

fn server_dir() -> PathBuf {
    std::env::temp_dir().join(format!("finder-pg-test-{}", std::process::id()))
}

/// How many tests hold the server the script started (it stops with the last one).
static USERS: Mutex<(usize, Option<String>)> = Mutex::new((0, None));

fn run_script(args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed: {}",
            script().display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout.lines().last().unwrap_or("").trim().to_string())
}

/// A server for one test; `None` (after saying why) when there is none to be had.
pub struct Server {
    pub url: String,
    /// Started by the script (so a replica of it can be made too).
    pub owned: bool,
    /// The folder of a server this test alone uses ([`private_server`]).
    private: Option<PathBuf>,
}

/// Gives each private server and replica of the process its own folder.
static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

fn fresh_dir(kind: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "finder-pg-{kind}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The server the process's tests share (started with the first of them).
pub fn server(test: &str) -> Option<Server> {
    if let Ok(url) = std::env::var("FINDER_PG_URL") {
        return Some(Server {
            url,
            owned: false,
            private: None,
        });
    }
    let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
    if users.0 == 0 {
        let dir = server_dir();
        match run_script(&["start", &dir.display().to_string()]) {
            Ok(url) => users.1 = Some(url),
            Err(e) => {
                eprintln!(
                    "SKIPPED {test}: FINDER_PG_URL is unset and scripts/postgres.sh could not start a server: {e}"
                );
                return None;
            }
        }
    }
    users.0 += 1;
    Some(Server {
        url: users.1.clone().expect("started"),
        owned: true,
        private: None,
    })
}

/// A server of the test's own, which it may stop and restart ([`Server::restart`]); `None`
/// (after saying why) when the script cannot start one (with `FINDER_PG_URL` given too: that
/// server cannot be restarted by a test).
pub fn private_server(test: &str) -> Option<Server> {
    if std::env::var("FINDER_PG_URL").is_ok() {
        eprintln!("SKIPPED {test}: it restarts its server, and FINDER_PG_URL names a shared one");
        return None;
    }
    let dir = fresh_dir("private");
    match run_script(&["start", &dir.display().to_string()]) {
        Ok(url) => Some(Server {
            url,
            owned: true,
            private: Some(dir),
        }),
        Err(e) => {
            eprintln!("SKIPPED {test}: scripts/postgres.sh could not start a server: {e}");
            None
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(dir) = &self.private {
            let _ = run_script(&["stop", &dir.display().to_string()]);
            let _ = std::fs::remove_dir_all(dir);
            return;
        }
        if !self.owned {
            return;
        }
        let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0 {
            let dir = server_dir();
            if let Err(e) = run_script(&["stop", &dir.display().to_string()]) {
                eprintln!("{e}");
            }
            let _ = std::fs::remove_dir_all(&dir);
            users.1 = None;
        }
    }
}

/// A streaming replica of the script's server, stopped when dropped.
pub struct Replica {
    pub url: String,
    dir: PathBuf,
}

impl Server {
    fn dir(&self) -> PathBuf {
        self.private.clone().unwrap_or_else(server_dir)
    }

    pub fn replica(&self) -> Result<Replica, String> {
        let dir = fresh_dir("replica");
        let url = run_script(&[
            "replica",
            &self.dir().display().to_string(),
            &dir.display().to_string(),
        ])?;
        Ok(Replica { url, dir })
    }

    /// Stops the server (fast: open sessions are ended) and starts it again on its port.
    /// Only a [`private_server`] may be restarted.
    pub fn restart(&self) -> Result<(), String> {
        let Some(dir) = &self.private else {
            return Err("only a private server can be restarted".into());
        };
        run_script(&["stop", &dir.display().to_string()])?;
        run_script(&["start", &dir.display().to_string()]).map(|_| ())
    }

    /// A fresh, empty database; dropped with the value.
    pub fn database(&self, name: &str) -> Database {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let db = format!(
            "finder_{name}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = Client::connect(&self.url, NoTls).expect("connect to the test server");
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .expect("create a test database");
        Database {
            url: with_database(&self.url, &db),
            admin_url: self.url.clone(),
            name: db,
        }
    }
}

impl Replica {
    /// Stops the replica now (fast: its sessions are ended).
    pub fn stop(&self) -> Result<(), String> {
        run_script(&["stop", &self.dir.display().to_string()]).map(|_| ())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = run_script(&["stop", &self.dir.display().to_string()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Database {
    pub url: String,
    pub name: String,
    admin_url: String,
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.admin_url, NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The JSON of a stored graph or its parts (`finder_graph.data`, `finder_graph_parts.data`),
/// which are stored compressed.
pub fn stored_json(bytes: &[u8]) -> Vec<u8> {
    crate::graph::unpack(bytes)
        .expect("a readable stored graph")
        .into_owned()
}
