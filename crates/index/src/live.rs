//! Live progress of a long run, readable by other processes: `finder status`, the server's
//! status (the web page), the MCP status tool.
//!
//! A run holds an exclusive lock on `NAME.lock` for as long as it lasts and keeps `NAME.json`
//! beside it, replaced atomically at most once a second (and whenever its stage changes), and
//! removed when the run ends. A reader that finds the file but not the lock held knows the
//! run was interrupted, and where.

use std::fs::{File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How often, at most, the progress file is rewritten within one stage.
const WRITE_EVERY: Duration = Duration::from_secs(1);

/// Where a run is, as its progress file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveProgress {
    /// What the run is doing now: `reading`, `committing`, `pages` or `graph` for an indexing
    /// run; `embedding` or `graph` for a vector build.
    pub stage: String,
    /// Items of this stage done so far (sources read, fragments embedded, vectors placed).
    pub done: u64,
    /// Items this stage has in all, when known in advance.
    pub total: Option<u64>,
    /// Items per second since the stage began.
    pub rate: Option<f64>,
    /// Seconds the stage still needs at that rate, when its total is known.
    pub seconds_left: Option<f64>,
    /// When the run began (Unix seconds).
    pub started_at: u64,
    /// When the file was last written (Unix seconds).
    pub updated_at: u64,
    /// The process doing the run.
    pub pid: u32,
    /// Whether the run still holds its lock: `false` means it stopped before its end (killed
    /// or crashed) and the next run resumes from what it made durable. Set by the reader.
    #[serde(default)]
    pub running: bool,
}

impl LiveProgress {
    /// The progress in one line: `embedding 1200/5890, 8.1/s, 9m 40s left`, or where the run
    /// stopped when its process is gone.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut line = match self.total {
            Some(total) => format!("{} {}/{}", self.stage, self.done, total),
            None => format!("{} {}", self.stage, self.done),
        };
        if !self.running {
            let _ = write!(
                line,
                " when it stopped (process {} is gone); the next `finder index` resumes it",
                self.pid
            );
            return line;
        }
        if let Some(rate) = self.rate {
            let _ = write!(line, ", {rate:.1}/s");
        }
        if let Some(left) = self.seconds_left {
            let left = left.round() as u64;
            let _ = match left {
                0..60 => write!(line, ", {left}s left"),
                60..3600 => write!(line, ", {}m {}s left", left / 60, left % 60),
                _ => write!(line, ", {}h {}m left", left / 3600, left % 3600 / 60),
            };
        }
        line
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A run in progress: holds the lock and writes the progress file.
pub(crate) struct LiveRun {
    json: PathBuf,
    _lock: File,
    started_at: u64,
    stage: &'static str,
    stage_started: Instant,
    last_write: Option<Instant>,
}

/// Whether a run of this name is under way elsewhere.
pub(crate) enum Begin {
    Started(LiveRun),
    Busy,
}

impl LiveRun {
    /// Takes the run's lock in `dir`, waiting while another process holds it.
    pub fn wait(dir: &Path, name: &str) -> io::Result<LiveRun> {
        let lock = open_lock(dir, name)?;
        lock.lock()?;
        Ok(LiveRun::new(dir, name, lock))
    }

    /// Takes the run's lock in `dir`, or says another process holds it.
    pub fn try_begin(dir: &Path, name: &str) -> io::Result<Begin> {
        let lock = open_lock(dir, name)?;
        match lock.try_lock() {
            Ok(()) => Ok(Begin::Started(LiveRun::new(dir, name, lock))),
            Err(TryLockError::WouldBlock) => Ok(Begin::Busy),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    fn new(dir: &Path, name: &str, lock: File) -> LiveRun {
        LiveRun {
            json: dir.join(format!("{name}.json")),
            _lock: lock,
            started_at: unix_now(),
            stage: "",
            stage_started: Instant::now(),
            last_write: None,
        }
    }

    /// Records that `done` of `total` items of `stage` are done; writes the file when the
    /// stage changed, the stage is complete or a second has passed since the last write.
    /// Progress is only shown: a file that cannot be written is left as it was.
    pub fn report(&mut self, stage: &'static str, done: u64, total: Option<u64>) {
        self.report_work(stage, done, total, None);
    }

    /// [`LiveRun::report`] for items of unequal cost: the time left is estimated from `work`,
    /// (work done, work in all) in any unit that tracks the cost, such as characters.
    pub fn report_work(
        &mut self,
        stage: &'static str,
        done: u64,
        total: Option<u64>,
        work: Option<(u64, u64)>,
    ) {
        if stage != self.stage {
            self.stage = stage;
            self.stage_started = Instant::now();
            self.last_write = None;
        }
        let due = self.last_write.is_none_or(|t| t.elapsed() >= WRITE_EVERY);
        if !due && Some(done) != total {
            return;
        }
        self.last_write = Some(Instant::now());
        let elapsed = self.stage_started.elapsed().as_secs_f64();
        // A rate over less than a second of work says little.
        let rate = (elapsed >= 1.0 && done > 0).then(|| done as f64 / elapsed);
        let progress = LiveProgress {
            stage: stage.to_string(),
            done,
            total,
            rate,
            seconds_left: match work {
                Some((work_done, work_all)) => (rate.is_some() && work_done > 0).then(|| {
                    elapsed * work_all.saturating_sub(work_done) as f64 / work_done as f64
                }),
                None => rate
                    .zip(total)
                    .map(|(r, t)| t.saturating_sub(done) as f64 / r),
            },
            started_at: self.started_at,
            updated_at: unix_now(),
            pid: std::process::id(),
            running: true,
        };
        let _ = write_atomic(&self.json, &progress);
    }
}

impl Drop for LiveRun {
    /// The run is over (done or failed): its progress file goes before its lock does.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.json);
    }
}

fn open_lock(dir: &Path, name: &str) -> io::Result<File> {
    std::fs::create_dir_all(dir)?;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{name}.lock")))
}

fn write_atomic(path: &Path, progress: &LiveProgress) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let json = serde_json::to_vec(progress).map_err(io::Error::other)?;
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path)
}

/// The progress of the run named `name` in `dir`: `None` when no run left a file there.
pub(crate) fn read(dir: &Path, name: &str) -> Option<LiveProgress> {
    let bytes = std::fs::read(dir.join(format!("{name}.json"))).ok()?;
    let mut progress: LiveProgress = serde_json::from_slice(&bytes).ok()?;
    progress.running = match File::open(dir.join(format!("{name}.lock"))) {
        Ok(lock) => matches!(lock.try_lock(), Err(TryLockError::WouldBlock)),
        Err(_) => false,
    };
    Some(progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_shows_while_it_holds_its_lock_and_goes_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path(), "build").is_none());
        let mut run = LiveRun::wait(dir.path(), "build").unwrap();
        run.report("embedding", 0, Some(10));
        let p = read(dir.path(), "build").unwrap();
        assert_eq!(
            (p.stage.as_str(), p.done, p.total),
            ("embedding", 0, Some(10))
        );
        assert!(p.running);
        assert_eq!(p.pid, std::process::id());
        assert_eq!(p.describe(), "embedding 0/10");
        // Within a second, only a finished stage or a new one is written.
        run.report("embedding", 4, Some(10));
        assert_eq!(read(dir.path(), "build").unwrap().done, 0);
        run.report("embedding", 10, Some(10));
        assert_eq!(read(dir.path(), "build").unwrap().done, 10);
        run.report("graph", 0, Some(10));
        assert_eq!(read(dir.path(), "build").unwrap().stage, "graph");
        // A second run of the same name is refused while the first holds the lock.
        assert!(matches!(
            LiveRun::try_begin(dir.path(), "build").unwrap(),
            Begin::Busy
        ));
        drop(run);
        assert!(read(dir.path(), "build").is_none());
        assert!(matches!(
            LiveRun::try_begin(dir.path(), "build").unwrap(),
            Begin::Started(_)
        ));
    }

    #[test]
    fn a_run_that_stopped_leaves_its_place_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let mut run = LiveRun::wait(dir.path(), "build").unwrap();
        run.report("embedding", 3, Some(10));
        // As after a kill: the file stays, the lock goes with the process.
        std::mem::forget(std::mem::replace(&mut run.json, dir.path().join("none")));
        drop(run);
        let p = read(dir.path(), "build").unwrap();
        assert_eq!(p.done, 3);
        assert!(!p.running);
        assert!(p.describe().starts_with("embedding 3/10 when it stopped"));
    }
}
