//! The operations behind the API and the MCP tools: search, context, recommend and status
//! over one space. Synchronous (the index is); the HTTP layer runs them on blocking threads.

use std::collections::HashSet;

use finder_core::{Hit, SearchResponse, Settings};
use finder_store::Store;
use serde_json::Value;

use crate::access::Grants;
use crate::documents;
use crate::error::{Result, ServerError};
use crate::space::{store_err, Space, Spaces};
use crate::wire::{
    ContextPiece, ContextRequest, ContextResult, Facets, Overrides, Progress, RecommendRequest,
    RecommendResult, SearchRequest, SearchResult, SourceLines, SpaceSummary, StatusResult,
    CHARS_PER_TOKEN, DEFAULT_BUDGET_CHARS, MAX_BUDGET_CHARS, MAX_LIMIT, MAX_OFFSET,
    MIN_BUDGET_CHARS,
};

/// Longest query text, in characters.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// Longest query vector accepted.
const MAX_VECTOR_DIMS: usize = 4_096;

/// The most source ids a search may be scoped to.
const MAX_SCOPE_IDS: usize = 10_000;

pub fn search(space: &Space, request: &SearchRequest) -> Result<SearchResult> {
    check_query(&request.query)?;
    check_page(request.limit, request.offset)?;
    let finder = space.finder()?;
    let mut extra = Vec::new();
    if let Some(sort) = &request.sort {
        let sort = serde_json::to_string(sort).map_err(ServerError::internal)?;
        extra.push(format!("refine.sort={sort}"));
    }
    if let Some(min) = request.min_score {
        extra.push(format!("refine.min_score={min}"));
    }
    if request.prefilter {
        extra.push("refine.prefilter=true".to_string());
    }
    let settings = settings(space, &finder, &request.settings, &extra)?;
    if request
        .scope
        .as_ref()
        .is_some_and(|s| s.len() > MAX_SCOPE_IDS)
    {
        return Err(ServerError::invalid_field(
            "scope",
            format!("`scope` holds at most {MAX_SCOPE_IDS} ids"),
        ));
    }
    if let Some(v) = &request.vector {
        if v.is_empty() || v.len() > MAX_VECTOR_DIMS || v.iter().any(|x| !x.is_finite()) {
            return Err(ServerError::invalid_field(
                "vector",
                format!("`vector` must hold 1 to {MAX_VECTOR_DIMS} finite numbers"),
            ));
        }
    }
    let query = finder_core::Query {
        text: request.query.clone(),
        vector: request.vector.clone(),
        offset: request.offset,
        limit: request.limit,
        filters: request.filters.clone(),
        scope: request.scope.clone(),
        user: request.user.clone(),
        like: None,
        tags: request.tags.clone(),
        date_from: date_bound("date_from", request.date_from.as_deref(), false)?,
        date_to: date_bound("date_to", request.date_to.as_deref(), true)?,
        path_prefix: request.path_prefix.clone(),
    };
    let response = finder.query(&query, &settings).map_err(store_err(space))?;
    Ok(search_result(space, response))
}

pub fn context(space: &Space, request: &ContextRequest) -> Result<ContextResult> {
    check_query(&request.query)?;
    check_page(request.limit, 0)?;
    let budget = match (request.budget_chars, request.budget_tokens) {
        (Some(_), Some(_)) => {
            return Err(ServerError::invalid(
                "give `budget_chars` or `budget_tokens`, not both",
            ))
        }
        (Some(c), None) => c,
        (None, Some(t)) => t.saturating_mul(CHARS_PER_TOKEN),
        (None, None) => DEFAULT_BUDGET_CHARS,
    };
    if !(MIN_BUDGET_CHARS..=MAX_BUDGET_CHARS).contains(&budget) {
        return Err(ServerError::invalid_field(
            "budget_chars",
            format!(
                "budget of {budget} characters is outside {MIN_BUDGET_CHARS}–{MAX_BUDGET_CHARS}"
            ),
        ));
    }
    let finder = space.finder()?;
    // Longer passages serve a prompt better than the page's short previews, unless the
    // caller chose a preview length.
    let preview = (budget / 5).clamp(400, 2_000);
    let extra = if request.settings.contains_key("finder.preview_chars") {
        vec![]
    } else {
        vec![format!("finder.preview_chars={preview}")]
    };
    let settings = settings(space, &finder, &request.settings, &extra)?;
    let response = finder
        .search(&request.query, &settings, 0, request.limit)
        .map_err(store_err(space))?;
    Ok(pack_context(space.name(), response, budget))
}

pub fn recommend(space: &Space, request: &RecommendRequest) -> Result<RecommendResult> {
    check_page(request.limit, 0)?;
    if request.target.trim().is_empty() {
        return Err(ServerError::invalid_field(
            "target",
            "the target id is empty",
        ));
    }
    let finder = space.finder()?;
    // An unknown target maps to 404 `unknown_target` through `from_store`.
    let request_query = finder
        .like_query(&request.target, request.limit)
        .map_err(store_err(space))?;
    let query = request_query.text.clone();
    let settings = settings(space, &finder, &request.settings, &[])?;
    let response = finder
        .query(&request_query, &settings)
        .map_err(store_err(space))?;
    let basis = response
        .diagnostics
        .channels
        .iter()
        .filter(|c| c.status == finder_core::ChannelStatus::Ran && c.hits > 0)
        .map(|c| c.channel.name())
        .filter(|c| *c != "like")
        .chain(
            response
                .diagnostics
                .boost
                .as_ref()
                .filter(|b| b.touched > 0)
                .map(|_| "graph"),
        )
        .collect::<Vec<_>>()
        .join("+");
    Ok(RecommendResult {
        space: space.name().to_string(),
        target: request.target.clone(),
        basis,
        query,
        hits: response.hits,
        diagnostics: response.diagnostics,
    })
}

/// Most characters of source text one `get` answers with (about 6,000 tokens); a longer
/// range is cut at a line boundary and marked `truncated`.
pub const MAX_GET_CHARS: usize = 24_000;

/// Lines of an indexed source. `target` is a source id (for files, the path relative to the
/// input), optionally with a range after a colon (`notes/a.md:40-80`); `lines` is a range
/// given apart (`40-80`, `40-`, `40`, or `all`), which wins over the colon form.
pub fn get(space: &Space, target: &str, lines: Option<&str>) -> Result<SourceLines> {
    let finder = space.finder()?;
    read_lines(&finder, space.name(), target, lines)
}

/// [`get`] over an opened index; `space` names it in the answer and in errors.
pub fn read_lines(
    finder: &Store,
    space: &str,
    target: &str,
    lines: Option<&str>,
) -> Result<SourceLines> {
    let store_err = |e| ServerError::from_store(space, e);
    let mut id = target;
    let mut found = finder.source_text(id).map_err(store_err)?;
    let mut range = None;
    if found.is_none() {
        // `id:40-80`: the colon form, tried only when the whole text names no source (ids
        // may hold colons).
        if let Some((head, tail)) = target.rsplit_once(':') {
            if let Ok(r) = LineRange::parse(tail) {
                id = head;
                found = finder.source_text(id).map_err(store_err)?;
                range = Some(r);
            }
        }
    }
    let Some(source) = found else {
        return Err(ServerError::UnknownTarget {
            space: space.to_string(),
            id: target.to_string(),
        });
    };
    if let Some(lines) = lines {
        range = Some(LineRange::parse(lines).map_err(|e| ServerError::invalid_field("lines", e))?);
    }
    let range = range.unwrap_or(LineRange {
        start: 1,
        end: None,
    });
    let all = source.lines();
    let last_line = all.keys().next_back().copied().unwrap_or(0);
    let mut text = String::new();
    let (mut first, mut last, mut truncated) = (0, 0, false);
    for (&n, line) in all.range(range.start..=range.end.unwrap_or(u32::MAX)) {
        let numbered = format!("{n:>5}  {line}\n");
        if !text.is_empty() && text.len() + numbered.len() > MAX_GET_CHARS {
            truncated = true;
            break;
        }
        text.push_str(&numbered);
        if first == 0 {
            first = n;
        }
        last = n;
    }
    Ok(SourceLines {
        space: space.to_string(),
        id: source.view.id,
        title: source.view.envelope.title,
        path: source.view.envelope.path,
        line_start: first,
        line_end: last,
        last_line,
        truncated,
        text,
    })
}

/// Lines `start..=end` of a source, one-based; no end reads to the last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LineRange {
    start: u32,
    end: Option<u32>,
}

impl LineRange {
    /// `40-80`, `40-`, `40` (that line only) or `all`.
    fn parse(text: &str) -> std::result::Result<LineRange, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return Ok(LineRange {
                start: 1,
                end: None,
            });
        }
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("`{text}` is not a line range: expected `40-80`, `40-`, `40` or `all` (lines count from 1)"))
        };
        let range = match text.split_once('-') {
            Some((a, "")) => LineRange {
                start: number(a)?,
                end: None,
            },
            Some((a, b)) => LineRange {
                start: number(a)?,
                end: Some(number(b)?),
            },
            None => {
                let n = number(text)?;
                LineRange {
                    start: n,
                    end: Some(n),
                }
            }
        };
        if range.end.is_some_and(|end| end < range.start) {
            return Err(format!("`{text}` ends before it starts"));
        }
        Ok(range)
    }
}

pub fn status(space: &Space) -> Result<StatusResult> {
    let api_documents = documents::read_all(space.dir())?.len();
    let index = match space.finder() {
        Ok(finder) => {
            let status = finder.status().map_err(store_err(space))?;
            serde_json::to_value(&status).map_err(ServerError::internal)?
        }
        Err(ServerError::NotBuilt { .. }) => Value::Null,
        Err(e) => return Err(e),
    };
    let progress = live_progress(&index);
    Ok(StatusResult {
        space: space.name().to_string(),
        built: !index.is_null(),
        building: progress.is_some() || index["vectors"]["pending"].as_bool() == Some(true),
        progress,
        api_documents,
        index,
    })
}

/// The spaces `grants` allows, with their state.
pub fn spaces(spaces: &Spaces, grants: &Grants) -> Vec<SpaceSummary> {
    spaces
        .granted(grants)
        .map(|space| {
            let sources = space
                .finder()
                .ok()
                .and_then(|f| f.status().ok())
                .map_or(0, |s| s.sources());
            SpaceSummary {
                name: space.name().to_string(),
                built: space.is_built(),
                sources,
            }
        })
        .collect()
}

/// The run a space's status shows: an indexing run under way, else a vector build under way,
/// else vectors behind the fragments (a build due, `queued`). `None` when nothing is to do.
fn live_progress(index: &Value) -> Option<Progress> {
    let running = |run: &Value| run.get("running").and_then(Value::as_bool) == Some(true);
    let from_run = |layer: &str, run: &Value| {
        Some(Progress {
            layer: layer.to_string(),
            stage: run.get("stage")?.as_str()?.to_string(),
            done: run.get("done")?.as_u64()?,
            total: run.get("total").and_then(Value::as_u64),
            rate: run.get("rate").and_then(Value::as_f64),
            seconds_left: run.get("seconds_left").and_then(Value::as_f64),
        })
    };
    if let Some(run) = index.get("indexing").filter(|r| running(r)) {
        return from_run("indexing", run);
    }
    let vectors = index.get("vectors")?;
    if let Some(run) = vectors.get("build").filter(|r| running(r)) {
        return from_run("vectors", run);
    }
    let done = vectors.get("done")?.as_u64()?;
    let total = vectors.get("total")?.as_u64()?;
    (done < total).then(|| Progress {
        layer: "vectors".to_string(),
        stage: "queued".to_string(),
        done,
        total: Some(total),
        rate: None,
        seconds_left: None,
    })
}

fn search_result(space: &Space, response: SearchResponse) -> SearchResult {
    SearchResult {
        space: space.name().to_string(),
        facets: Facets::count(&response.hits),
        query: response.query,
        offset: response.offset,
        limit: response.limit,
        hits: response.hits,
        diagnostics: response.diagnostics,
    }
}

/// A date filter's bound in Unix seconds; an upper bound given as a bare day, month or year
/// takes in all of it (`date_to: 2024-05-31` keeps notes of the 31st).
fn date_bound(field: &str, text: Option<&str>, upper: bool) -> Result<Option<i64>> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    finder_core::parse_date_bound(text, upper).map(Some).ok_or_else(|| {
        ServerError::invalid_field(
            field,
            format!("`{field}`: `{text}` is not a date (expected `2024-05-31`, `2024-05`, `2024-05-31T12:00:00Z` or Unix seconds)"),
        )
    })
}

fn check_query(query: &str) -> Result<()> {
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(ServerError::QueryTooLong {
            chars,
            max: MAX_QUERY_CHARS,
        });
    }
    Ok(())
}

fn check_page(limit: usize, offset: usize) -> Result<()> {
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ServerError::invalid_field(
            "limit",
            format!("limit {limit} is outside 1–{MAX_LIMIT}"),
        ));
    }
    if offset > MAX_OFFSET {
        return Err(ServerError::invalid_field(
            "offset",
            format!("offset {offset} is beyond {MAX_OFFSET}"),
        ));
    }
    Ok(())
}

/// The space's settings with the request's overrides (validated by the index, so errors
/// name the key and its range) and then the operation's own.
fn settings(
    space: &Space,
    finder: &Store,
    overrides: &Overrides,
    extra: &[String],
) -> Result<Settings> {
    let mut assignments = Vec::with_capacity(overrides.len() + extra.len());
    for (key, value) in overrides {
        let text = match value {
            Value::String(s) => serde_json::to_string(s).map_err(ServerError::internal)?,
            Value::Number(_) | Value::Bool(_) | Value::Array(_) => value.to_string(),
            Value::Null | Value::Object(_) => {
                return Err(ServerError::invalid_field(
                    key,
                    format!("setting `{key}` needs a number, boolean, string or array"),
                ))
            }
        };
        assignments.push(format!("{key}={text}"));
    }
    assignments.extend(extra.iter().cloned());
    finder.settings_with(&assignments).map_err(store_err(space))
}

/// Turns the response's hints into cited passages, best passage first, until `budget`
/// characters of rendered text are used.
fn pack_context(space: &str, response: SearchResponse, budget: usize) -> ContextResult {
    let mut candidates: Vec<(&Hit, usize)> = Vec::new();
    for hit in &response.hits {
        for i in 0..hit.hints.len() {
            candidates.push((hit, i));
        }
    }
    candidates.sort_by(|(a, i), (b, j)| {
        b.hints[*j]
            .score
            .total_cmp(&a.hints[*i].score)
            .then(a.rank.cmp(&b.rank))
            .then(i.cmp(j))
    });
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut used = 0usize;
    let mut seen = HashSet::new();
    let mut omitted = 0usize;
    for (hit, i) in candidates {
        let hint = &hit.hints[i];
        if !seen.insert((
            hit.id.as_str(),
            hint.extent.byte_start,
            hint.extent.line_start,
        )) {
            continue;
        }
        let n = pieces.len() + 1;
        let head = format!(
            "[{n}] {} — {} L{}-{}\n",
            hit.envelope.title, hit.id, hint.extent.line_start, hint.extent.line_end
        );
        let sep = if pieces.is_empty() { 0 } else { 1 };
        let fixed = sep + head.chars().count() + 1;
        let body_chars = hint.preview.chars().count();
        let room = budget.saturating_sub(used + fixed);
        let (body, truncated) = if body_chars <= room {
            (hint.preview.clone(), false)
        } else if room >= 120 {
            (cut(&hint.preview, room), true)
        } else {
            omitted += 1;
            continue;
        };
        if sep == 1 {
            text.push('\n');
        }
        text.push_str(&head);
        text.push_str(&body);
        text.push('\n');
        used = text.chars().count();
        pieces.push(ContextPiece {
            n,
            source_id: hit.id.clone(),
            title: hit.envelope.title.clone(),
            path: hit.envelope.path.clone(),
            extent: hint.extent,
            score: hint.score,
            source_rank: hit.rank,
            text: body,
            truncated,
        });
    }
    ContextResult {
        space: space.to_string(),
        query: response.query,
        budget_chars: budget,
        used_chars: used,
        pieces,
        omitted,
        text,
        diagnostics: response.diagnostics,
    }
}

/// The first `max` characters of `text`, ending at a word boundary, with `…`.
fn cut(text: &str, max: usize) -> String {
    let keep: String = text.chars().take(max.saturating_sub(1)).collect();
    let keep = match keep.rfind(char::is_whitespace) {
        Some(i) if i > keep.len() / 2 => keep[..i].to_string(),
        _ => keep,
    };
    format!("{}…", keep.trim_end())
}

#[cfg(test)]
mod tests {
    use super::{live_progress, LineRange};

    #[test]
    fn line_ranges_parse_and_refuse_nonsense() {
        let r = |start, end| Ok(LineRange { start, end });
        assert_eq!(LineRange::parse("40-80"), r(40, Some(80)));
        assert_eq!(LineRange::parse(" 40 - "), r(40, None));
        assert_eq!(LineRange::parse("7"), r(7, Some(7)));
        assert_eq!(LineRange::parse("ALL"), r(1, None));
        for bad in ["", "0-3", "80-40", "a-b", "-5", "1-2-3"] {
            let e = LineRange::parse(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }

    #[test]
    fn status_shows_the_run_under_way_indexing_first() {
        let run = |stage: &str, running: bool| {
            serde_json::json!({"stage": stage, "done": 5, "total": 10, "rate": 2.5,
                "seconds_left": 2.0, "running": running, "pid": 1, "started_at": 0,
                "updated_at": 0})
        };
        let index = serde_json::json!({
            "indexing": run("reading", true),
            "vectors": {"done": 3, "total": 10, "build": run("embedding", true)},
        });
        let p = live_progress(&index).unwrap();
        assert_eq!(
            (p.layer.as_str(), p.stage.as_str()),
            ("indexing", "reading")
        );
        // A run whose process is gone is not under way.
        let index = serde_json::json!({
            "indexing": run("reading", false),
            "vectors": {"done": 3, "total": 10, "build": run("embedding", true)},
        });
        let p = live_progress(&index).unwrap();
        assert_eq!(
            (p.layer.as_str(), p.stage.as_str()),
            ("vectors", "embedding")
        );
        assert_eq!((p.done, p.total, p.rate), (5, Some(10), Some(2.5)));
        // Vectors behind with no build running: one is due.
        let index = serde_json::json!({"vectors": {"done": 3, "total": 10}});
        let p = live_progress(&index).unwrap();
        assert_eq!((p.stage.as_str(), p.done, p.rate), ("queued", 3, None));
        let index = serde_json::json!({"vectors": {"done": 10, "total": 10}});
        assert!(live_progress(&index).is_none());
        assert!(live_progress(&serde_json::json!({})).is_none());
    }
}
