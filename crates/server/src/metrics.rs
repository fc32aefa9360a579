//! Request counts and latency histograms per route, rendered in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default)]
pub struct Metrics {
    routes: Mutex<BTreeMap<(String, String), RouteStats>>,
}

#[derive(Default)]
struct RouteStats {
    by_status: BTreeMap<u16, u64>,
    /// Non-cumulative counts per bucket; the last slot is `+Inf`.
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
    count: u64,
}

impl Metrics {
    /// Records one answered request. `route` is the route template (`/v1/search`), never the
    /// raw path, so the label set stays bounded.
    pub fn record(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let stats = routes
            .entry((route.to_string(), method.to_string()))
            .or_default();
        *stats.by_status.entry(status).or_default() += 1;
        let slot = BUCKETS
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(BUCKETS.len());
        stats.buckets[slot] += 1;
        stats.sum_seconds += seconds;
        stats.count += 1;
    }

    /// The Prometheus text exposition of everything recorded so far, plus `extra` lines.
    pub fn render(&self, extra: &str) -> String {
        let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        out.push_str("# HELP finder_http_requests_total HTTP requests answered, by route, method and status.\n");
        out.push_str("# TYPE finder_http_requests_total counter\n");
        for ((route, method), stats) in routes.iter() {
            for (status, n) in &stats.by_status {
                let _ = writeln!(
                    out,
                    "finder_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{status}\"}} {n}",
                    escape(route),
                    escape(method)
                );
            }
        }
        out.push_str("# HELP finder_http_request_duration_seconds Time to answer an HTTP request, by route and method.\n");
        out.push_str("# TYPE finder_http_request_duration_seconds histogram\n");
        for ((route, method), stats) in routes.iter() {
            let labels = format!("route=\"{}\",method=\"{}\"", escape(route), escape(method));
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += stats.buckets[i];
                let _ = writeln!(
                    out,
                    "finder_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += stats.buckets[BUCKETS.len()];
            let _ = writeln!(
                out,
                "finder_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                out,
                "finder_http_request_duration_seconds_sum{{{labels}}} {}",
                stats.sum_seconds
            );
            let _ = writeln!(
                out,
                "finder_http_request_duration_seconds_count{{{labels}}} {}",
                stats.count
            );
        }
        out.push_str(extra);
        out
    }
}

/// Escapes a Prometheus label value.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_counts_match() {
        let m = Metrics::default();
        m.record("POST", "/v1/search", 200, Duration::from_millis(3));
        m.record("POST", "/v1/search", 200, Duration::from_millis(30));
        m.record("POST", "/v1/search", 400, Duration::from_secs(20));
        let text = m.render("");
        assert!(text.contains(
            "finder_http_requests_total{route=\"/v1/search\",method=\"POST\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "finder_http_requests_total{route=\"/v1/search\",method=\"POST\",status=\"400\"} 1"
        ));
        assert!(text.contains("le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("le=\"0.05\"} 2\n"), "{text}");
        assert!(text.contains("le=\"10\"} 2\n"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains(
            "finder_http_request_duration_seconds_count{route=\"/v1/search\",method=\"POST\"} 3"
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
