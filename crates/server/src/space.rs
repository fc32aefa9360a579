//! Spaces: independent indexes served side by side, each with its own reader, settings and
//! write lock. Nothing crosses spaces.
//!
//! A space reopens its index when the last commit changed (a `finder index` run beside the
//! server, or a document write through the API), so each query reads the newest snapshot
//! without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

use crate::error::{Result, ServerError};

/// The name of the space that routes without `/spaces/{space}` use.
pub const DEFAULT_SPACE: &str = "default";

/// One served index.
pub struct Space {
    name: String,
    dir: PathBuf,
    config: Option<PathBuf>,
    opened: RwLock<Option<Opened>>,
    writes: Mutex<()>,
    opener: Option<Opener>,
    after_write: Option<AfterWrite>,
}

struct Opened {
    finder: Arc<Finder>,
    stamp: Option<Stamp>,
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
            writes: Mutex::new(()),
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
        let stamp = self.stamp();
        if let Some(opened) = self.opened.read().expect("space lock").as_ref() {
            if opened.stamp == stamp {
                return Ok(Arc::clone(&opened.finder));
            }
        }
        let mut slot = self.opened.write().expect("space lock");
        if let Some(opened) = slot.as_ref() {
            if opened.stamp == stamp {
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
        });
        Ok(finder)
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
        self.spaces
            .get(name)
            .cloned()
            .ok_or_else(|| ServerError::UnknownSpace {
                space: name.to_string(),
                served: self.names().join(", "),
            })
    }

    pub fn names(&self) -> Vec<String> {
        self.spaces.keys().cloned().collect()
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
