//! Human-readable output of the `finder` commands.

use std::fmt::Write;

use finder_core::{ChannelStatus, SearchResponse};
use finder_index::{RunReport, Status};

pub fn search(response: &SearchResponse, explain: bool) -> String {
    let mut out = String::new();
    if response.hits.is_empty() {
        let _ = writeln!(out, "no results for {:?}", response.query);
    }
    for hit in &response.hits {
        let _ = writeln!(
            out,
            "{:>2}. {}  [{:.3}]  {}",
            hit.rank, hit.envelope.title, hit.score, hit.id
        );
        if !hit.summary.is_empty() {
            let _ = writeln!(out, "    {}", hit.summary);
        }
        for hint in &hit.hints {
            let e = hint.extent;
            let mut lines = if e.line_start == e.line_end {
                format!("L{}", e.line_start)
            } else {
                format!("L{}-{}", e.line_start, e.line_end)
            };
            if let Some(page) = e.page {
                lines = format!("p{page} {lines}");
            }
            let _ = writeln!(out, "    {lines:>9}: {}", hint.preview);
        }
        if explain {
            let x = &hit.explain;
            let _ = writeln!(
                out,
                "    explain: raw {:.5} / {:.5}",
                x.raw, x.normalized_by
            );
            for p in &x.parts {
                let lists: Vec<String> = p
                    .lists
                    .iter()
                    .map(|l| {
                        format!(
                            "{} #{} ({:.3}) → {:.5}",
                            l.channel.name(),
                            l.rank,
                            l.score,
                            l.share
                        )
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "      fragment {} × {}: seed {:.5} = {}",
                    p.fragment,
                    p.weight,
                    p.seed,
                    lists.join(" + ")
                );
                if p.boost > 0.0 {
                    let _ = writeln!(
                        out,
                        "        + boost {:.5} {}",
                        p.boost,
                        p.via.as_deref().unwrap_or("")
                    );
                }
            }
        }
        out.push('\n');
    }
    let d = &response.diagnostics;
    let channels: Vec<String> = d
        .channels
        .iter()
        .map(|c| match c.status {
            // A channel whose result joined another list says what it did instead.
            ChannelStatus::Ran => match &c.reason {
                Some(note) => format!("{}: {note}", c.channel.name()),
                None => format!("{} {} hits", c.channel.name(), c.hits),
            },
            _ => format!(
                "{} {:?}: {}",
                c.channel.name(),
                c.status,
                c.reason.as_deref().unwrap_or("")
            )
            .to_lowercase(),
        })
        .collect();
    let _ = writeln!(
        out,
        "{} of {} sources · {:.2} ms · {}",
        response.hits.len(),
        d.ranked_sources,
        d.total_ms,
        channels.join(" · ")
    );
    out
}

pub fn status(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "index:     {}", s.path.display());
    let _ = writeln!(out, "sources:   {}", s.sources);
    let _ = writeln!(out, "fragments: {}", s.fragments);
    let _ = writeln!(out, "segments:  {}", s.segments);
    if s.page_files < s.segments {
        let _ = writeln!(
            out,
            "pages:     {} of {} segments have page files; the others' pages are read from the \
             store until the next `finder index`",
            s.page_files, s.segments
        );
    }
    let _ = writeln!(
        out,
        "size:      {:.1} MiB",
        s.size_bytes as f64 / (1024.0 * 1024.0)
    );
    if s.languages.is_empty() {
        let _ = writeln!(out, "language:  {}", s.settings.language);
    } else {
        let _ = writeln!(
            out,
            "language:  {} (detected besides English: {})",
            s.settings.language,
            s.languages.join(", ")
        );
    }
    if s.analysis != finder_index::ANALYSIS {
        let _ = writeln!(
            out,
            "analysis:  version {} (current {}): queried as written; the next `finder index` \
             rebuilds it",
            s.analysis,
            finder_index::ANALYSIS
        );
    }
    for o in &s.origins {
        let _ = writeln!(out, "input:     {o}");
    }
    if let Some(run) = &s.indexing {
        let _ = writeln!(out, "indexing:  {}", run.describe());
    }
    match &s.vectors {
        Some(v) => {
            let state = match &v.build {
                Some(run) => format!("; build {}", run.describe()),
                None if v.pending => "; build interrupted".to_string(),
                None => String::new(),
            };
            let model = match v.model_id.as_str() {
                "" => String::new(),
                id => format!(" ({id})"),
            };
            let _ = writeln!(out, "vectors:   {}/{}{model}{state}", v.done, v.total);
        }
        None => {
            let _ = writeln!(out, "vectors:   none (lexical only)");
        }
    }
    if let Some(g) = &s.graph {
        let _ = writeln!(out, "graph:     {}", graph_state(g));
    }
    let r = s.last_run;
    let _ = writeln!(
        out,
        "last run:  {} added, {} updated, {} removed, {} unchanged, {} problems",
        r.added, r.updated, r.removed, r.unchanged, r.problems
    );
    out
}

pub fn index_report(r: &RunReport, secs: f64) -> String {
    let c = r.counts;
    let mut line = format!(
        "{} added, {} updated, {} removed, {} unchanged",
        c.added, c.updated, c.removed, c.unchanged
    );
    if c.kept > 0 {
        let _ = write!(line, ", {} kept (input failed to read)", c.kept);
    }
    if !r.problems.is_empty() {
        let _ = write!(line, ", {} problems", r.problems.len());
    }
    if r.rebuilt {
        line.push_str(" (rebuilt: index-time settings changed)");
    }
    let _ = write!(
        line,
        "\n{} sources, {} fragments indexed in {secs:.1} s",
        r.sources, r.fragments
    );
    if let Some(g) = &r.graph {
        let _ = write!(
            line,
            "\ngraph: {} nodes, {} edges; {} of {} texts read ({:.2} s)",
            g.fragments + g.entities,
            g.edges,
            g.texts_read,
            g.fragments,
            g.seconds
        );
    }
    line
}

pub fn vector_report(outcome: &crate::models::VectorOutcome) -> String {
    match outcome {
        crate::models::VectorOutcome::Built(r) => format!(
            "vectors: {} embedded, {} reused, {} removed; {} in the index ({}, {:.1} s)",
            r.embedded, r.reused, r.removed, r.total, r.model_id, r.seconds
        ),
        crate::models::VectorOutcome::Skipped(why) => {
            format!("vectors: skipped, lexical search only ({why})")
        }
    }
}

/// `finder status --files`: one line per source (state, id, fragments and vectors, and the
/// reason or rule), then the totals.
pub fn files(report: &finder_index::freshness::FilesReport) -> String {
    use finder_index::freshness::FileState;
    let mut out = String::new();
    for f in &report.files {
        let detail = match &f.state {
            FileState::Failed { reason } => format!("  ({reason})"),
            FileState::Ignored { rule } => format!("  ({rule})"),
            _ if f.fragments > 0 => {
                format!("  {} fragments, {} with vectors", f.fragments, f.vectors)
            }
            _ => String::new(),
        };
        let warning = f
            .problem
            .as_deref()
            .map_or(String::new(), |p| format!("  (warning: {p})"));
        let _ = writeln!(out, "{:<8} {}{detail}{warning}", f.state.name(), f.id);
    }
    let totals: Vec<String> = report
        .totals
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    let _ = writeln!(
        out,
        "{}",
        if totals.is_empty() {
            "no sources".to_string()
        } else {
            totals.join(", ")
        }
    );
    out
}

/// Whether the graph describes the last commit, in words.
pub fn graph_state(g: &finder_index::GraphStatus) -> &'static str {
    if g.current && g.other_settings {
        "current, built with other [graph] settings than these (an index run with these \
         rebuilds it)"
    } else if g.current {
        "current"
    } else {
        "behind the last commit (the next `finder index` rebuilds it)"
    }
}
