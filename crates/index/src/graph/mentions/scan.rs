//! Scanning texts for mentions: words extended run by run through the tables, the
//! leftmost-longest choice, the counts per entity, and the document frequencies.

use std::ops::Range;

use super::fold::Words;
use super::table::{extend, word_hash, WordTable, AHEAD, NO_ALIAS, RUN_SEED};
use super::{DfCounts, EntityCount, Hit, Mention, MentionMatcher, Renumbered};

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

/// Of the alias occurrences `found` (`start..end` in the padded folded text, alias), in any
/// order, the leftmost-longest ones that do not overlap, in text order.
pub(super) fn leftmost_longest(
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
pub(super) fn entity_counts(mut ids: Vec<u32>) -> Vec<EntityCount> {
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

impl MentionMatcher {
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
    pub(super) fn count_words(
        &self,
        counts: &mut DfCounts,
        words: &Words,
        mut keep: impl FnMut(Hit),
    ) {
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

    /// Calls `hit(alias, span)` for every whole-word alias occurrence, overlapping ones
    /// included; `span` is in the padded folded text, padding spaces included.
    pub(super) fn scan(&self, words: &Words, mut hit: impl FnMut(usize, Range<usize>)) {
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
