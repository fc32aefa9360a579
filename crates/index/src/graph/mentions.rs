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
use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, SimpleTokenizer, TextAnalyzer};

use super::stop_words::is_stop_word;
use crate::slots::{SlotKey, SlotTable};

/// Default shortest alias, in letters and digits (spaces not counted).
pub const DEFAULT_MIN_ALIAS_CHARS: usize = 4;
/// Longest alias matched, in characters after folding.
pub const MAX_ALIAS_CHARS: usize = 200;
/// Default largest share of fragments an alias may be found in before it is dropped.
pub const DEFAULT_MAX_ALIAS_DF: f64 = 0.02;
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

    /// Fragments counted.
    pub fn fragments(&self) -> u64 {
        self.fragments
    }

    /// Fragments the alias with this index was found in.
    pub fn of_alias(&self, alias: usize) -> u64 {
        self.per_alias.get(alias).copied().unwrap_or(0)
    }
}

/// `f` over contiguous shares of `items`, one per core ([`crate::cores`]), results in the items'
/// order; one share, on this thread, when there are few items or one core.
pub(crate) fn on_every_core<T: Sync, R: Send>(items: &[T], f: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    const MIN_SHARE: usize = 1024;
    let threads = crate::cores().min(items.len() / MIN_SHARE).max(1);
    if threads == 1 {
        return vec![f(items)];
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|share| scope.spawn(move || f(share)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a mention scan thread panicked"))
            .collect()
    })
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

/// No alias: the end of a [`WordTable::same_hash`] chain, or a run no alias ends with.
const NO_ALIAS: u32 = u32::MAX;

/// The first value of a run's hash, before its first word ([`extend`]).
const RUN_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// How many words ahead of its probes a scan fetches the first-word table's slot and the
/// filter's word for the runs starting there.
const AHEAD: usize = 8;

/// The hash of a run of words after one more word whose own hash is `word`.
fn extend(run: u64, word: u64) -> u64 {
    (run.rotate_left(23) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A folded word's hash.
fn word_hash(word: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(word.as_bytes())
}

/// What the table knows of one run of words (by its hash). The default is only an empty
/// slot's filling ([`SlotTable`]).
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    /// The last alias added whose words hash to this run's ([`NO_ALIAS`] when none); the
    /// others follow through [`WordTable::same_hash`].
    alias: u32,
    /// Some alias has more words after a run with this hash: the scan goes on.
    longer: bool,
}

/// A Bloom filter over the keys of a table of runs: 11 to 22 bits a key, three of them set
/// in one 64-bit word, so asking costs one read from an array a twelfth of the table's size
/// or less (4 MB at a million titles, where the table of longer runs is over 100 MB). Most
/// runs of two words a text holds start no alias: the filter answers for them (about 1% of
/// false positives, never a false negative).
#[derive(Debug, Clone, Default)]
struct Filter {
    words: Vec<u64>,
}

impl Filter {
    fn of(keys: &FastMap<u64, Run>) -> Filter {
        let mut filter = Filter {
            words: vec![0; (keys.len() * 11 / 64).next_power_of_two().clamp(1, 1 << 26)],
        };
        for &key in keys.keys() {
            let (word, bits) = filter.place(key);
            filter.words[word] |= bits;
        }
        filter
    }

    /// The word of `key` and its three bits there.
    fn place(&self, key: u64) -> (usize, u64) {
        let h = key.wrapping_mul(0xff51_afd7_ed55_8ccd);
        // The word from the product's top bits (at most 26 of them), the bits from below.
        let word = (h >> 38) as usize & (self.words.len() - 1);
        let bits = 1 << ((h >> 20) & 63) | 1 << ((h >> 26) & 63) | 1 << ((h >> 32) & 63);
        (word, bits)
    }

    fn may_hold(&self, key: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (word, bits) = self.place(key);
        self.words[word] & bits == bits
    }

    /// Asks the processor to fetch the word [`Filter::may_hold`] will read for `key`.
    fn prefetch(&self, key: u64) {
        if !self.words.is_empty() {
            crate::slots::prefetch(&self.words[self.place(key).0]);
        }
    }
}

/// Aliases by the hashes of their words: every prefix of every alias is a key. Runs of one
/// word have a table of their own, as a scan probes one at nearly every word of a text and
/// the aliases' distinct first words are few.
#[derive(Debug, Clone)]
struct WordTable {
    /// Runs of one word, by [`first_key`]: a table whose probes can be fetched ahead.
    first: SlotTable<Run>,
    /// Runs of two words or more.
    longer: FastMap<u64, Run>,
    /// Which keys `longer` may hold.
    pairs: Filter,
    /// Per alias, the next alias whose words hash the same ([`NO_ALIAS`] ends the chain).
    same_hash: Vec<u32>,
    /// The most words in an alias: no scan goes further.
    max_words: usize,
    /// Run hashes are masked with this (all ones; tests narrow it to force collisions).
    mask: u64,
}

impl WordTable {
    fn new(aliases: &[Alias], mask: u64) -> WordTable {
        let mut table = WordTable {
            first: SlotTable::default(),
            longer: FastMap::default(),
            pairs: Filter::default(),
            same_hash: vec![NO_ALIAS; aliases.len()],
            max_words: 0,
            mask,
        };
        table.longer.reserve(2 * aliases.len());
        for (index, alias) in aliases.iter().enumerate() {
            let words = alias.folded.split(' ').count();
            table.max_words = table.max_words.max(words);
            let mut run = RUN_SEED;
            for (k, word) in alias.folded.split(' ').enumerate() {
                run = extend(run, word_hash(word));
                let empty = Run {
                    alias: NO_ALIAS,
                    longer: false,
                };
                let entry = if k == 0 {
                    table.first.get_or_insert(first_key(run & mask), empty)
                } else {
                    table.longer.entry(run & mask).or_insert(empty)
                };
                if k + 1 < words {
                    entry.longer = true;
                } else {
                    table.same_hash[index] = entry.alias;
                    entry.alias = index as u32;
                }
            }
        }
        table.pairs = Filter::of(&table.longer);
        table
    }

    /// What the table knows of a run of `words` words (one or more) whose hash is `run`.
    fn get(&self, words: usize, run: u64) -> Option<Run> {
        let key = run & self.mask;
        if words == 1 {
            self.first.get(first_key(key))
        } else if self.pairs.may_hold(key) {
            self.longer.get(&key).copied()
        } else {
            None
        }
    }

    /// Asks the processor to fetch what [`WordTable::get`] will read for the runs of one and
    /// two words whose hashes are `one` and `two`.
    fn prefetch(&self, one: u64, two: Option<u64>) {
        self.first.prefetch(first_key(one & self.mask));
        if let (Some(two), true) = (two, self.max_words > 1) {
            self.pairs.prefetch(two & self.mask);
        }
    }
}

/// A one-word run's key in [`WordTable::first`]: its hash, and a one (a slot key's second half
/// is never zero).
fn first_key(run: u64) -> SlotKey {
    [run, 1]
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

    /// [`MentionMatcher::count_fragment`] over every text, on every core (each thread counts
    /// a contiguous share; the counts add up to the same whatever the split).
    pub fn count_all(&self, texts: &[&str]) -> DfCounts {
        let mut total = self.new_counts();
        for part in on_every_core(texts, |share| {
            let mut counts = self.new_counts();
            for text in share {
                self.count_fragment(&mut counts, text);
            }
            counts
        }) {
            total.merge(&part);
        }
        total
    }

    /// [`MentionMatcher::count_all`] that also keeps what it found in each text, in order:
    /// once the cap is applied, [`MentionMatcher::mentions_of_hits`] makes each text's
    /// mentions from them without folding and scanning the texts a second time.
    pub fn count_and_hit_all(&self, texts: &[&str]) -> (DfCounts, Vec<Vec<Hit>>) {
        let mut total = self.new_counts();
        let mut hits = Vec::with_capacity(texts.len());
        for (counts, part) in on_every_core(texts, |share| {
            let mut counts = self.new_counts();
            let part: Vec<Vec<Hit>> = share
                .iter()
                .map(|text| {
                    let mut found = Vec::new();
                    self.count_words(&mut counts, &Words::of(text), |hit| found.push(hit));
                    found
                })
                .collect();
            (counts, part)
        }) {
            total.merge(&counts);
            hits.extend(part);
        }
        (total, hits)
    }

    /// [`MentionMatcher::mentions`] of every text, in order, on every core.
    pub fn mentions_all(&self, texts: &[&str]) -> Vec<Vec<EntityCount>> {
        on_every_core(texts, |share| {
            share.iter().map(|t| self.mentions(t)).collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect()
    }

    /// Empty counts for [`MentionMatcher::count_fragment`].
    pub fn new_counts(&self) -> DfCounts {
        DfCounts {
            fragments: 0,
            per_alias: vec![0; self.aliases.len()],
            seen: Vec::new(),
        }
    }

    /// Counts one fragment: every alias found in it as whole words (overlapping ones
    /// included) counts once.
    pub fn count_fragment(&self, counts: &mut DfCounts, text: &str) {
        self.count_words(counts, &Words::of(text), |_| {});
    }

    /// [`MentionMatcher::count_fragment`] over folded words, calling `keep` with every
    /// occurrence found.
    fn count_words(&self, counts: &mut DfCounts, words: &Words, mut keep: impl FnMut(Hit)) {
        counts.fragments += 1;
        counts.seen.clear();
        self.scan(words, |alias, span| {
            counts.seen.push(alias);
            // Offsets fit in 32 bits: a fragment is at most `index.fragment_max_chars` long.
            keep(Hit {
                start: span.start as u32,
                end: span.end as u32,
                alias: alias as u32,
            });
        });
        counts.seen.sort_unstable();
        counts.seen.dedup();
        if counts.per_alias.len() < self.aliases.len() {
            counts.per_alias.resize(self.aliases.len(), 0);
        }
        for &alias in &counts.seen {
            counts.per_alias[alias] += 1;
        }
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

    /// Every mention in `text`, in text order: the leftmost-longest whole-word alias
    /// matches, not overlapping, one mention per entity the alias names.
    pub fn find(&self, text: &str) -> Vec<Mention> {
        let words = Words::of(text);
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        self.scan(&words, |alias, span| {
            found.push((span.start, span.end, alias))
        });
        let mut out = Vec::new();
        for (start, end, alias) in leftmost_longest(found) {
            let Some(range) = words.source_range(start, end) else {
                continue;
            };
            for (entity, _) in &self.aliases[alias].owners {
                out.push(Mention {
                    entity: *entity,
                    range: range.clone(),
                    alias,
                });
            }
        }
        out
    }

    /// The distinct entities `text` mentions and how often, by entity id.
    pub fn mentions(&self, text: &str) -> Vec<EntityCount> {
        entity_counts(self.find(text).into_iter().map(|m| m.entity).collect())
    }

    /// [`MentionMatcher::mentions`] of a text from the hits the matcher this one was capped
    /// from found in it ([`MentionMatcher::count_and_hit_all`]): the same, as the capped
    /// matcher's scan finds exactly the kept aliases' hits of the uncapped one's (it keeps
    /// their runs and their hash mask, and drops only what the others added).
    pub fn mentions_of_hits(&self, hits: &[Hit], renumbered: &Renumbered) -> Vec<EntityCount> {
        let found: Vec<(usize, usize, usize)> = hits
            .iter()
            .filter_map(|hit| {
                let alias = renumbered.0[hit.alias as usize];
                (alias != NO_ALIAS).then_some((
                    hit.start as usize,
                    hit.end as usize,
                    alias as usize,
                ))
            })
            .collect();
        let ids = leftmost_longest(found)
            .flat_map(|(_, _, alias)| self.aliases[alias].owners.iter().map(|(e, _)| *e))
            .collect();
        entity_counts(ids)
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

    /// Calls `hit(alias, span)` for every whole-word alias occurrence, overlapping ones
    /// included; `span` is in the padded folded text, padding spaces included.
    fn scan(&self, words: &Words, mut hit: impl FnMut(usize, Range<usize>)) {
        let table = self
            .table
            .get_or_init(|| WordTable::new(&self.aliases, self.mask));
        if words.spans.is_empty() || table.first.is_empty() {
            return;
        }
        let hashes: Vec<u64> = words
            .spans
            .iter()
            .map(|&(start, end, _)| word_hash(&words.padded[start..end]))
            .collect();
        let padded = words.padded.as_bytes();
        // A scan probes the table of first words at every word and, as nearly every word of a
        // text starts some alias, the filter at most runs of two words: reads from megabytes,
        // nearly always cache misses. Each is fetched AHEAD words before it is asked.
        let fetch = |first: usize| {
            if let Some(&word) = hashes.get(first) {
                let one = extend(RUN_SEED, word);
                table.prefetch(one, hashes.get(first + 1).map(|&next| extend(one, next)));
            }
        };
        (0..AHEAD).for_each(fetch);
        for first in 0..hashes.len() {
            fetch(first + AHEAD);
            let start = words.spans[first].0;
            let mut run = RUN_SEED;
            let reach = hashes.len().min(first + table.max_words);
            for (last, &word) in hashes.iter().enumerate().take(reach).skip(first) {
                run = extend(run, word);
                let Some(found) = table.get(last + 1 - first, run) else {
                    break;
                };
                let end = words.spans[last].1;
                let mut alias = found.alias;
                while alias != NO_ALIAS {
                    if self.aliases[alias as usize].folded.as_bytes() == &padded[start..end] {
                        // The span takes in the padding spaces on both sides.
                        hit(alias as usize, start - 1..end + 1);
                    }
                    alias = table.same_hash[alias as usize];
                }
                if !found.longer {
                    break;
                }
            }
        }
    }
}

/// Of the alias occurrences `found` (`start..end` in the padded folded text, alias), in any
/// order, the leftmost-longest ones that do not overlap, in text order.
fn leftmost_longest(
    mut found: Vec<(usize, usize, usize)>,
) -> impl Iterator<Item = (usize, usize, usize)> {
    // Leftmost first, then longest; ties cannot happen, as folded aliases are distinct.
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut taken_to = 0;
    found.into_iter().filter(move |&(start, end, _)| {
        if start < taken_to {
            return false;
        }
        // The padding spaces are shared by neighbouring matches.
        taken_to = end - 1;
        true
    })
}

/// How often each entity of `ids` occurs, by entity id.
fn entity_counts(mut ids: Vec<u32>) -> Vec<EntityCount> {
    ids.sort_unstable();
    let mut out: Vec<EntityCount> = Vec::new();
    for entity in ids {
        match out.last_mut() {
            Some(last) if last.entity == entity => last.count += 1,
            _ => out.push(EntityCount { entity, count: 1 }),
        }
    }
    out
}

/// `text` folded for matching: its words lowercased and accent-folded, joined by single
/// spaces (`Pokémon: Jean-Luc` → `pokemon jean luc`).
pub fn fold(text: &str) -> String {
    let words = Words::of(text);
    words
        .padded
        .get(1..words.padded.len().saturating_sub(1))
        .unwrap_or("")
        .to_string()
}

/// `Title (disambiguator)` → `Title`; None for names without a final parenthesis.
fn strip_disambiguator(name: &str) -> Option<&str> {
    let inner = name.strip_suffix(')')?;
    let open = inner.rfind('(')?;
    let base = inner[..open].trim();
    (!base.is_empty()).then_some(base)
}

/// Why a folded alias cannot be used, if it cannot.
fn filter(folded: &str, config: &MentionConfig) -> Option<DropReason> {
    let chars = folded.chars().filter(|&c| c != ' ').count();
    if chars == 0 {
        return Some(DropReason::Empty);
    }
    let all = folded.chars().count();
    if all > MAX_ALIAS_CHARS {
        return Some(DropReason::TooLong {
            chars: all,
            max: MAX_ALIAS_CHARS,
        });
    }
    if chars < config.min_chars {
        return Some(DropReason::TooShort {
            chars,
            min: config.min_chars,
        });
    }
    if config.stop_words && !folded.contains(' ') && is_stop_word(folded) {
        return Some(DropReason::StopWord);
    }
    None
}

/// A text's folded words: ` w1 w2 … wn ` (padded with one space each side) and where each
/// word lies, there and in the text.
struct Words {
    padded: String,
    /// Per word: its start and end in `padded`, and its bytes in the text.
    spans: Vec<(usize, usize, Range<usize>)>,
}

impl Words {
    fn of(text: &str) -> Words {
        if text.is_ascii() {
            return Words::of_ascii(text);
        }
        let mut analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .build();
        let mut padded = String::with_capacity(text.len() + 2);
        padded.push(' ');
        let mut spans = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let token = stream.token();
            let start = padded.len();
            // Folding can yield punctuation (`½` → `1/2`); words hold letters and digits only.
            // It can also yield capitals (`ʜ` → `H`, after the lowercasing), so it is followed
            // by lowercasing again: folding folded text changes nothing.
            padded.extend(
                token
                    .text
                    .chars()
                    .flat_map(char::to_lowercase)
                    .filter(|c| c.is_alphanumeric()),
            );
            if padded.len() == start {
                continue;
            }
            spans.push((start, padded.len(), token.offset_from..token.offset_to));
            padded.push(' ');
        }
        if spans.is_empty() {
            padded.push(' ');
        }
        Words { padded, spans }
    }

    /// [`Words::of`] for ASCII text, without the analyzer: its words are the runs of ASCII
    /// letters and digits (what the tokenizer splits on), lowercased (all the filters do to
    /// them).
    fn of_ascii(text: &str) -> Words {
        let bytes = text.as_bytes();
        let mut padded = String::with_capacity(text.len() + 2);
        padded.push(' ');
        let mut spans = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if !bytes[at].is_ascii_alphanumeric() {
                at += 1;
                continue;
            }
            let from = at;
            while at < bytes.len() && bytes[at].is_ascii_alphanumeric() {
                at += 1;
            }
            let start = padded.len();
            padded.extend(
                bytes[from..at]
                    .iter()
                    .map(|b| b.to_ascii_lowercase() as char),
            );
            spans.push((start, padded.len(), from..at));
            padded.push(' ');
        }
        if spans.is_empty() {
            padded.push(' ');
        }
        Words { padded, spans }
    }

    /// The text bytes of the padded match `start..end` (spaces included), from its first
    /// word's start to its last word's end.
    fn source_range(&self, start: usize, end: usize) -> Option<Range<usize>> {
        let first = self
            .spans
            .binary_search_by_key(&(start + 1), |s| s.0)
            .ok()?;
        let last = self
            .spans
            .binary_search_by_key(&end.checked_sub(1)?, |s| s.1)
            .ok()?;
        Some(self.spans[first].2.start..self.spans[last].2.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_filter_holds_every_key_and_few_others() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            state = extend(state, 0x2545_f491_4f6c_dd1d);
            state
        };
        let mut table: FastMap<u64, Run> = FastMap::default();
        for _ in 0..100_000 {
            table.insert(
                next(),
                Run {
                    alias: NO_ALIAS,
                    longer: false,
                },
            );
        }
        let filter = Filter::of(&table);
        assert!(table.keys().all(|&k| filter.may_hold(k)));
        let others = (0..100_000).filter(|_| filter.may_hold(next())).count();
        assert!(others < 3_000, "{others} false positives in 100,000");
        assert!(!Filter::default().may_hold(7));
        // a narrowed mask leaves few keys: one word holds them all
        let few: FastMap<u64, Run> = table.iter().take(3).map(|(&k, &r)| (k & 0b11, r)).collect();
        let small = Filter::of(&few);
        assert_eq!(small.words.len(), 1);
        assert!(few.keys().all(|&k| small.may_hold(k)));
    }

    fn config() -> MentionConfig {
        MentionConfig {
            df_floor: 0,
            ..MentionConfig::default()
        }
    }

    fn matcher(entities: &[(u32, &[&str])], config: &MentionConfig) -> MentionMatcher {
        MentionMatcher::build(entities.iter().map(|(e, a)| (*e, a.iter())), config).unwrap()
    }

    /// `entity:matched text` per mention.
    fn check(m: &MentionMatcher, text: &str) -> Vec<String> {
        m.find(text)
            .into_iter()
            .map(|x| format!("{}:{}", x.entity, &text[x.range]))
            .collect()
    }

    /// The scans shared out over the cores give what one scan in order gives.
    #[test]
    fn counting_and_scanning_on_every_core_equals_one_scan() {
        let names: Vec<(u32, Vec<String>)> = (0..50)
            .map(|i| (i, vec![format!("topic{i} name"), format!("alias {i}")]))
            .collect();
        let texts: Vec<String> = (0..5_000u32)
            .map(|i| {
                format!(
                    "text {i} about Topic{} name and alias {} and topic{} again",
                    i % 50,
                    (i * 7) % 60,
                    (i * 13) % 50
                )
            })
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        // Each `topicN name` is in 2% of the texts, each `alias N` in 1.7%: the cap below
        // drops the first and keeps the second.
        let config = MentionConfig {
            max_df: 0.018,
            ..MentionConfig::default()
        };
        let m = MentionMatcher::build(names.iter().map(|(e, a)| (*e, a.iter())), &config).unwrap();
        let mut one = m.new_counts();
        for t in &texts {
            m.count_fragment(&mut one, t);
        }
        let all = m.count_all(&texts);
        assert_eq!(all.fragments(), 5_000);
        for alias in 0..m.aliases().len() {
            assert_eq!(all.of_alias(alias), one.of_alias(alias), "alias {alias}");
        }
        let each: Vec<Vec<EntityCount>> = texts.iter().map(|t| m.mentions(t)).collect();
        assert_eq!(m.mentions_all(&texts), each);
        assert!(each.iter().all(|x| !x.is_empty()));

        // The counting pass that keeps its hits counts the same, and the mentions chosen from
        // its hits under the cap are the capped matcher's own.
        let (counts, hits) = m.count_and_hit_all(&texts);
        assert_eq!(counts.fragments(), 5_000);
        assert_eq!(hits.len(), 5_000);
        for alias in 0..m.aliases().len() {
            assert_eq!(counts.of_alias(alias), one.of_alias(alias), "alias {alias}");
        }
        let (capped, renumbered) = m.apply_df_cap_renumbered(&counts).unwrap();
        assert_eq!(capped.dropped().len(), 50, "every `topicN name`");
        assert_eq!(capped.aliases().len(), 50, "every `alias N`");
        let mut mentioned = 0;
        for (text, found) in texts.iter().zip(&hits) {
            let chosen = capped.mentions_of_hits(found, &renumbered);
            assert_eq!(chosen, capped.mentions(text), "{text}");
            mentioned += usize::from(!chosen.is_empty());
        }
        assert!(mentioned > 0);
    }

    #[test]
    fn folding() {
        assert_eq!(
            fold("Pokémon: Jean-Luc  GODARD's"),
            "pokemon jean luc godard s"
        );
        assert_eq!(fold("Straße Æsop Øre ﬁle"), "strasse aesop ore file");
        assert_eq!(fold(" -- "), "");
        assert_eq!(fold(""), "");
        // Folding after lowercasing can make capitals (`ʜ`, a small capital, folds to `H`);
        // folded text folds to itself.
        assert_eq!(fold("\u{29c}ello Ⓗi"), "hello hi");
        assert_eq!(fold(&fold("\u{29c}ello Ⓗi")), fold("\u{29c}ello Ⓗi"));
    }

    #[test]
    fn accents_case_and_punctuation() {
        let m = matcher(
            &[
                (1, &["Pokémon"]),
                (2, &["Jean-Luc Godard"]),
                (3, &["AC/DC"]),
            ],
            &config(),
        );
        assert_eq!(
            check(&m, "POKEMON fans met jean luc godard; acdc no, Ac-Dc yes."),
            vec!["1:POKEMON", "2:jean luc godard", "3:Ac-Dc"]
        );
        assert_eq!(
            check(&m, "Pokémons and xjean luc godard"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn leftmost_longest_whole_words() {
        let m = matcher(
            &[
                (1, &["New York"]),
                (2, &["New York Times"]),
                (3, &["York"]),
                (4, &["abcd ef"]),
                (5, &["efgh"]),
            ],
            &config(),
        );
        assert_eq!(
            check(&m, "The New York Times in New York, then York."),
            vec!["2:New York Times", "1:New York", "3:York"]
        );
        // `abcd ef` is not whole-word in `abcd efgh`; `efgh`, which overlaps it, still is.
        assert_eq!(check(&m, "abcd efgh"), vec!["5:efgh"]);
        assert_eq!(
            m.mentions("York york YORK new york"),
            vec![
                EntityCount {
                    entity: 1,
                    count: 1
                },
                EntityCount {
                    entity: 3,
                    count: 3
                }
            ]
        );
    }

    #[test]
    fn disambiguators_stop_words_and_minimum_length() {
        let m = matcher(
            &[
                (1, &["Paris (band)"]),
                (2, &["Lilu (mythology)", "U2", "These", "The Who"]),
                (3, &["Alû"]),
            ],
            &config(),
        );
        assert_eq!(
            check(
                &m,
                "Paris played. Lilu is a spirit. U2, these, the who, Alu."
            ),
            vec!["1:Paris", "2:Lilu", "2:the who"]
        );
        let reasons: Vec<(String, String)> = m
            .dropped()
            .iter()
            .map(|d| (d.alias.clone(), d.reason.to_string()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (
                    "U2".to_string(),
                    "2 letters and digits, fewer than the minimum 4".to_string()
                ),
                ("These".to_string(), "a common stop word".to_string()),
                (
                    "Alû".to_string(),
                    "3 letters and digits, fewer than the minimum 4".to_string()
                ),
            ]
        );
    }

    #[test]
    fn an_exact_name_shadows_a_derived_one() {
        let m = matcher(&[(1, &["Paris (band)"]), (2, &["Paris"])], &config());
        assert_eq!(check(&m, "in Paris"), vec!["2:Paris"]);
        // A mention spans its words: the closing parenthesis is not part of it.
        assert_eq!(check(&m, "Paris (band)."), vec!["1:Paris (band"]);
        assert_eq!(
            m.dropped(),
            &[DroppedAlias {
                entity: 1,
                alias: "Paris".to_string(),
                folded: "paris".to_string(),
                reason: DropReason::Shadowed { by: 2 },
            }]
        );
        // Two derived names share the alias: both entities are named.
        let m = matcher(&[(1, &["Paris (band)"]), (2, &["Paris (film)"])], &config());
        assert_eq!(check(&m, "Paris"), vec!["1:Paris", "2:Paris"]);
    }

    #[test]
    fn frequent_aliases_are_capped_and_explained() {
        let mut corpus: Vec<String> = (0..100).map(|i| format!("filler text {i}")).collect();
        for text in corpus.iter_mut().take(2) {
            text.push_str(" about Paris and Time");
        }
        corpus[50].push_str(" Time again");
        corpus[60].push_str(" time");
        let entities: Vec<(u32, Vec<&str>)> = vec![
            (1, vec!["Paris (band)"]),
            (2, vec!["Time"]),
            (3, vec!["Filler"]),
        ];
        let m = MentionMatcher::build_with_corpus(
            entities.clone(),
            &config(),
            corpus.iter().map(String::as_str),
        )
        .unwrap();
        assert_eq!(check(&m, "Paris at Time"), vec!["1:Paris"]);
        let frequent: Vec<String> = m
            .dropped()
            .iter()
            .map(|d| format!("{} {}: {}", d.entity, d.alias, d.reason))
            .collect();
        assert_eq!(
            frequent,
            vec![
                "3 Filler: found in 100 of 100 fragments, more than the 2.0% allowed",
                "2 Time: found in 4 of 100 fragments, more than the 2.0% allowed",
            ]
        );
        // The default floor keeps aliases found in a handful of fragments.
        let m = MentionMatcher::build_with_corpus(
            entities,
            &MentionConfig::default(),
            corpus.iter().map(String::as_str),
        )
        .unwrap();
        assert_eq!(check(&m, "Paris at Time"), vec!["1:Paris", "2:Time"]);
    }

    #[test]
    fn counts_merge_across_shards() {
        let m = matcher(&[(1, &["alpha beta"]), (2, &["beta gamma"])], &config());
        let mut a = m.new_counts();
        let mut b = m.new_counts();
        m.count_fragment(&mut a, "alpha beta gamma");
        m.count_fragment(&mut b, "beta gamma, beta gamma");
        m.count_fragment(&mut b, "nothing");
        a.merge(&b);
        assert_eq!(a.fragments(), 3);
        let index = |name: &str| m.aliases().position(|x| x == name).unwrap();
        assert_eq!(a.of_alias(index("alpha beta")), 1);
        assert_eq!(a.of_alias(index("beta gamma")), 2);
        assert_eq!(a.of_alias(99), 0);
    }

    #[test]
    fn empty_matchers_and_texts() {
        let m = matcher(&[], &config());
        assert!(m.find("anything at all").is_empty());
        let m = matcher(&[(1, &["Word", "!!"])], &config());
        assert!(m.find("").is_empty());
        assert!(m.find(" ,,, ").is_empty());
        assert_eq!(m.dropped()[0].reason, DropReason::Empty);
        // A megabyte alias is not a name, and would take the automaton hours to build: it is
        // dropped before the build (no clock is read: the test would not finish otherwise).
        let long = "a ".repeat(500_000);
        let m = MentionMatcher::build([(1u32, [long.as_str(), "Fine Name"])], &config()).unwrap();
        assert_eq!(
            m.dropped()[0].reason,
            DropReason::TooLong {
                chars: 999_999,
                max: MAX_ALIAS_CHARS
            }
        );
        assert_eq!(m.aliases().collect::<Vec<_>>(), vec!["fine name"]);
        let nan = MentionConfig {
            max_df: f64::NAN,
            ..config()
        };
        let m =
            MentionMatcher::build_with_corpus(vec![(1, vec!["word"])], &nan, ["word"; 5]).unwrap();
        assert_eq!(check(&m, "word"), vec!["1:word"]);
    }

    /// Brute force: at each word, the longest alias whose words follow; then skip past it.
    fn brute_force(aliases: &[(u32, String)], text: &str) -> Vec<(u32, String)> {
        let words: Vec<String> = fold(text).split(' ').map(str::to_string).collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < words.len() && !words[i].is_empty() {
            let best = aliases
                .iter()
                .filter_map(|(e, a)| {
                    let aw: Vec<&str> = a.split(' ').collect();
                    let fits = words.len() >= i + aw.len()
                        && aw.iter().zip(&words[i..]).all(|(x, y)| x == y);
                    fits.then_some((aw.len(), *e, a.clone()))
                })
                .max_by_key(|(len, e, _)| (*len, std::cmp::Reverse(*e)));
            match best {
                Some((len, _, a)) => {
                    for (e, b) in aliases {
                        if *b == a {
                            out.push((*e, a.clone()));
                        }
                    }
                    i += len;
                }
                None => i += 1,
            }
        }
        out
    }

    /// Mentions as (entity, folded text matched).
    type Pairs = Vec<(u32, String)>;

    /// The mentions a matcher over `names` (run hashes masked by `mask`) finds in `text`, and
    /// the brute force's, each sorted.
    fn matcher_and_brute_force(names: &[String], text: &str, mask: u64) -> (Pairs, Pairs) {
        let cfg = MentionConfig {
            min_chars: 1,
            stop_words: false,
            ..config()
        };
        let entities: Vec<(u32, Vec<String>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (i as u32, vec![n.clone()]))
            .collect();
        let m = MentionMatcher::build_masked(entities.clone(), &cfg, mask).unwrap();
        let mut aliases: Pairs = entities.iter().map(|(e, n)| (*e, fold(&n[0]))).collect();
        aliases.sort();
        aliases.dedup();
        let mut fast: Pairs = m
            .find(text)
            .into_iter()
            .map(|x| (x.entity, fold(&text[x.range])))
            .collect();
        let mut slow = brute_force(&aliases, text);
        fast.sort();
        slow.sort();
        (fast, slow)
    }

    proptest! {
        #[test]
        fn fast_path_equals_brute_force(
            names in proptest::collection::vec("(ab|abc|cd|é|E)( (ab|abc|cd|é|E)){0,2}", 1..6),
            text in "((ab|abc|cd|é|E|x)(-| |, |'|\\.)){0,12}",
        ) {
            let (fast, slow) = matcher_and_brute_force(&names, &text, u64::MAX);
            prop_assert_eq!(fast, slow);
        }

        /// With run hashes of two bits, nearly every run collides with another: the byte
        /// comparison alone decides, and the matches are still exactly the brute force's.
        #[test]
        fn colliding_hashes_find_what_brute_force_finds(
            names in proptest::collection::vec("(ab|abc|cd|é|E)( (ab|abc|cd|é|E)){0,2}", 1..6),
            text in "((ab|abc|cd|é|E|x)(-| |, |'|\\.)){0,12}",
        ) {
            let (fast, slow) = matcher_and_brute_force(&names, &text, 0b11);
            prop_assert_eq!(fast, slow);
        }

        /// The frequency cap leaves a matcher that finds what one built from the kept
        /// aliases alone finds.
        #[test]
        fn a_capped_matcher_finds_what_one_of_its_kept_aliases_finds(
            names in proptest::collection::vec("(ab|abc|cd|é|E)( (ab|abc|cd|é|E)){0,2}", 1..8),
            texts in proptest::collection::vec("((ab|abc|cd|é|E|x)(-| |, |'|\\.)){0,12}", 1..6),
        ) {
            let cfg = MentionConfig { min_chars: 1, stop_words: false, max_df: 0.5, df_floor: 1 };
            let entities: Vec<(u32, Vec<String>)> =
                names.iter().enumerate().map(|(i, n)| (i as u32, vec![n.clone()])).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            let capped =
                MentionMatcher::build_with_corpus(entities.clone(), &cfg, texts.iter().copied())
                    .unwrap();
            let kept: Vec<(u32, Vec<String>)> = (0..capped.aliases().len())
                .flat_map(|a| capped.alias_owners(a).iter().map(|(e, n)| (*e, vec![n.clone()])))
                .collect();
            let plain = MentionMatcher::build(kept, &cfg).unwrap();
            prop_assert_eq!(capped.aliases().collect::<Vec<_>>(), plain.aliases().collect::<Vec<_>>());
            for text in texts {
                let spans = |m: &MentionMatcher| -> Vec<(u32, Range<usize>)> {
                    m.find(text).into_iter().map(|x| (x.entity, x.range)).collect()
                };
                prop_assert_eq!(spans(&capped), spans(&plain));
            }
        }

        /// Counting that keeps its hits counts what counting alone counts, and the mentions
        /// chosen from the hits under the cap are the ones the capped matcher's own scan
        /// finds, with distinct run hashes and with nearly all of them colliding.
        #[test]
        fn mentions_from_kept_hits_equal_a_capped_scan(
            names in proptest::collection::vec("(ab|abc|cd|é|E)( (ab|abc|cd|é|E)){0,2}", 1..8),
            texts in proptest::collection::vec("((ab|abc|cd|é|E|x)(-| |, |'|\\.)){0,12}", 1..6),
            mask in prop_oneof![Just(u64::MAX), Just(0b11u64)],
        ) {
            let cfg = MentionConfig { min_chars: 1, stop_words: false, max_df: 0.5, df_floor: 1 };
            let entities: Vec<(u32, Vec<String>)> =
                names.iter().enumerate().map(|(i, n)| (i as u32, vec![n.clone()])).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            let m = MentionMatcher::build_masked(entities, &cfg, mask).unwrap();
            let counted = m.count_all(&texts);
            let (counts, hits) = m.count_and_hit_all(&texts);
            prop_assert_eq!(counts.fragments(), counted.fragments());
            for alias in 0..m.aliases().len() {
                prop_assert_eq!(counts.of_alias(alias), counted.of_alias(alias));
            }
            let (capped, renumbered) = m.apply_df_cap_renumbered(&counts).unwrap();
            for (text, found) in texts.iter().zip(&hits) {
                prop_assert_eq!(capped.mentions_of_hits(found, &renumbered), capped.mentions(text));
            }
        }

        /// ASCII text folds the same without the analyzer as with it.
        #[test]
        fn ascii_words_are_the_analyzers_words(text in "[ -~\t\n]{0,80}") {
            let fast = Words::of_ascii(&text);
            let mut analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(LowerCaser)
                .filter(AsciiFoldingFilter)
                .build();
            let mut stream = analyzer.token_stream(&text);
            let mut slow = Vec::new();
            while stream.advance() {
                let t = stream.token();
                slow.push((t.text.clone(), t.offset_from..t.offset_to));
            }
            let fast: Vec<(String, Range<usize>)> = fast
                .spans
                .iter()
                .map(|(s, e, r)| (fast.padded[*s..*e].to_string(), r.clone()))
                .collect();
            prop_assert_eq!(fast, slow);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC*", alias in "\\PC{0,12}") {
            let cfg = MentionConfig { min_chars: 1, stop_words: false, ..config() };
            let m = MentionMatcher::build([(7u32, [alias.as_str()])], &cfg).unwrap();
            for x in m.find(&text) {
                prop_assert!(text.get(x.range.clone()).is_some());
            }
            let _ = m.mentions(&text);
        }
    }
}
