//! The lexical store: opening (or creating) the tantivy index, its commit payload, and walks
//! over the documents of its last commit (the derived layers and the page files read it this way).

use std::cell::Cell;
use std::collections::HashMap;
use std::path::Path;

use finder_core::Settings;
use tantivy::collector::DocSetCollector;
use tantivy::query::TermQuery;
use tantivy::schema::document::{DeserializeError, DocumentDeserialize, DocumentDeserializer};
use tantivy::schema::{IndexRecordOption, OwnedValue, Value};
use tantivy::{doc, Index, IndexSettings, ReloadPolicy, TantivyDocument, Term};

use crate::analyzer::ANALYSIS;
use crate::error::{IndexError, Result};
use crate::files::LEXICAL_DIR;
use crate::large_writes::WriteDirectory;
use crate::pread::PreadDirectory;
use crate::record::{CommitInfo, FragmentRecord, SourceRecord, FORMAT};
use crate::schema::{build_schema, register_analyzers, resolve, Fields};
use crate::store_error;

thread_local! {
    /// The fields of the index being read as [`StoredHead`]s: tantivy makes a document type
    /// without context, so [`map_heads`] and [`read_head`] name them here first (the
    /// documents are decoded on the calling thread).
    static HEAD_FIELDS: Cell<Option<Fields>> = const { Cell::new(None) };
}

/// Bytes per block of the document store (tantivy's default is 16 KiB): a block closes at the
/// first record that takes it past this size. A query reads its page's records one block
/// each, copying the whole block: a smaller block reads less per record and leaves fewer of
/// the store's pages resident. A record with a 384-dimensional given vector (about 3 KiB) is
/// a block of its own; at 4 KiB blocks held two records, and a 10k lexical query's page took
/// 16% longer (docs/perf/document-store.md). Short records (notes without vectors) still
/// share blocks. The blocks are not compressed (see [`open_or_create`]).
const DOCSTORE_BLOCK_BYTES: usize = 1024;

/// Opens the tantivy index under `dir`, or creates an empty one.
pub(crate) fn open_or_create(dir: &Path, settings: &Settings) -> Result<(Index, Fields)> {
    let path = dir.join(LEXICAL_DIR);
    std::fs::create_dir_all(&path).map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    let exists = path.join("meta.json").exists();
    // Finder's postings, written by a plugin tantivy must be given at every open that writes
    // (a run of the current analysis: an index of an older one is rebuilt).
    let plugin = crate::postings::PostingsPlugin::new(&settings.index.language, ANALYSIS);
    let index = if exists {
        let directory = WriteDirectory::open(&path).map_err(|e| store_error(dir, e))?;
        let mut index = Index::open(directory).map_err(|e| store_error(dir, e))?;
        // The index was made with the plugin (an index of an earlier format, made without
        // it, is rebuilt from nothing: see `writer`).
        index.register_plugin(plugin);
        index
    } else {
        let (schema, _) = build_schema();
        let settings = IndexSettings {
            docstore_blocksize: DOCSTORE_BLOCK_BYTES,
            // LZ4 was ~7% of a lexical query at 10k (a page's ten blocks decompressed) for
            // ~9% of the index's size: the given vectors in the blocks do not compress.
            docstore_compression: tantivy::store::Compressor::None,
            // Uncompressed blocks need no thread of their own: handing each 1 KiB block (a
            // million and more at 1M fragments) to one, a copy and a wake-up apiece, took
            // 15-20% of the read-and-write phase's CPU (docs/perf/store-thread.md).
            docstore_compress_dedicated_thread: false,
            ..IndexSettings::default()
        };
        // No index is there, so this creates one (tantivy's `create` over a directory of
        // one's own is crate-private).
        Index::builder()
            .schema(schema)
            .settings(settings)
            .register_plugin(plugin)
            .open_or_create(WriteDirectory::open(&path).map_err(|e| store_error(dir, e))?)
            .map_err(|e| store_error(dir, e))?
    };
    let fields = resolve(&index.schema()).ok_or_else(|| IndexError::Corrupt {
        path: path.clone(),
        reason: "schema lacks Finder's fields".into(),
    })?;
    // A run writes with the current analysis: into an index of an older one it rebuilds.
    register_analyzers(&index, &settings.index.language, ANALYSIS);
    Ok((index, fields))
}

/// Calls `f` with every live stored document of the last commit, decoded as `D`, in stored
/// order (the derived layers — vectors, graph — are built from this walk). The store is read
/// with positioned reads, not through memory maps ([`crate::pread`]), so a walk over a large
/// index does not leave the whole store resident in the process.
pub(crate) fn for_each_stored<D: DocumentDeserialize>(
    dir: &Path,
    f: &mut dyn FnMut(D) -> Result<()>,
) -> Result<()> {
    let Some(searcher) = searcher_for_walks(dir)? else {
        return Ok(());
    };
    for segment in searcher.segment_readers() {
        for_each_stored_in(dir, segment, f)?;
    }
    Ok(())
}

/// [`for_each_stored`] over one segment of the walk's searcher.
fn for_each_stored_in<D: DocumentDeserialize>(
    dir: &Path,
    segment: &tantivy::SegmentReader,
    f: &mut dyn FnMut(D) -> Result<()>,
) -> Result<()> {
    // Read in stored order, each block decompressed once: no cache to keep.
    let store = segment
        .get_store_reader(0)
        .map_err(|e| store_error(dir, e.into()))?;
    for doc in store.iter::<D>(segment.alive_bitset()) {
        f(doc.map_err(|e| store_error(dir, e))?)?;
    }
    Ok(())
}

/// The last commit in `dir` opened for a walk over its stores, every file read with
/// positioned reads ([`crate::pread`]); `None` when there is no commit yet.
pub(crate) fn searcher_for_walks(dir: &Path) -> Result<Option<tantivy::Searcher>> {
    let err = |e| store_error(dir, e);
    let path = dir.join(LEXICAL_DIR);
    if !path.join("meta.json").exists() {
        return Ok(None);
    }
    let index = Index::open(PreadDirectory::open(&path).map_err(err)?).map_err(err)?;
    let reader: tantivy::IndexReader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(err)?;
    Ok(Some(reader.searcher()))
}

/// A fragment document's stored fields before its vector: what a query reads of a page's
/// fragments, and what a walk over every fragment needs but the vectors' build (the given
/// vector, 1.5 KB at 384 dimensions that tantivy decodes a byte at a time, is stored after
/// these and is not read; missing fields are left empty).
#[derive(Debug, Default)]
pub(crate) struct StoredHead {
    pub source_id: String,
    pub fragment_key: u64,
    pub ordinal: u64,
    pub body: String,
    pub meta: String,
}

impl DocumentDeserialize for StoredHead {
    fn deserialize<'de, D: DocumentDeserializer<'de>>(
        mut doc: D,
    ) -> std::result::Result<Self, DeserializeError> {
        let fields = HEAD_FIELDS
            .with(Cell::get)
            .ok_or_else(|| DeserializeError::custom("no fields named to read"))?;
        let mut head = StoredHead::default();
        let mut seen = [false; 5];
        while !seen.iter().all(|&s| s) {
            let Some((field, value)) = doc.next_field::<OwnedValue>()? else {
                break;
            };
            match value {
                OwnedValue::Str(text) if field == fields.source_id => {
                    (head.source_id, seen[0]) = (text, true);
                }
                OwnedValue::Str(text) if field == fields.body => {
                    (head.body, seen[1]) = (text, true)
                }
                OwnedValue::Str(text) if field == fields.meta => {
                    (head.meta, seen[2]) = (text, true)
                }
                OwnedValue::U64(n) if field == fields.fragment_key => {
                    (head.fragment_key, seen[3]) = (n, true);
                }
                OwnedValue::U64(n) if field == fields.ordinal => {
                    (head.ordinal, seen[4]) = (n, true)
                }
                _ => {}
            }
        }
        Ok(head)
    }
}

/// Names the fields of the index whose documents this thread reads as [`StoredHead`]s next.
pub(crate) fn name_head_fields(fields: Fields) {
    HEAD_FIELDS.with(|named| named.set(Some(fields)));
}

/// The [`StoredHead`] of the document at `address`.
pub(crate) fn read_head(
    searcher: &tantivy::Searcher,
    fields: Fields,
    address: tantivy::DocAddress,
) -> tantivy::Result<StoredHead> {
    name_head_fields(fields);
    searcher.doc(address)
}

/// `map` over the [`StoredHead`] of every live document of the last commit, on every core:
/// each segment's store is walked on one thread (a segment per core at a time, largest
/// first); what `map` returns comes back per segment in the index's segment order, each in
/// stored order.
pub(crate) fn map_heads<T: Send>(
    dir: &Path,
    fields: Fields,
    map: impl Fn(StoredHead) -> T + Sync,
) -> Result<Vec<Vec<T>>> {
    let Some(searcher) = searcher_for_walks(dir)? else {
        return Ok(Vec::new());
    };
    let segments = searcher.segment_readers();
    let mut order: Vec<usize> = (0..segments.len()).collect();
    order.sort_by_key(|&at| std::cmp::Reverse(segments[at].max_doc()));
    let walked = crate::each_on_cores(&order, |&at| {
        // The fields are named per thread.
        name_head_fields(fields);
        let segment = &segments[at];
        let mut mapped = Vec::with_capacity(segment.num_docs() as usize);
        for_each_stored_in(dir, segment, &mut |head: StoredHead| {
            mapped.push(map(head));
            Ok(())
        })?;
        Ok((at, mapped))
    });
    let mut walked = walked.into_iter().collect::<Result<Vec<_>>>()?;
    walked.sort_unstable_by_key(|(at, _)| *at);
    Ok(walked.into_iter().map(|(_, mapped)| mapped).collect())
}

/// What tells the last commit of the index in `dir` from any other: its operation stamp,
/// its segments with their deletes, and its payload. A value kept in memory for one commit
/// serves while the stamp is the same.
pub(crate) fn commit_stamp(index: &Index, dir: &Path) -> Result<String> {
    use std::fmt::Write;
    let metas = index.load_metas().map_err(|e| store_error(dir, e))?;
    let mut stamp = metas.opstamp.to_string();
    for s in &metas.segments {
        let _ = write!(stamp, " {}:{:?}", s.id().uuid_string(), s.delete_opstamp());
    }
    stamp.push(' ');
    stamp.push_str(metas.payload.as_deref().unwrap_or_default());
    Ok(stamp)
}

/// The payload of the last commit, `None` for a fresh index.
///
/// An index a later Finder wrote (a record format or a word analysis above this build's) is
/// refused here, before anything reads it as this build would or writes into it.
pub(crate) fn commit_info(index: &Index, dir: &Path) -> Result<Option<CommitInfo>> {
    let metas = index.load_metas().map_err(|e| store_error(dir, e))?;
    let Some(payload) = metas.payload else {
        return Ok(None);
    };
    let corrupt = |reason| IndexError::Corrupt {
        path: dir.to_path_buf(),
        reason,
    };
    let info: CommitInfo =
        serde_json::from_str(&payload).map_err(|e| corrupt(format!("commit payload: {e}")))?;
    let newer = [
        ("record format", info.format, FORMAT),
        ("word analysis", info.analysis, ANALYSIS),
    ]
    .into_iter()
    .find(|&(_, found, known)| found > known);
    if let Some((what, found, known)) = newer {
        return Err(corrupt(format!(
            "written with {what} {found} by a later Finder; this one reads {what} {known} and \
             older: use that Finder, or index the files again into a new folder"
        )));
    }
    Ok(Some(info))
}

/// The payload of the last commit of the index under `dir`, read without opening it for
/// writing; `None` when there is no index or no commit yet.
pub(crate) fn peek_commit_info(dir: &Path) -> Result<Option<CommitInfo>> {
    let path = dir.join(LEXICAL_DIR);
    if !path.join("meta.json").exists() {
        return Ok(None);
    }
    let index = Index::open_in_dir(&path).map_err(|e| store_error(dir, e))?;
    commit_info(&index, dir)
}

/// Every indexed source record, by id.
pub(crate) fn load_catalog(
    index: &Index,
    fields: Fields,
    dir: &Path,
) -> Result<HashMap<String, SourceRecord>> {
    let err = |e| store_error(dir, e);
    let reader = index.reader().map_err(err)?;
    let searcher = reader.searcher();
    let heads = TermQuery::new(
        Term::from_field_u64(fields.ordinal, 0),
        IndexRecordOption::Basic,
    );
    let docs = searcher.search(&heads, &DocSetCollector).map_err(err)?;
    let mut catalog = HashMap::with_capacity(docs.len());
    for address in docs {
        let doc: TantivyDocument = searcher.doc(address).map_err(err)?;
        let meta = doc
            .get_first(fields.meta)
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let record: FragmentRecord =
            serde_json::from_str(meta).map_err(|e| IndexError::Corrupt {
                path: dir.to_path_buf(),
                reason: format!("fragment record: {e}"),
            })?;
        if let Some(source) = record.source {
            catalog.insert(source.id.clone(), source);
        }
    }
    Ok(catalog)
}
