//! Recency: blending the fused score with how recent a source is, or ordering by date.
//!
//! The blend is `blend · score + (1 − blend) · recency(date)` with `recency = 0.5^(age/half_life)`
//! (DESIGN step 5; the half-life decay and its 365-day default are the event channel's, DESIGN
//! step 1). Undated sources keep recency 1, as undated events keep weight 1 there: a missing
//! date is not evidence that a source is old.

use serde::{Deserialize, Serialize};

use super::{sort_desc_stable, top_divisor, Candidate, Ranked};

/// Weight of the fused score against the recency factor.
pub const DEFAULT_RECENCY_BLEND: f64 = 0.8;
/// Age, in days, at which the recency factor halves.
pub const DEFAULT_RECENCY_HALF_LIFE_DAYS: f64 = 365.0;

const SECONDS_PER_DAY: f64 = 86_400.0;

/// Settings of the recency blend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecencyParams {
    /// 1 keeps the score as it is; 0 orders by recency alone. Range 0–1.
    pub recency_blend: f64,
    /// Range 1–36 500 days.
    pub recency_half_life_days: f64,
}

impl Default for RecencyParams {
    fn default() -> Self {
        RecencyParams {
            recency_blend: DEFAULT_RECENCY_BLEND,
            recency_half_life_days: DEFAULT_RECENCY_HALF_LIFE_DAYS,
        }
    }
}

/// Why a hit scored what it scored after the recency blend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecencyExplain {
    /// The incoming score divided by the best incoming score (top is 1).
    pub relevance: f64,
    /// Age in days at `now`; `None` when undated. Future dates count as age 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_days: Option<f64>,
    /// `0.5^(age_days / half_life)`, 1 when undated.
    pub recency: f64,
    /// The blend weight used.
    pub blend: f64,
}

/// Where a hit sits in the date order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DateExplain {
    /// The source date as Unix seconds; undated sources go last.
    pub date: Option<i64>,
}

/// `0.5^(age_days / half_life_days)` at `now` (both Unix seconds); 1 for undated sources and
/// dates in the future.
pub fn recency_factor(date: Option<i64>, now: i64, half_life_days: f64) -> f64 {
    match age_days(date, now) {
        Some(age) if half_life_days > 0.0 => 0.5_f64.powf(age / half_life_days),
        _ => 1.0,
    }
}

fn age_days(date: Option<i64>, now: i64) -> Option<f64> {
    date.map(|d| (now.saturating_sub(d)).max(0) as f64 / SECONDS_PER_DAY)
}

/// Blends each candidate's score with its recency and sorts by the blend, best first.
///
/// Scores are first divided by the best one, so the blend mixes two numbers in [0, 1]
/// whatever the fusion produced (seed 004 normalises the best candidate to 1.0 before its
/// recency step). Ties keep the incoming order.
pub fn recency_blend(
    candidates: &[Candidate<'_>],
    params: &RecencyParams,
    now: i64,
) -> Vec<Ranked<RecencyExplain>> {
    let divisor = top_divisor(candidates.iter().map(|c| c.score));
    let blend = params.recency_blend;
    let mut out: Vec<Ranked<RecencyExplain>> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let relevance = c.score / divisor;
            let recency = recency_factor(c.date, now, params.recency_half_life_days);
            Ranked {
                index,
                score: blend * relevance + (1.0 - blend) * recency,
                explain: RecencyExplain {
                    relevance,
                    age_days: age_days(c.date, now),
                    recency,
                    blend,
                },
            }
        })
        .collect();
    sort_desc_stable(&mut out, |r| r.score);
    out
}

/// Orders by date, newest first; undated sources go last. Ties keep the incoming order (which
/// is by score), and scores are unchanged.
pub fn sort_by_date(candidates: &[Candidate<'_>]) -> Vec<Ranked<DateExplain>> {
    let mut out: Vec<Ranked<DateExplain>> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| Ranked {
            index,
            score: c.score,
            explain: DateExplain { date: c.date },
        })
        .collect();
    // `None < Some(_)`, so the reversed key puts newer dates first and undated last.
    out.sort_by_key(|r| std::cmp::Reverse(r.explain.date));
    out
}

/// A date filter's bound in Unix seconds, read as [`parse_date`] reads dates. An upper bound
/// (`end`) given as a bare year, month or day takes in the whole of it: `2024-05` as an upper
/// bound is the last second of May 2024.
pub fn parse_date_bound(text: &str, end: bool) -> Option<i64> {
    let text = text.trim();
    let start = parse_date(text)?;
    // `YYYY`, `YYYY-MM` or `YYYY-MM-DD` and nothing else.
    let shape: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { 'd' } else { c })
        .collect();
    let next = match shape.as_str() {
        _ if !end => return Some(start),
        "dddd" => parse_date(&format!("{:04}", text.parse::<i64>().ok()? + 1))?,
        "dddd-dd" => {
            let (year, month): (i64, i64) = (text[..4].parse().ok()?, text[5..].parse().ok()?);
            let (year, month) = if month == 12 {
                (year + 1, 1)
            } else {
                (year, month + 1)
            };
            parse_date(&format!("{year:04}-{month:02}"))?
        }
        "dddd-dd-dd" => start + 86_400,
        _ => return Some(start),
    };
    Some(next - 1)
}

/// Parses a source date into Unix seconds. Accepts `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, the same
/// followed by `T` or a space and `HH:MM[:SS[.fff]]` with an optional `Z` or `±HH[:MM]`
/// offset (no offset means UTC), and Unix timestamps (seconds, or milliseconds from 10^11 on).
pub fn parse_date(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Some(epoch) = parse_epoch(text) {
        return Some(epoch);
    }
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(i) => (&text[..i], Some(text[i + 1..].trim())),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year: i64 = number(parts.next()?, 4)?;
    let month: i64 = parts.next().map_or(Some(1), |m| number(m, 2))?;
    let day: i64 = parts.next().map_or(Some(1), |d| number(d, 2))?;
    if parts.next().is_some() || !(1..=12).contains(&month) || day < 1 {
        return None;
    }
    if day > days_in_month(year, month) {
        return None;
    }
    let seconds = match time {
        Some(t) if !t.is_empty() => parse_time(t)?,
        _ => 0,
    };
    Some(days_from_civil(year, month, day) * 86_400 + seconds)
}

/// A bare number of five digits or more: seconds, or milliseconds from 10^11 on (year 5138 in
/// seconds, March 1973 in milliseconds). Four digits or fewer are a year.
fn parse_epoch(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.len() < 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = text.parse().ok()?;
    Some(if value.abs() >= 100_000_000_000 {
        value / 1000
    } else {
        value
    })
}

/// `HH:MM[:SS[.fff]]` with an optional `Z` or `±HH[:MM]` offset, as seconds past midnight UTC.
fn parse_time(t: &str) -> Option<i64> {
    let (clock, offset) = if let Some(c) = t.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(i) = t.rfind(['+', '-']) {
        let sign = if t[i..].starts_with('-') { -1 } else { 1 };
        let zone = &t[i + 1..];
        let (h, m) = match zone.split_once(':') {
            Some((h, m)) => (number(h, 2)?, number(m, 2)?),
            None if zone.len() == 4 => (number(&zone[..2], 2)?, number(&zone[2..], 2)?),
            None => (number(zone, 2)?, 0),
        };
        (&t[..i], sign * (h * 3600 + m * 60))
    } else {
        (t, 0)
    };
    let mut parts = clock.split(':');
    let h: i64 = number(parts.next()?, 2)?;
    let m: i64 = number(parts.next()?, 2)?;
    let s: i64 = match parts.next() {
        Some(s) => number(s.split('.').next()?, 2)?,
        None => 0,
    };
    if parts.next().is_some() || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(h * 3600 + m * 60 + s - offset)
}

/// An unsigned decimal of exactly `width` digits.
fn number(s: &str, width: usize) -> Option<i64> {
    if s.len() != width || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date, by counting 400-year eras that start
/// in March (so the leap day is the last day of the counted year).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = (month + 9) % 12; // March = 0
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bounds_take_in_the_whole_period() {
        let at = |t: &str| parse_date(t).unwrap();
        assert_eq!(
            parse_date_bound("2024-05-31", false),
            Some(at("2024-05-31"))
        );
        assert_eq!(
            parse_date_bound("2024-05-31", true),
            Some(at("2024-06-01") - 1)
        );
        assert_eq!(parse_date_bound("2024-12", true), Some(at("2025-01") - 1));
        assert_eq!(parse_date_bound("2024", true), Some(at("2025") - 1));
        assert_eq!(
            parse_date_bound("2024-05-31T10:00:00Z", true),
            Some(at("2024-05-31T10:00:00Z"))
        );
        assert_eq!(parse_date_bound("1714000000", true), Some(1_714_000_000));
        assert_eq!(parse_date_bound("May 31", true), None);
    }

    const DAY: i64 = 86_400;

    #[test]
    fn factor_halves_per_half_life_and_undated_keeps_one() {
        let now = 1_000 * DAY;
        assert_eq!(recency_factor(Some(now), now, 365.0), 1.0);
        assert!((recency_factor(Some(now - 365 * DAY), now, 365.0) - 0.5).abs() < 1e-12);
        assert!((recency_factor(Some(now - 730 * DAY), now, 365.0) - 0.25).abs() < 1e-12);
        assert_eq!(recency_factor(None, now, 365.0), 1.0);
        assert_eq!(recency_factor(Some(now + 10 * DAY), now, 365.0), 1.0);
    }

    /// Seed 004: `recencyBlend · score + (1 − recencyBlend) · recencyFactor(date, now)`.
    #[test]
    fn blend_mixes_normalised_score_with_recency() {
        let now = 10_000 * DAY;
        let c = [
            Candidate::new("old", 0.04).with_date(Some(now - 730 * DAY)),
            Candidate::new("new", 0.03).with_date(Some(now)),
            Candidate::new("undated", 0.02),
        ];
        let out = recency_blend(&c, &RecencyParams::default(), now);
        let ids: Vec<&str> = out.iter().map(|r| c[r.index].id).collect();
        // old: 0.8·1 + 0.2·0.25 = 0.85; new: 0.8·0.75 + 0.2 = 0.8; undated: 0.8·0.5 + 0.2 = 0.6.
        assert_eq!(ids, vec!["old", "new", "undated"]);
        assert!((out[0].score - 0.85).abs() < 1e-12);
        assert!((out[1].score - 0.8).abs() < 1e-12);
        assert!((out[2].score - 0.6).abs() < 1e-12);
        assert_eq!(out[0].explain.age_days, Some(730.0));
        assert_eq!(out[2].explain.age_days, None);
        assert_eq!(out[2].explain.recency, 1.0);
    }

    #[test]
    fn blend_one_keeps_the_order_and_zero_orders_by_recency() {
        let now = 1_000 * DAY;
        let c = [
            Candidate::new("a", 1.0).with_date(Some(now - 900 * DAY)),
            Candidate::new("b", 0.5).with_date(Some(now - 10 * DAY)),
        ];
        let keep = RecencyParams {
            recency_blend: 1.0,
            ..RecencyParams::default()
        };
        let order: Vec<usize> = recency_blend(&c, &keep, now)
            .iter()
            .map(|r| r.index)
            .collect();
        assert_eq!(order, vec![0, 1]);
        let only = RecencyParams {
            recency_blend: 0.0,
            ..RecencyParams::default()
        };
        let order: Vec<usize> = recency_blend(&c, &only, now)
            .iter()
            .map(|r| r.index)
            .collect();
        assert_eq!(order, vec![1, 0]);
    }

    #[test]
    fn date_sort_puts_newest_first_and_undated_last() {
        let c = [
            Candidate::new("undated", 1.0),
            Candidate::new("old", 0.9).with_date(Some(DAY)),
            Candidate::new("new", 0.8).with_date(Some(5 * DAY)),
            Candidate::new("old-too", 0.7).with_date(Some(DAY)),
        ];
        let ids: Vec<&str> = sort_by_date(&c).iter().map(|r| c[r.index].id).collect();
        assert_eq!(ids, vec!["new", "old", "old-too", "undated"]);
    }

    #[test]
    fn dates_parse_to_unix_seconds() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-03-01"), Some(1_709_251_200));
        assert_eq!(parse_date("2024-02-29"), Some(1_709_164_800));
        assert_eq!(parse_date("2023-02-29"), None);
        assert_eq!(parse_date("2024"), Some(1_704_067_200));
        assert_eq!(parse_date("2024-03"), Some(1_709_251_200));
        assert_eq!(parse_date("2024-03-01T12:30:00Z"), Some(1_709_296_200));
        assert_eq!(parse_date("2024-03-01 12:30"), Some(1_709_296_200));
        assert_eq!(
            parse_date("2024-03-01T14:30:00.250+02:00"),
            Some(1_709_296_200)
        );
        assert_eq!(parse_date("2024-03-01T07:30:00-0500"), Some(1_709_296_200));
        assert_eq!(parse_date("1636510062341"), Some(1_636_510_062));
        assert_eq!(parse_date("1636510062"), Some(1_636_510_062));
        assert_eq!(parse_date("1969-12-31"), Some(-DAY));
        assert_eq!(parse_date("yesterday"), None);
        assert_eq!(parse_date("2024-13-01"), None);
        assert_eq!(parse_date(""), None);
    }
}
