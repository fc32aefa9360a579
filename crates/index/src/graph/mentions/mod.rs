//! Entity mentions: which entities (by their names and aliases) a fragment names, as whole
//! words, ignoring case, accents and punctuation.
//!
//! Text and aliases are folded the same way: split into words on every non-alphanumeric
//! character, lowercased and accent-folded with the same tantivy filters as the lexical
//! index, and joined by single spaces (`Jean-Luc Godard` → `jean luc godard`). Every run of
//! words an alias could start is in a hash table, keyed by a hash of its words (runs of one
//! word in a small table of their own, longer ones in a large one behind a Bloom filter):
//! from each word of the folded text the scan extends the run word by word while some alias
//! still starts with it, and reports the runs that are an alias (checked byte for byte, so a
//! hash collision costs a comparison, never a wrong match). Matches are therefore whole words
//! by construction, overlapping ones included; the leftmost-longest choice is made afterwards.
//! A scan costs a table lookup or two per word, whatever the number of aliases (the
//! Aho–Corasick automata this replaced were walked byte by byte, once per 8 MB shard of
//! patterns, and their build held about 50 bytes per pattern byte).
//!
//! Aliases are filtered when the matcher is built, and every alias left out is reported with
//! its reason so a missing edge can be explained: too short, a single stop word, shadowed by
//! the same name given explicitly for another entity, or found in too many fragments.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use finder_core::FastMap;

mod fold;
mod scan;
mod table;
#[cfg(test)]
mod tests;

pub use fold::fold;
use fold::*;
pub(crate) use scan::on_every_core;
use table::*;

/// Default shortest alias, in letters and digits (spaces not counted).
pub const DEFAULT_MIN_ALIAS_CHARS: usize = 4;
/// Longest alias matched, in characters after folding.
pub const MAX_ALIAS_CHARS: usize = 200;
pub use finder_core::graph::DEFAULT_MAX_ALIAS_DF;
/// Default number of fragments an alias may always be found in, however small the corpus.
pub const DEFAULT_ALIAS_DF_FLOOR: u64 = 10;

/// How aliases are filtered.
#[derive(Debug, Clone, PartialEq)]
pub struct MentionConfig {
    /// Aliases with fewer letters and digits than this are dropped (`U2`, `AT&T` at 4).
    pub min_chars: usize,
    /// Aliases found in more than this share of the corpus's fragments are dropped. A value
    /// of 1 or more, or one that is not a number, drops nothing.
    pub max_df: f64,
    /// An alias found in at most this many fragments is never dropped for frequency, so a
    /// small corpus (where 2% is one or two fragments) keeps its names.
    pub df_floor: u64,
    /// Drop aliases that are one common English stop word (`these`, `which`).
    pub stop_words: bool,
}

impl Default for MentionConfig {
    fn default() -> Self {
        MentionConfig {
            min_chars: DEFAULT_MIN_ALIAS_CHARS,
            max_df: DEFAULT_MAX_ALIAS_DF,
            df_floor: DEFAULT_ALIAS_DF_FLOOR,
            stop_words: true,
        }
    }
}

/// Why an alias does not produce mentions.
#[derive(Debug, Clone, PartialEq)]
pub enum DropReason {
    /// Nothing is left after folding (only punctuation).
    Empty,
    /// Fewer letters and digits than the minimum.
    TooShort {
        /// Letters and digits in the folded alias.
        chars: usize,
        /// The minimum.
        min: usize,
    },
    /// Longer than any name: the matcher's construction grows with the square of a long
    /// repetitive alias (`a a a …`), and no title or alias that long is a name.
    TooLong {
        /// Characters in the folded alias.
        chars: usize,
        /// The maximum.
        max: usize,
    },
    /// A single common stop word.
    StopWord,
    /// Derived by removing a `(disambiguator)`, and another entity has this exact alias.
    Shadowed {
        /// The entity that has the alias itself.
        by: u32,
    },
    /// Found in more fragments than the cap allows.
    Frequent {
        /// Fragments the alias was found in.
        fragments: u64,
        /// Fragments counted.
        of: u64,
        /// The share allowed.
        max_df: f64,
    },
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Empty => write!(f, "no letters or digits"),
            DropReason::TooShort { chars, min } => {
                write!(
                    f,
                    "{chars} letters and digits, fewer than the minimum {min}"
                )
            }
            DropReason::TooLong { chars, max } => {
                write!(f, "{chars} characters, more than the maximum {max}")
            }
            DropReason::StopWord => write!(f, "a common stop word"),
            DropReason::Shadowed { by } => {
                write!(
                    f,
                    "entity {by} has this name itself, without a disambiguator"
                )
            }
            DropReason::Frequent {
                fragments,
                of,
                max_df,
            } => write!(
                f,
                "found in {fragments} of {of} fragments, more than the {:.1}% allowed",
                max_df * 100.0
            ),
        }
    }
}

/// An alias that does not produce mentions, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedAlias {
    /// The entity it belonged to.
    pub entity: u32,
    /// The alias as given, or as derived (`Paris` from `Paris (band)`).
    pub alias: String,
    /// Its folded form.
    pub folded: String,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// One occurrence of an entity's alias in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The entity named.
    pub entity: u32,
    /// Bytes of the text from the first to the last word of the alias.
    pub range: Range<usize>,
    /// The alias matched, as an index into [`MentionMatcher::aliases`].
    pub alias: usize,
}

/// How often an entity is named in one text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EntityCount {
    /// The entity.
    pub entity: u32,
    /// Occurrences of its aliases.
    pub count: u32,
}

/// One whole-word alias occurrence, as the counting pass records it
/// ([`MentionMatcher::count_and_hit_all`]): its span in the text's folded words and the alias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Bytes of the padded folded text, the padding spaces on both sides included.
    start: u32,
    end: u32,
    /// The alias, as an index into the aliases of the matcher that found it.
    alias: u32,
}

/// Where each alias of a matcher went when the frequency cap was applied
/// ([`MentionMatcher::apply_df_cap_renumbered`]): its index among the kept aliases, or none.
#[derive(Debug, Clone)]
pub struct Renumbered(Vec<u32>);

impl Hit {
    /// The hit as `(start, end, alias)`, for a cache of what a scan found.
    pub(crate) fn parts(self) -> (u32, u32, u32) {
        (self.start, self.end, self.alias)
    }

    /// A hit kept by [`Hit::parts`], its alias renumbered for the matcher it is used with.
    pub(crate) fn from_parts(start: u32, end: u32, alias: u32) -> Hit {
        Hit { start, end, alias }
    }
}

/// Fragment counts per alias of one matcher, from [`MentionMatcher::count_fragment`];
/// counts made on several threads add up with [`DfCounts::merge`].
#[derive(Debug, Clone, Default)]
pub struct DfCounts {
    fragments: u64,
    per_alias: Vec<u64>,
    /// Scratch space for one fragment's aliases, kept to save an allocation per fragment.
    seen: Vec<usize>,
}

impl DfCounts {
    /// Adds `other`'s counts (from the same matcher) to these.
    pub fn merge(&mut self, other: &DfCounts) {
        self.fragments += other.fragments;
        if self.per_alias.len() < other.per_alias.len() {
            self.per_alias.resize(other.per_alias.len(), 0);
        }
        for (mine, theirs) in self.per_alias.iter_mut().zip(&other.per_alias) {
            *mine += theirs;
        }
    }

    /// The counts of `fragments` fragments whose hits (by alias index, of a matcher of
    /// `aliases` aliases) are `hits`: what counting their texts gives.
    pub(crate) fn of_hits<'a>(
        fragments: u64,
        aliases: usize,
        hits: impl Iterator<Item = &'a [Hit]>,
    ) -> DfCounts {
        let mut per_alias = vec![0; aliases];
        let mut seen = Vec::new();
        for found in hits {
            seen.clear();
            seen.extend(found.iter().map(|h| h.alias as usize));
            seen.sort_unstable();
            seen.dedup();
            for &alias in &seen {
                per_alias[alias] += 1;
            }
        }
        DfCounts {
            fragments,
            per_alias,
            seen: Vec::new(),
        }
    }

    /// Fragments counted.
    pub fn fragments(&self) -> u64 {
        self.fragments
    }

    /// Fragments the alias with this index was found in.
    pub fn of_alias(&self, alias: usize) -> u64 {
        self.per_alias.get(alias).copied().unwrap_or(0)
    }
}

/// The matcher could not be built (more aliases than its 32-bit alias numbers hold).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot build the mention matcher: {0}")]
pub struct MentionBuildError(String);

/// Finds entity mentions in fragment text. Build it once per index; it is `Send + Sync`, so
/// fragments can be scanned on several threads.
#[derive(Debug, Clone)]
pub struct MentionMatcher {
    config: MentionConfig,
    aliases: Vec<Alias>,
    /// The aliases by the hashes of their words, made by the first scan that needs it: a
    /// capped matcher whose capping scan kept its hits ([`MentionMatcher::mentions_of_hits`])
    /// may never scan, and at a million titles the table takes a second to make.
    table: OnceLock<WordTable>,
    /// Run hashes are masked with this (all ones; tests narrow it to force collisions).
    mask: u64,
    dropped: Vec<DroppedAlias>,
}

/// The entities (each with its alias as written) that gave one folded alias themselves, and
/// those that got it by dropping a disambiguator.
type Group = (Vec<(u32, String)>, Vec<(u32, String)>);

/// One folded alias and the entities it names, each with the alias as it was given.
#[derive(Debug, Clone)]
struct Alias {
    folded: String,
    owners: Vec<(u32, String)>,
}

impl MentionMatcher {
    /// A matcher over `entities`, each an id and its names (title first, then aliases).
    /// A name `Title (disambiguator)` also yields `Title`, unless another entity is called
    /// `Title` itself. No frequency cap is applied; see [`MentionMatcher::apply_df_cap`] or
    /// [`MentionMatcher::build_with_corpus`].
    pub fn build<I, A, S>(entities: I, config: &MentionConfig) -> Result<Self, MentionBuildError>
    where
        I: IntoIterator<Item = (u32, A)>,
        A: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::build_masked(entities, config, u64::MAX)
    }

    /// [`MentionMatcher::build`] with run hashes masked by `mask` (tests force collisions).
    fn build_masked<I, A, S>(
        entities: I,
        config: &MentionConfig,
        mask: u64,
    ) -> Result<Self, MentionBuildError>
    where
        I: IntoIterator<Item = (u32, A)>,
        A: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        // folded alias → (entities that gave it, entities that got it by dropping a
        // disambiguator), each with the alias as written.
        let mut groups: FastMap<String, Group> = FastMap::default();
        let mut dropped = Vec::new();
        // (entity, folded alias) pairs already reported, so repeats are reported once.
        let mut reported: HashSet<(u32, String)> = HashSet::new();
        // Each name as given, and without its disambiguator, in the entities' order.
        let mut forms: Vec<(u32, String, bool)> = Vec::new();
        for (entity, names) in entities {
            for name in names {
                let name = name.as_ref().trim();
                forms.push((entity, name.to_string(), false));
                if let Some(base) = strip_disambiguator(name) {
                    forms.push((entity, base.to_string(), true));
                }
            }
        }
        // Folded on every core (at a million titles about 0.3 s of the build's 2.5; no gain
        // over folding on one core could be told from the machine's noise).
        let folded = on_every_core(&forms, |share| {
            share
                .iter()
                .map(|(_, alias, _)| {
                    let folded = fold(alias);
                    let reason = filter(&folded, config);
                    (folded, reason)
                })
                .collect::<Vec<_>>()
        });
        for ((entity, alias, derived), (folded, reason)) in
            forms.into_iter().zip(folded.into_iter().flatten())
        {
            if let Some(reason) = reason {
                if reported.insert((entity, folded.clone())) {
                    dropped.push(DroppedAlias {
                        entity,
                        alias,
                        folded,
                        reason,
                    });
                }
                continue;
            }
            let group = groups.entry(folded).or_default();
            let side = if derived { &mut group.1 } else { &mut group.0 };
            if !side.iter().any(|(e, _)| *e == entity) {
                side.push((entity, alias));
            }
        }
        // Aliases are numbered in folded order (the order of the dropped list and of the
        // names a query can match follows from it).
        let mut groups: Vec<(String, Group)> = groups.into_iter().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut aliases = Vec::with_capacity(groups.len());
        for (folded, (mut given, derived)) in groups {
            let owners = if given.is_empty() {
                derived
            } else {
                given.sort_by_key(|(e, _)| *e);
                let by = given[0].0;
                for (entity, alias) in derived {
                    if !given.iter().any(|(e, _)| *e == entity) {
                        dropped.push(DroppedAlias {
                            entity,
                            alias,
                            folded: folded.clone(),
                            reason: DropReason::Shadowed { by },
                        });
                    }
                }
                given
            };
            let mut owners = owners;
            owners.sort_by_key(|(e, _)| *e);
            aliases.push(Alias { folded, owners });
        }
        if aliases.len() >= NO_ALIAS as usize {
            return Err(MentionBuildError(format!(
                "{} distinct aliases; at most {}",
                aliases.len(),
                NO_ALIAS - 1
            )));
        }
        let table = WordTable::new(&aliases, mask);
        Ok(MentionMatcher {
            config: config.clone(),
            aliases,
            table: OnceLock::from(table),
            mask,
            dropped,
        })
    }

    /// [`MentionMatcher::build`], then one counting pass over `fragments` and
    /// [`MentionMatcher::apply_df_cap`].
    pub fn build_with_corpus<'t, I, A, S, F>(
        entities: I,
        config: &MentionConfig,
        fragments: F,
    ) -> Result<Self, MentionBuildError>
    where
        I: IntoIterator<Item = (u32, A)>,
        A: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: IntoIterator<Item = &'t str>,
    {
        let matcher = MentionMatcher::build(entities, config)?;
        let texts: Vec<&str> = fragments.into_iter().collect();
        let counts = matcher.count_all(&texts);
        matcher.apply_df_cap(&counts)
    }

    /// A matcher without the aliases found in more than `max_df` of the counted fragments
    /// (and more than `df_floor`), which are added to [`MentionMatcher::dropped`].
    pub fn apply_df_cap(self, counts: &DfCounts) -> Result<Self, MentionBuildError> {
        self.apply_df_cap_renumbered(counts)
            .map(|(matcher, _)| matcher)
    }

    /// [`MentionMatcher::apply_df_cap`], also saying where each alias went, for
    /// [`MentionMatcher::mentions_of_hits`].
    pub fn apply_df_cap_renumbered(
        self,
        counts: &DfCounts,
    ) -> Result<(Self, Renumbered), MentionBuildError> {
        let MentionMatcher {
            config,
            aliases,
            table,
            mask,
            mut dropped,
        } = self;
        // A table is made again over the kept aliases if a scan needs one.
        drop(table);
        let of = counts.fragments;
        let cap = config.max_df * of as f64;
        let mut kept = Vec::with_capacity(aliases.len());
        let mut renumbered = Vec::with_capacity(aliases.len());
        for (index, alias) in aliases.into_iter().enumerate() {
            let found = counts.of_alias(index);
            if found > config.df_floor && config.max_df < 1.0 && found as f64 > cap {
                for (entity, name) in alias.owners {
                    dropped.push(DroppedAlias {
                        entity,
                        alias: name,
                        folded: alias.folded.clone(),
                        reason: DropReason::Frequent {
                            fragments: found,
                            of,
                            max_df: config.max_df,
                        },
                    });
                }
                renumbered.push(NO_ALIAS);
            } else {
                renumbered.push(kept.len() as u32);
                kept.push(alias);
            }
        }
        let matcher = MentionMatcher {
            config,
            aliases: kept,
            table: OnceLock::new(),
            mask,
            dropped,
        };
        Ok((matcher, Renumbered(renumbered)))
    }

    /// The folded aliases that produce mentions, in index order.
    pub fn aliases(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.aliases.iter().map(|a| a.folded.as_str())
    }

    /// The entities the alias with this index names, with the alias as each gave it.
    pub fn alias_owners(&self, alias: usize) -> &[(u32, String)] {
        self.aliases.get(alias).map_or(&[], |a| a.owners.as_slice())
    }

    /// The aliases left out, and why.
    pub fn dropped(&self) -> &[DroppedAlias] {
        &self.dropped
    }

    /// The filter settings the matcher was built with.
    pub fn config(&self) -> &MentionConfig {
        &self.config
    }
}
