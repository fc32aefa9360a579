//! Reading a run's inputs and writing their sources: one document per fragment, through the
//! run's plan (what is new, changed or unchanged).

use std::collections::HashMap;

use finder_core::Settings;
use tantivy::{doc, IndexWriter, Term};

use super::plan::{Admit, RunPlan};
use super::Progress;
use crate::document::{Problem, SourceDoc};
use crate::error::{IndexError, Result};
use crate::keys::{fragment_key, source_key};
use crate::record::{FragmentRecord, SourceRecord};
use crate::schema::Fields;
use crate::{ingest, store_error};

/// Where a run writes, and what the store held before it.
pub(super) struct Target<'a> {
    pub dir: &'a std::path::Path,
    pub writer: &'a IndexWriter,
    pub fields: Fields,
    pub settings: &'a Settings,
    pub catalog: &'a HashMap<String, SourceRecord>,
    /// For a run limited to some paths: per input, the paths under it to read (none: the
    /// input is not read). `None`: every input is read whole.
    pub focus: Option<&'a [Vec<std::path::PathBuf>]>,
    /// Keep the record of every source written (for the catalog after the run).
    pub keep_records: bool,
}

/// What the run's totals need of a source written: the whole record is in the index (a
/// million of them held here were a gigabyte).
#[derive(Clone, Copy)]
pub(super) struct Written {
    pub fragments: u32,
    pub dated: bool,
    pub language: Option<&'static str>,
}

/// Reads every input and writes the sources the plan admits. Returns what the totals need of
/// each source written, and, when the target keeps them, the records written.
pub(super) fn write_sources(
    target: &Target<'_>,
    inputs: &[std::path::PathBuf],
    plan: &mut RunPlan,
    mut ahead: Option<&mut crate::pages::PagesAhead>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(HashMap<String, Written>, HashMap<String, SourceRecord>)> {
    let Target {
        dir,
        writer,
        fields,
        settings,
        catalog,
        focus,
        keep_records,
    } = *target;
    let mut written: HashMap<String, Written> = HashMap::new();
    let mut records: HashMap<String, SourceRecord> = HashMap::new();
    let mut done = 0u64;
    let mut failure: Option<IndexError> = None;
    let origins = plan.origins.clone();
    for (at, (input, origin)) in inputs.iter().zip(&origins).enumerate() {
        let paths = focus.map(|f| f[at].as_slice());
        if paths.is_some_and(<[_]>::is_empty) {
            continue;
        }
        let kind = ingest::detect(input).map_err(IndexError::Input)?;
        progress(Progress::Input {
            path: input,
            kind: kind_name(&kind),
        });
        let mut sink = |item: std::result::Result<SourceDoc, Problem>| {
            if failure.is_some() {
                return;
            }
            done += 1;
            progress(Progress::Source { done });
            let source = match item {
                Err(problem) => return plan.problem(origin, problem),
                Ok(source) => source,
            };
            if let Some(reason) = vector_problem(&source, fields, settings) {
                return plan.reject(&source, &reason);
            }
            let previous = catalog.get(&source.id);
            let stored = previous.map(|p| (p.hash.as_str(), p.origin.as_str()));
            let Admit::Write {
                stored,
                first_in_run,
            } = plan.admit(&source, stored)
            else {
                return;
            };
            // Only a source the committed index holds, or one this run already wrote, has
            // documents to replace: tantivy keeps every delete in memory until the commit
            // (about 1 KB each, a gigabyte for a first run of 1M).
            if stored || !first_in_run {
                writer.delete_term(Term::from_field_text(fields.source_id, &source.id));
            }
            let language = crate::document::detected_language(&source, &settings.index);
            let added = add_source(
                writer,
                fields,
                settings,
                &source,
                language,
                ahead.as_deref_mut(),
            );
            match added {
                Ok(record) => {
                    let counts = Written {
                        fragments: record.fragments,
                        dated: record.envelope.date.is_some(),
                        language,
                    };
                    written.insert(source.id.clone(), counts);
                    if keep_records {
                        records.insert(source.id.clone(), record);
                    }
                }
                Err(e) => failure = Some(store_error(dir, e)),
            }
        };
        super::read_input_at(input, paths, origin, &settings.index, &mut sink)
            .map_err(IndexError::Input)?;
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }
    Ok((written, records))
}

/// Why a source's precomputed vector cannot be used, when the backend uses them.
fn vector_problem(source: &SourceDoc, fields: Fields, settings: &Settings) -> Option<String> {
    if settings.embed.backend != finder_core::EmbedBackend::Precomputed {
        return None;
    }
    let v = source.vector.as_ref()?;
    if fields.vector.is_none() {
        return Some(
            "this index predates stored vectors; index into a new folder to use `vector`".into(),
        );
    }
    (v.len() != settings.embed.dim).then(|| {
        format!(
            "`vector` has {} numbers; embed.dim is {}",
            v.len(),
            settings.embed.dim
        )
    })
}

fn kind_name(kind: &ingest::InputKind) -> &'static str {
    match kind {
        ingest::InputKind::Folder => "folder",
        ingest::InputKind::Jsonl => "jsonl",
        ingest::InputKind::Beir => "beir",
    }
}

/// Writes one document per fragment (at least one per source, so the record has a home), and
/// its page record to `ahead` when given. `language` is the source's detected language.
fn add_source(
    writer: &IndexWriter,
    fields: Fields,
    settings: &Settings,
    source: &SourceDoc,
    language: Option<&'static str>,
    mut ahead: Option<&mut crate::pages::PagesAhead>,
) -> tantivy::Result<SourceRecord> {
    let record = SourceRecord {
        id: source.id.clone(),
        origin: source.origin.clone(),
        hash: source.hash.clone(),
        envelope: source.envelope.clone(),
        summary: source.summary.clone(),
        fragments: source.fragments.len() as u32,
        entity: source.entity,
        aliases: source.aliases.clone(),
        relations: source.relations.clone(),
        language: language.map(str::to_string),
    };
    let skey = source_key(&source.id);
    let title = source.envelope.title.as_str();
    let placeholder;
    let fragments = if source.fragments.is_empty() {
        placeholder = [crate::document::FragmentDoc {
            ordinal: 0,
            text: String::new(),
            heading: None,
            extent: Default::default(),
        }];
        &placeholder[..]
    } else {
        &source.fragments[..]
    };
    let vector_home = crate::document::vector_home(fragments);
    for fragment in fragments {
        let first = fragment.ordinal == 0;
        let indexed = crate::document::indexed_text(title, fragment, &settings.index);
        let meta = FragmentRecord {
            extent: fragment.extent,
            heading: fragment.heading.clone(),
            source: first.then(|| record.clone()),
        };
        let key = fragment_key(&source.id, fragment.ordinal).0;
        let mut doc = doc!(
            fields.source_id => source.id.as_str(),
            fields.source_key => skey.0,
            fields.fragment_key => key,
            fields.ordinal => fragment.ordinal as u64,
            fields.text => indexed.as_str(),
            fields.body => fragment.text.as_str(),
            fields.meta => serde_json::to_string(&meta).expect("record serialises"),
        );
        if let (Some(field), true) = (fields.whole_words, settings.index.trigrams) {
            doc.add_text(field, &indexed);
        }
        if let (Some(field), true) = (fields.entity, source.entity) {
            doc.add_u64(field, 1);
        }
        if let (Some(field), Some(language)) = (fields.language, language) {
            doc.add_text(field, language);
        }
        // Stored whatever the backend, so switching to `precomputed` needs no re-read.
        if let (Some(field), Some(v), true) = (
            fields.vector,
            &source.vector,
            vector_home == Some(fragment.ordinal),
        ) {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            doc.add_bytes(field, &bytes);
        }
        writer.add_document(doc)?;
        if let Some(ahead) = &mut ahead {
            ahead.push(
                key,
                &fragment.text,
                &fragment.extent,
                first.then_some(&record),
            );
        }
    }
    Ok(record)
}
