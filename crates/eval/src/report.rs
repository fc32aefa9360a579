//! The evaluation report: its JSON shape, its human table, and the latency recorder behind it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use finder_core::Diagnostics;
use serde::{Deserialize, Serialize};

use crate::metrics::{percentile, Metrics};

/// Median and 95th percentile of a set of timings, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
}

impl Percentiles {
    /// Summarises `samples` (any order); zeros when empty.
    pub fn of(samples: &[f64]) -> Percentiles {
        Percentiles {
            p50: percentile(samples, 50.0),
            p95: percentile(samples, 95.0),
        }
    }
}

/// One named configuration's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub metrics: Metrics,
    pub latency_ms: Percentiles,
    pub stages_ms: BTreeMap<String, Percentiles>,
    /// The effective settings the run used, as free-form JSON.
    pub settings: serde_json::Value,
    /// Caveats worth reading next to the numbers, e.g. a channel that ran degraded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl RunReport {
    /// A run with latencies taken from `latency`.
    pub fn new(metrics: Metrics, latency: &LatencyRecorder, settings: serde_json::Value) -> Self {
        RunReport {
            metrics,
            latency_ms: latency.latency(),
            stages_ms: latency.stages(),
            settings,
            notes: Vec::new(),
        }
    }
}

/// The whole report for one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub dataset: String,
    /// Number of evaluated queries.
    pub queries: usize,
    pub runs: BTreeMap<String, RunReport>,
    /// The order runs were requested in, for human output; JSON consumers key by name.
    #[serde(skip)]
    pub order: Vec<String>,
}

impl Report {
    pub fn new(dataset: impl Into<String>, queries: usize) -> Report {
        Report {
            dataset: dataset.into(),
            queries,
            runs: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// Adds a run; a run with the same name is replaced and keeps its original position.
    pub fn add_run(&mut self, name: impl Into<String>, run: RunReport) {
        let name = name.into();
        if self.runs.insert(name.clone(), run).is_none() {
            self.order.push(name);
        }
    }

    /// Runs in requested order, then any not listed in `order` (e.g. after deserialising,
    /// which leaves `order` empty) by name.
    pub fn ordered_runs(&self) -> Vec<(&str, &RunReport)> {
        let mut out: Vec<(&str, &RunReport)> = Vec::with_capacity(self.runs.len());
        for name in &self.order {
            if let Some(run) = self.runs.get(name) {
                if !out.iter().any(|(n, _)| n == name) {
                    out.push((name, run));
                }
            }
        }
        for (name, run) in &self.runs {
            if !self.order.contains(name) {
                out.push((name, run));
            }
        }
        out
    }

    /// A fixed-width table, one row per run, followed by each run's stage timings and notes.
    pub fn to_human(&self) -> String {
        let runs = self.ordered_runs();
        let width = runs
            .iter()
            .map(|(n, _)| n.chars().count())
            .max()
            .unwrap_or(0)
            .max(3);
        let mut out = String::new();
        let _ = writeln!(out, "dataset: {} ({} queries)", self.dataset, self.queries);
        let _ = writeln!(
            out,
            "{:<width$}  {:>7}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}  {:>8}  {:>8}",
            "run", "nDCG@10", "R@2", "R@5", "R@10", "R@100", "MRR@10", "p50 ms", "p95 ms"
        );
        for (name, run) in &runs {
            let m = &run.metrics;
            let _ = writeln!(
                out,
                "{name:<width$}  {:>7.4}  {:>6.4}  {:>6.4}  {:>6.4}  {:>6.4}  {:>6.4}  {:>8.2}  {:>8.2}",
                m.ndcg_10,
                m.recall_2,
                m.recall_5,
                m.recall_10,
                m.recall_100,
                m.mrr_10,
                run.latency_ms.p50,
                run.latency_ms.p95
            );
        }
        for (name, run) in &runs {
            if run.stages_ms.is_empty() && run.notes.is_empty() {
                continue;
            }
            let _ = writeln!(out);
            let _ = writeln!(out, "{name}:");
            let stage_width = run
                .stages_ms
                .keys()
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0);
            for (stage, p) in &run.stages_ms {
                let _ = writeln!(
                    out,
                    "  {stage:<stage_width$}  p50 {:>8.2} ms  p95 {:>8.2} ms",
                    p.p50, p.p95
                );
            }
            for note in &run.notes {
                let _ = writeln!(out, "  note: {note}");
            }
        }
        out
    }
}

/// Collects per-query timings while a run executes and summarises them into percentiles.
#[derive(Debug, Clone, Default)]
pub struct LatencyRecorder {
    totals: Vec<f64>,
    stages: BTreeMap<String, Vec<f64>>,
}

impl LatencyRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one query: its end-to-end time and its stage times. A stage named more than
    /// once (e.g. run per channel) is summed, since the report describes time per query.
    pub fn record<S: AsRef<str>>(
        &mut self,
        total_ms: f64,
        stages: impl IntoIterator<Item = (S, f64)>,
    ) {
        self.totals.push(total_ms);
        let mut this_query: BTreeMap<String, f64> = BTreeMap::new();
        for (stage, ms) in stages {
            *this_query.entry(stage.as_ref().to_string()).or_insert(0.0) += ms;
        }
        for (stage, ms) in this_query {
            self.stages.entry(stage).or_default().push(ms);
        }
    }

    /// Records one query from the pipeline's own diagnostics.
    pub fn record_diagnostics(&mut self, diagnostics: &Diagnostics) {
        self.record(
            diagnostics.total_ms,
            diagnostics.stages.iter().map(|s| (s.stage.as_str(), s.ms)),
        );
    }

    /// Number of queries recorded.
    pub fn len(&self) -> usize {
        self.totals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }

    /// p50/p95 of the per-query totals.
    pub fn latency(&self) -> Percentiles {
        Percentiles::of(&self.totals)
    }

    /// The times of stage `name`, one per query in which it ran, in query order; empty when
    /// it never ran.
    pub fn stage_samples(&self, name: &str) -> &[f64] {
        self.stages.get(name).map_or(&[], Vec::as_slice)
    }

    /// p50/p95 per stage, over the queries in which that stage ran.
    pub fn stages(&self) -> BTreeMap<String, Percentiles> {
        self.stages
            .iter()
            .map(|(name, samples)| (name.clone(), Percentiles::of(samples)))
            .collect()
    }
}

/// Adds to `notes` each channel the query's diagnostics report degraded, as
/// "`channel` degraded: reason", once per distinct note: a run's notes say which channels did
/// not run as asked without repeating it for every query.
pub fn note_degraded(diagnostics: &Diagnostics, notes: &mut Vec<String>) {
    for c in diagnostics.degraded() {
        let note = format!(
            "{} degraded: {}",
            c.channel.name(),
            c.reason.as_deref().unwrap_or("")
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use finder_core::StageTime;
    use serde_json::json;

    fn metrics(x: f64) -> Metrics {
        Metrics {
            ndcg_10: x,
            recall_2: x,
            recall_5: x,
            recall_10: x,
            recall_100: x,
            mrr_10: x,
        }
    }

    fn sample_report() -> Report {
        let mut lat = LatencyRecorder::new();
        for i in 1..=5 {
            let ms = f64::from(i);
            lat.record(ms * 2.0, [("lexical", ms), ("fuse", 0.5)]);
        }
        let mut report = Report::new("scifact", 300);
        let mut hybrid = RunReport::new(metrics(0.7), &lat, json!({"rrf_k": 60}));
        hybrid
            .notes
            .push("vector channel degraded: no embeddings".into());
        report.add_run("zeta-bm25", RunReport::new(metrics(0.6), &lat, json!({})));
        report.add_run("hybrid", hybrid);
        report
    }

    #[test]
    fn json_has_the_agreed_shape() {
        let report = sample_report();
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["dataset"], "scifact");
        assert_eq!(v["queries"], 300);
        assert!(v.get("order").is_none());
        let run = &v["runs"]["hybrid"];
        assert_eq!(run["metrics"]["ndcg@10"], 0.7);
        assert_eq!(run["metrics"]["recall@100"], 0.7);
        assert_eq!(run["latency_ms"]["p50"], 6.0);
        assert_eq!(run["stages_ms"]["lexical"]["p50"], 3.0);
        assert!((run["stages_ms"]["lexical"]["p95"].as_f64().unwrap() - 4.8).abs() < 1e-9);
        assert_eq!(run["settings"]["rrf_k"], 60);
        assert_eq!(run["notes"][0], "vector channel degraded: no embeddings");
        assert!(
            v["runs"]["zeta-bm25"].get("notes").is_none(),
            "empty notes are omitted"
        );
        let keys: Vec<&String> = run.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5);
    }

    #[test]
    fn round_trips_and_keeps_a_usable_order() {
        let report = sample_report();
        let text = serde_json::to_string_pretty(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.runs, report.runs);
        assert!(back.order.is_empty());
        let names: Vec<&str> = back.ordered_runs().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["hybrid", "zeta-bm25"]);
    }

    #[test]
    fn human_table_follows_requested_order() {
        let mut report = sample_report();
        report.add_run(
            "zeta-bm25",
            RunReport::new(metrics(0.65), &LatencyRecorder::new(), json!({})),
        );
        let text = report.to_human();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "dataset: scifact (300 queries)");
        assert!(lines[1].starts_with("run        nDCG@10"), "{text}");
        assert!(lines[2].starts_with("zeta-bm25   0.6500"), "{text}");
        assert!(lines[3].starts_with("hybrid      0.7000"), "{text}");
        assert!(lines[3].ends_with("    6.00      9.60"), "{text}");
        assert_eq!(lines[1].len(), lines[2].len());
        assert!(
            text.contains("hybrid:\n  fuse     p50     0.50 ms  p95     0.50 ms\n"),
            "{text}"
        );
        assert!(text.contains("  note: vector channel degraded"), "{text}");
        assert!(
            !text.contains("zeta-bm25:"),
            "a run with no stages or notes gets no block"
        );
    }

    #[test]
    fn recorder_sums_repeated_stages_and_reads_diagnostics() {
        let mut lat = LatencyRecorder::new();
        assert!(lat.is_empty());
        assert_eq!(lat.latency(), Percentiles::default());
        let diagnostics = Diagnostics {
            stages: vec![
                StageTime {
                    stage: "lexical".into(),
                    ms: 1.0,
                },
                StageTime {
                    stage: "lexical".into(),
                    ms: 2.0,
                },
                StageTime {
                    stage: "fuse".into(),
                    ms: 0.25,
                },
            ],
            total_ms: 4.0,
            ..Diagnostics::default()
        };
        lat.record_diagnostics(&diagnostics);
        lat.record(10.0, Vec::<(String, f64)>::new());
        assert_eq!(lat.len(), 2);
        let stages = lat.stages();
        assert_eq!(stages["lexical"], Percentiles { p50: 3.0, p95: 3.0 });
        assert_eq!(stages["fuse"].p50, 0.25);
        assert_eq!(lat.latency().p50, 7.0);
        // one sample per query the stage ran in, a repeated stage summed
        assert_eq!(lat.stage_samples("lexical"), [3.0]);
        assert!(lat.stage_samples("graph.boost").is_empty());
    }
}
