//! The MiniLM backend on the real model (installed by `finder model install`; in CI by
//! `scripts/test.sh`). Without the model these tests say so and pass only outside CI.

mod http;
mod rerank;

use finder_embed::{default_model_dir, verify_minilm, CandleMiniLm, Embedder};

fn model() -> Option<Embedder> {
    let dir = default_model_dir();
    match verify_minilm(&dir) {
        Ok(()) => Some(Embedder::minilm(&dir, 256).expect("model loads")),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("CI must have the model installed: {e}"),
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn paraphrase_is_closer_than_topic_neighbour() {
    let Some(m) = model() else { return };
    let v = m
        .embed(&[
            "refresh token expired; reauthenticate the client",
            "restore a session by signing in again when credentials are no longer valid",
            "configure connection pooling and request retries",
        ])
        .unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].len(), 384);
    let near = dot(&v[0], &v[1]);
    let far = dot(&v[0], &v[2]);
    assert!((near - 0.53).abs() < 0.05, "paraphrase cosine {near}");
    assert!((far - 0.27).abs() < 0.05, "unrelated cosine {far}");
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-4, "normalised");
    }
}

#[test]
fn padding_does_not_change_a_vector() {
    let Some(m) = model() else { return };
    let short = "database backups";
    let alone = m.embed(&[short]).unwrap();
    let long = "a much longer sentence that forces padding of the short one in the same batch, with many words";
    let batched = m.embed(&[short, long]).unwrap();
    assert_eq!(alone[0], batched[0], "batching changed the vector");
}

/// Finder's integer encoder against candle's f32 BERT, the model as published: the same
/// vectors to within quantization (texts short and long, one past the 256-token window).
#[test]
fn encoder_matches_the_f32_reference() {
    let Some(m) = model() else { return };
    let reference = CandleMiniLm::load(&default_model_dir(), 256).expect("reference loads");
    let long = "Embedding windows cover every part of a long passage. ".repeat(40);
    let texts = [
        "database backups",
        "Café crème brûlée: ½ cup of sugar, 3 eggs (ünïcödé).",
        "The mitochondria is the powerhouse of the cell; ATP synthase couples proton flow.",
        "fn main() { println!(\"hello\"); } // code is text too",
        long.as_str(),
    ];
    let ours = m.embed(&texts).unwrap();
    let want = reference.embed(&texts).unwrap();
    for ((text, a), b) in texts.iter().zip(&ours).zip(&want) {
        let cos = dot(a, b);
        assert!(cos > 0.9999, "cosine {cos} to the reference for {text:.40}");
    }
}

/// A text past the 256-token window is embedded window by window: the first window is the
/// vector `embed` gives, each later one is the model's reading of a later stretch (the same
/// as embedding that stretch alone, to within the window's overlap), and a short text is one
/// window.
#[test]
fn a_long_text_is_read_window_by_window() {
    use finder_core::Embed;
    let Some(m) = model() else { return };
    let opening =
        "Glaciers carve valleys as they move downhill under their own weight. ".repeat(20);
    let closing = "The caldera filled with rain after the eruption. Tephra and ash covered the \
                   fields for miles, and lava flows cut the road to the village. Volcanologists \
                   measured the sulfur dioxide venting from the crater for weeks.";
    let long = format!("{opening}{closing}");
    let windows = m.embed_windows(&[long.as_str(), closing]).unwrap();
    assert_eq!(windows[1].len(), 1, "a short text is one window");
    assert_eq!(windows[1][0], m.embed(&[closing]).unwrap()[0]);
    let parts = &windows[0];
    assert!(
        (2..=finder_embed::MAX_WINDOWS).contains(&parts.len()),
        "{}",
        parts.len()
    );
    assert_eq!(parts[0], m.embed(&[long.as_str()]).unwrap()[0]);
    // The closing sentence is read only by the last window.
    let last = parts.last().unwrap();
    let to_closing = |v: &[f32]| dot(v, &windows[1][0]);
    assert!(
        to_closing(last) > to_closing(&parts[0]) + 0.2,
        "{} vs {}",
        to_closing(last),
        to_closing(&parts[0])
    );
    for v in parts {
        assert_eq!(v.len(), 384);
        assert!((dot(v, v) - 1.0).abs() < 1e-4, "normalised");
    }
}
