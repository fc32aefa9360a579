//! Spaces: independent indexes served side by side, each with its own reader, settings and
//! write lock. Nothing crosses spaces.
//!
//! A space reopens its index when the last commit changed (a `finder index` run beside the
//! server, or a document write through the API), so each query reads the newest snapshot
//! without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use finder_core::Settings;
use finder_index::{load_settings, Finder, IndexError};

/// Opens an index for queries. The default is `Finder::open`; the binary passes one that
/// also attaches the embedding model, so this crate stays free of embedding backends.
pub type Opener = Arc<dyn Fn(&Path, Settings) -> finder_index::Result<Finder> + Send + Sync>;

/// Runs after a document write has been committed and acknowledged, on a background thread
/// that holds the space's write lock (the binary uses it to build the new vectors).
pub type AfterWrite = Arc<dyn Fn(&Path, &Settings) + Send + Sync>;

use crate::access::Grants;
use crate::error::{Result, ServerError};
use crate::writes::WriteQueue;

/// The name of the space that routes without `/spaces/{space}` use.
pub const DEFAULT_SPACE: &str = "default";

/// One served index.
pub struct Space {
    name: String,
    dir: PathBuf,
    config: Option<PathBuf>,
    opened: RwLock<Option<Opened>>,
    /// Bumped after each API write's index run: a reader opened before it is not reused,
    /// even when the commit left the folder's stamp as it was (timestamps are coarse).
    epoch: AtomicU64,
    writes: Mutex<()>,
    queue: WriteQueue,
    opener: Option<Opener>,
    after_write: Option<AfterWrite>,
}

struct Opened {
    finder: Arc<Finder>,
    stamp: Option<Stamp>,
    epoch: u64,
}

/// Identifies one state of the index folder cheaply: tantivy rewrites `lexical/meta.json` on
/// every commit, and the other layers publish by renaming files inside their own sub-folder,
/// which changes that folder's modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    meta_modified: SystemTime,
    meta_len: u64,
    folders: Vec<(std::ffi::OsString, Option<SystemTime>)>,
}

impl Space {
    /// A space over the index folder `dir`; `config` overrides `<dir>/finder.toml`.
    pub fn new(name: &str, dir: &Path, config: Option<&Path>) -> Result<Space> {
        validate_name(name)?;
        Ok(Space {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            config: config.map(Path::to_path_buf),
            opened: RwLock::new(None),
            epoch: AtomicU64::new(0),
            writes: Mutex::new(()),
            queue: WriteQueue::default(),
            opener: None,
            after_write: None,
        })
    }

    /// Opens the index with `opener` instead of `Finder::open`.
    pub fn with_opener(mut self, opener: Opener) -> Space {
        self.opener = Some(opener);
        self
    }

    /// Runs `hook` after each acknowledged document write.
    pub fn with_after_write(mut self, hook: AfterWrite) -> Space {
        self.after_write = Some(hook);
        self
    }

    pub(crate) fn after_write(&self) -> Option<AfterWrite> {
        self.after_write.clone()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The settings a new index of this space is built with.
    pub fn base_settings(&self) -> Result<Settings> {
        load_settings(&self.dir, self.config.as_deref())
            .map_err(|e| ServerError::from_index(&self.name, e))
    }

    /// The current reader, reopened when the index changed on disk since the last call.
    pub fn finder(&self) -> Result<Arc<Finder>> {
        // The epoch is read before the folder is looked at: a reader opened while a write
        // commits keeps the older epoch and is not reused.
        let epoch = self.epoch.load(Ordering::Acquire);
        let stamp = self.stamp();
        let current = |o: &Opened| o.stamp == stamp && o.epoch == epoch;
        if let Some(opened) = self.opened.read().expect("space lock").as_ref() {
            if current(opened) {
                return Ok(Arc::clone(&opened.finder));
            }
        }
        let mut slot = self.opened.write().expect("space lock");
        if let Some(opened) = slot.as_ref() {
            if current(opened) {
                return Ok(Arc::clone(&opened.finder));
            }
        }
        if stamp.is_none() {
            *slot = None;
            return Err(ServerError::NotBuilt {
                space: self.name.clone(),
            });
        }
        let settings = self.base_settings()?;
        let opened = match &self.opener {
            Some(open) => open(&self.dir, settings),
            None => Finder::open(&self.dir, settings),
        };
        let finder = Arc::new(opened.map_err(|e| ServerError::from_index(&self.name, e))?);
        *slot = Some(Opened {
            finder: Arc::clone(&finder),
            stamp,
            epoch,
        });
        Ok(finder)
    }

    /// Makes the next `finder` call open the index afresh (after a write committed).
    pub(crate) fn forget_reader(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The queue of API writes waiting for this space's next commit.
    pub(crate) fn write_queue(&self) -> &WriteQueue {
        &self.queue
    }

    /// Whether the space has an index yet.
    pub fn is_built(&self) -> bool {
        self.stamp().is_some()
    }

    /// Serialises writes to this space; readers never wait on it.
    pub fn write_lock(&self) -> MutexGuard<'_, ()> {
        // A panic in an earlier write leaves nothing half-done on disk (commits are atomic),
        // so a poisoned lock is safe to take.
        self.writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stamp(&self) -> Option<Stamp> {
        let meta = std::fs::metadata(self.dir.join("lexical").join("meta.json")).ok()?;
        let mut folders: Vec<_> = std::fs::read_dir(&self.dir)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                m.is_dir().then(|| (e.file_name(), m.modified().ok()))
            })
            .collect();
        folders.sort();
        Some(Stamp {
            meta_modified: meta.modified().ok()?,
            meta_len: meta.len(),
            folders,
        })
    }
}

/// Every space the server answers for, by name.
pub struct Spaces {
    spaces: BTreeMap<String, Arc<Space>>,
}

impl Spaces {
    pub fn new(spaces: Vec<Space>) -> Result<Spaces> {
        let mut map = BTreeMap::new();
        for space in spaces {
            let name = space.name.clone();
            if map.insert(name.clone(), Arc::new(space)).is_some() {
                return Err(ServerError::invalid(format!(
                    "space `{name}` is given twice"
                )));
            }
        }
        if map.is_empty() {
            return Err(ServerError::invalid("no space to serve"));
        }
        Ok(Spaces { spaces: map })
    }

    /// The space named `name`, or a 404 naming the served ones.
    pub fn get(&self, name: &str) -> Result<Arc<Space>> {
        self.get_granted(name, &Grants::All)
    }

    /// The space named `name` when `grants` allows it. A space that exists but is not
    /// granted gets the same 404 as one that does not exist, naming only granted spaces, so
    /// the answer says nothing about spaces the caller may not use.
    pub fn get_granted(&self, name: &str, grants: &Grants) -> Result<Arc<Space>> {
        match self.spaces.get(name) {
            Some(space) if grants.allows(name) => Ok(Arc::clone(space)),
            _ => {
                let visible: Vec<&str> = self.granted(grants).map(|s| s.name()).collect();
                Err(ServerError::UnknownSpace {
                    space: name.to_string(),
                    served: if visible.is_empty() {
                        "none".to_string()
                    } else {
                        visible.join(", ")
                    },
                })
            }
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.spaces.keys().cloned().collect()
    }

    /// The spaces `grants` allows, by name.
    pub fn granted<'a>(&'a self, grants: &'a Grants) -> impl Iterator<Item = &'a Arc<Space>> {
        self.spaces
            .iter()
            .filter(move |(name, _)| grants.allows(name))
            .map(|(_, space)| space)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Space>> {
        self.spaces.values()
    }
}

/// Space names travel in URLs and metric labels: keep them short and plain.
fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ServerError::invalid(format!(
            "space name `{name}` must be 1–64 letters, digits, `-` or `_`"
        )))
    }
}

/// Parses `NAME=DIR` (or a bare `DIR`, the space `default`).
pub fn parse_space_arg(arg: &str) -> (String, PathBuf) {
    if let Some((name, dir)) = arg.split_once('=') {
        if validate_name(name).is_ok() && !dir.is_empty() {
            return (name.to_string(), PathBuf::from(dir));
        }
    }
    (DEFAULT_SPACE.to_string(), PathBuf::from(arg))
}

/// Keeps `IndexError` in the public signature of helpers that wrap index calls.
pub(crate) fn index_err(space: &Space) -> impl Fn(IndexError) -> ServerError + '_ {
    move |e| ServerError::from_index(&space.name, e)
}
