//! Spaces: independent indexes served side by side, each with its own reader, settings and
//! write lock. Nothing crosses spaces.
//!
//! A space reopens its index when the last commit changed (a `finder index` run beside the
//! server, or a document write through the API), so each query reads the newest snapshot
//! without a restart. A space over PostgreSQL reads a fresh snapshot on every query anyway;
//! it reopens (for the graph and the run records) when a shard's generation or the stored
//! graph moved, looked at no more than once every [`PG_RECHECK`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

use finder_core::{Settings, StorageBackend};
use finder_index::load_settings;
use finder_store::{Store, StoreError};

/// Opens a store for queries. The default is `Store::open`; the binary passes one that also
/// attaches the embedding model, so this crate stays free of embedding backends.
pub type Opener = Arc<dyn Fn(&Path, Settings) -> finder_store::Result<Store> + Send + Sync>;

/// Loads the embedding model an API write into PostgreSQL embeds its fragments with, before
/// the space has a store open to lend its own (`None`: no vectors, or the model is missing).
pub type Models = Arc<dyn Fn(&Settings) -> Option<Arc<dyn finder_core::Embed>> + Send + Sync>;

/// How long a space over PostgreSQL trusts its opened store before it reads the shards'
/// state again (writes through this server make it look at once).
pub const PG_RECHECK: Duration = Duration::from_secs(1);

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
    backend: StorageBackend,
    opened: RwLock<Option<Opened>>,
    /// Bumped after each API write's index run: a reader opened before it is not reused,
    /// even when the commit left the folder's stamp as it was (timestamps are coarse).
    epoch: AtomicU64,
    writes: Mutex<()>,
    /// What a watch's runs into PostgreSQL keep for the next one (taken under `writes`).
    follower: Mutex<finder_pg::PgFollower>,
    queue: WriteQueue,
    opener: Option<Opener>,
    after_write: Option<AfterWrite>,
    models: Option<Models>,
}

struct Opened {
    finder: Arc<Store>,
    stamp: Option<Stamp>,
    epoch: u64,
    /// When the stamp was last compared with the store's (PostgreSQL spaces).
    checked: Instant,
}

/// Identifies one state of a store cheaply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    /// An index folder: tantivy rewrites `lexical/meta.json` on every commit, and the other
    /// layers publish by renaming files inside their own sub-folder, which changes that
    /// folder's modification time.
    Folder {
        meta_modified: SystemTime,
        meta_len: u64,
        folders: Vec<(std::ffi::OsString, Option<SystemTime>)>,
    },
    /// PostgreSQL: each shard's generation and the stored graph's key (a run stores its graph
    /// after its commits).
    Shards(Vec<u64>, Option<String>),
}

impl Space {
    /// A space over the index folder `dir`; `config` overrides `<dir>/finder.toml`.
    pub fn new(name: &str, dir: &Path, config: Option<&Path>) -> Result<Space> {
        validate_name(name)?;
        // Settings that do not load yet are reported by the first query; the folder's store is
        // the embedded one until they say otherwise.
        let backend =
            load_settings(dir, config).map_or(StorageBackend::Embedded, |s| s.storage.backend);
        Ok(Space {
            name: name.to_string(),
            backend,
            dir: dir.to_path_buf(),
            config: config.map(Path::to_path_buf),
            opened: RwLock::new(None),
            epoch: AtomicU64::new(0),
            writes: Mutex::new(()),
            follower: Mutex::default(),
            queue: WriteQueue::default(),
            opener: None,
            after_write: None,
            models: None,
        })
    }

    /// Opens the store with `opener` instead of `Store::open`.
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

    /// Loads models with `models` for API writes into PostgreSQL.
    pub fn with_models(mut self, models: Models) -> Space {
        self.models = Some(models);
        self
    }

    pub(crate) fn models(&self) -> Option<Models> {
        self.models.clone()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which store the space's settings name.
    pub fn backend(&self) -> StorageBackend {
        self.backend
    }

    /// The settings a new index of this space is built with.
    pub fn base_settings(&self) -> Result<Settings> {
        load_settings(&self.dir, self.config.as_deref())
            .map_err(|e| ServerError::from_index(&self.name, e))
    }

    /// The current reader, reopened when the store changed since the last call.
    pub fn finder(&self) -> Result<Arc<Store>> {
        if self.backend == StorageBackend::Postgres {
            return self.pg_finder();
        }
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
        let finder = self.open()?;
        *slot = Some(Opened {
            finder: Arc::clone(&finder),
            stamp,
            epoch,
            checked: Instant::now(),
        });
        Ok(finder)
    }

    /// [`Space::finder`] over PostgreSQL: the opened store while its shards' generations and
    /// stored graph are the ones it was opened at (looked at every [`PG_RECHECK`] and after
    /// each API write).
    fn pg_finder(&self) -> Result<Arc<Store>> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let fresh = |o: &Opened| o.epoch == epoch && o.checked.elapsed() < PG_RECHECK;
        if let Some(opened) = self.opened.read().expect("space lock").as_ref() {
            if fresh(opened) {
                return Ok(Arc::clone(&opened.finder));
            }
        }
        let mut slot = self.opened.write().expect("space lock");
        if let Some(opened) = slot.as_mut() {
            if fresh(opened) {
                return Ok(Arc::clone(&opened.finder));
            }
            // Shards that cannot be read now leave the store as it is: its queries say why,
            // and the next look may find them back.
            let unchanged =
                shard_stamp(&opened.finder, true).map_or(true, |now| now == opened.stamp);
            if unchanged {
                opened.epoch = epoch;
                opened.checked = Instant::now();
                return Ok(Arc::clone(&opened.finder));
            }
        }
        let finder = self.open()?;
        let stamp = shard_stamp(&finder, false).ok().flatten();
        *slot = Some(Opened {
            finder: Arc::clone(&finder),
            stamp,
            epoch,
            checked: Instant::now(),
        });
        Ok(finder)
    }

    fn open(&self) -> Result<Arc<Store>> {
        let settings = self.base_settings()?;
        let opened = match &self.opener {
            Some(open) => open(&self.dir, settings),
            None => Store::open(&self.dir, settings),
        };
        Ok(Arc::new(opened.map_err(store_err(self))?))
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
        match self.backend {
            StorageBackend::Embedded => self.stamp().is_some(),
            StorageBackend::Postgres => self.finder().is_ok(),
        }
    }

    /// Serialises writes to this space; readers never wait on it.
    pub fn write_lock(&self) -> MutexGuard<'_, ()> {
        // A panic in an earlier write leaves nothing half-done on disk (commits are atomic),
        // so a poisoned lock is safe to take.
        self.writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a watch's runs into the space's shards keep for the next one; taken with the
    /// write lock held. API writes keep nothing: a served space that is not watched holds no
    /// copy of every source's record.
    pub(crate) fn pg_follower(&self) -> MutexGuard<'_, finder_pg::PgFollower> {
        // A run that panicked left what it took empty: the next one reads the shards.
        self.follower.lock().unwrap_or_else(|p| p.into_inner())
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
        Some(Stamp::Folder {
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

/// A PostgreSQL store's stamp: the state it opened, or with `now` the shards' state now.
fn shard_stamp(store: &Store, now: bool) -> finder_store::Result<Option<Stamp>> {
    let Store::Postgres(pg) = store else {
        return Ok(None);
    };
    let (generations, graph) = if now {
        pg.read_state()?
    } else {
        pg.opened_state()
    };
    Ok(Some(Stamp::Shards(generations, graph)))
}

/// Maps a store's error to the answer for `space`.
pub(crate) fn store_err<E: Into<StoreError>>(space: &Space) -> impl Fn(E) -> ServerError + '_ {
    move |e| ServerError::from_store(&space.name, e.into())
}
