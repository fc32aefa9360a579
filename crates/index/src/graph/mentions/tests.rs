//! The matcher on names, aliases and texts: folding, filters, the scan, the counts.

use super::*;
use proptest::prelude::*;
use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, SimpleTokenizer, TextAnalyzer};

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
    // A cap of 2%: Paris, in 2 of 100 fragments, is at it; Time, in 4, is past it.
    let capped = MentionConfig {
        max_df: 0.02,
        ..config()
    };
    let m = MentionMatcher::build_with_corpus(
        entities.clone(),
        &capped,
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
    let m = MentionMatcher::build_with_corpus(vec![(1, vec!["word"])], &nan, ["word"; 5]).unwrap();
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
                let fits =
                    words.len() >= i + aw.len() && aw.iter().zip(&words[i..]).all(|(x, y)| x == y);
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
