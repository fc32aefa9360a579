#!/usr/bin/env python3
"""Reads bench/results/<dataset>/<system>.json and writes the side-by-side section of
docs/BENCHMARKS.md (between `<!-- bench:begin -->` and `<!-- bench:end -->`; appended with a
heading when the markers are missing) and the chart docs/bench-p50.png (p50 against corpus
size, one panel per mode, one line per system)."""
import argparse
import glob
import json
import os
import sys
from statistics import median

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
ORDER = ["finder", "tantivy", "qdrant-edge", "lancedb", "sqlite", "bm25s", "pgvector"]
MODES = ["lexical", "dense", "hybrid"]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
HEADING = "## Side by side with peers (issue 7)"


# Cores' worth of other processes' CPU during a run above which the report cautions.
OTHERS_CPU_CAUTION = 0.25


def busy_others(r):
    """What competed with a run: the largest round's `others_cpu` (cores' worth of other
    processes' CPU during it), or for records made before that was measured the 1-minute load
    average at the start when above 1 (else None)."""
    others = [x for x in (r.get("others_cpu_rounds") or [r.get("others_cpu")]) if x is not None]
    if others:
        return max(others)
    start = max(
        (la.get("start", 0) for la in (r.get("load_avg_1m_rounds") or [r.get("load_avg_1m")]) if la),
        default=0,
    )
    return start if start > 1.0 else None


def load(results):
    data = {}
    for path in sorted(glob.glob(os.path.join(results, "*", "*.json"))):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"report: skipping {path}: {e}", file=sys.stderr)
            continue
        dname = os.path.basename(os.path.dirname(path))
        system = r.get("system") or os.path.splitext(os.path.basename(path))[0]
        data.setdefault(dname, {})[system] = r
    return data


def sys_key(s):
    return (ORDER.index(s) if s in ORDER else len(ORDER), s)


def docs_of(runs):
    return max((r.get("docs") or 0) for r in runs.values())


def fmt_num(x, digits=2):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def mib(b):
    return None if b is None else b / 2**20


def mode(r, m):
    return (r.get("modes") or {}).get(m)


def ok(r):
    return "error" not in r and "skipped" not in r


def ratio(a, b, m):
    """Finder/peer p50 in mode `m` as (ratio, lowest, highest): with rounds on both sides
    (`harness.py --repeat`), the median of the rounds' ratios, each round's Finder p50 over
    the same round's peer p50, and their range; else the one ratio (range None)."""
    x, y = mode(a, m), mode(b, m)
    if not (x and y and y.get("p50_ms") and x.get("p50_ms")):
        return None
    ra, rb = x.get("rounds_p50_ms") or [], y.get("rounds_p50_ms") or []
    pairs = [p / q for p, q in zip(ra, rb) if p and q]
    if len(pairs) > 1 and len(ra) == len(rb):
        return median(pairs), min(pairs), max(pairs)
    return x["p50_ms"] / y["p50_ms"], None, None


def fmt_ratio(r):
    if r is None:
        return "n/a"
    value, lo, hi = r
    return f"{value:.2f}×" + ("" if lo is None else f" ({lo:.2f}–{hi:.2f})")


def dataset_table(dname, runs):
    lines = []
    any_run = next((r for r in runs.values() if ok(r)), None)
    q = any_run.get("queries") if any_run else None
    lines.append(f"### {dname} ({docs_of(runs):,} documents" + (f", {q:,} queries)" if q else ")"))
    lines.append("")
    lines.append(
        "| system | index s | index MiB | peak RSS MiB | lexical p50 / p99 ms | lexical nDCG@10 "
        "| dense p50 / p99 ms | dense nDCG@10 | hybrid p50 / p99 ms | hybrid nDCG@10 |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sorted(runs, key=sys_key):
        r = runs[s]
        name = f"**{s}**" if s == "finder" else s
        if not ok(r):
            why = r.get("skipped") or f"failed: {r.get('error')}"
            lines.append(f"| {name} | {why} |  |  |  |  |  |  |  |  |")
            continue
        cells = [
            name,
            fmt_num(r.get("index_s")),
            fmt_num(mib(r.get("index_bytes")), 1),
            fmt_num(mib(r.get("peak_rss_bytes")), 0),
        ]
        for m in MODES:
            x = mode(r, m)
            if not x:
                cells += ["n/a", "n/a"]
            else:
                cells.append(f"{fmt_num(x.get('p50_ms'))} / {fmt_num(x.get('p99_ms'))}")
                nd = x.get("ndcg10")
                cell = "–" if nd is None else f"{nd:.4f}"
                ov = x.get("exact_overlap10")
                if ov is not None and ov < 0.9995:
                    cell += f" (ANN {ov:.2f})"
                cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    fin = runs.get("finder")
    if fin and ok(fin):
        n = fin.get("rounds")
        lines.append(
            "Finder / peer, p50 latency (below 1.0× Finder is faster)"
            + (f"; the median of {n} rounds' ratios, their range in brackets:" if n else ":")
        )
        lines.append("")
        lines.append("| peer | lexical | dense | hybrid |")
        lines.append("|---|---:|---:|---:|")
        for s in sorted(runs, key=sys_key):
            if s == "finder" or not ok(runs[s]):
                continue
            cells = [s] + [fmt_ratio(ratio(fin, runs[s], m)) for m in MODES]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines += boost_line(fin)
        lines += targets(dname, runs)
    notes = []
    for s in sorted(runs, key=sys_key):
        r = runs[s]
        items = list(r.get("notes") or [])
        parts = finder_index_parts(r) if s == "finder" and ok(r) else None
        if parts:
            items.append(
                "index s = lexical layer {} + graph build {} + vectors {} s".format(
                    *(fmt_num(x) for x in parts)
                )
            )
        la = r.get("load_avg_1m")
        if r.get("rounds"):
            per = "; ".join(
                f"{m} " + " / ".join(fmt_num(v) for v in x["rounds_p50_ms"])
                for m in MODES
                if (x := mode(r, m)) and x.get("rounds_p50_ms")
            )
            items.append(f"{r['rounds']} rounds, p50 ms per round: {per}")
            items.append(f"wall of all rounds {r.get('wall_s')} s")
        elif la:
            others = r.get("others_cpu")
            items.append(
                f"run wall {r.get('wall_s')} s, 1-min load average {la['start']} → {la['end']}"
                + (f", other processes {others} of a core" if others is not None else "")
            )
        if "log_tail" in r:
            items.append("log tail: " + " ⏎ ".join(r["log_tail"][-5:]))
        if items:
            notes.append(f"- **{s}**: " + "; ".join(items))
    if notes:
        lines.append("<details><summary>How each system ran on " + dname + "</summary>")
        lines.append("")
        lines += notes
        lines.append("")
        lines.append("</details>")
        lines.append("")
    return lines


def boost_line(fin):
    """Finder's `boost` mode (hybrid, then the graph boost, which no peer has): the whole
    query and the `graph.boost` stage alone."""
    b = mode(fin, "boost")
    if not b or b.get("boost_p50_ms") is None:
        return []
    nd = b.get("ndcg10")
    return [
        "Finder with the graph boost (mode `boost`: hybrid, then personalized PageRank along "
        f"the relations; no peer has a graph): query p50 / p99 {fmt_num(b.get('p50_ms'))} / "
        f"{fmt_num(b.get('p99_ms'))} ms"
        + ("" if nd is None else f", nDCG@10 {nd:.4f}")
        + f"; the `graph.boost` stage alone p50 / p95 / p99 {fmt_num(b['boost_p50_ms'])} / "
        f"{fmt_num(b.get('boost_p95_ms'))} / {fmt_num(b.get('boost_p99_ms'))} ms "
        f"over {b.get('boost_queries')} queries.",
        "",
    ]


# Issue 7's indexing target: lexical indexing of at least this many fragments a second.
INDEX_RATE = 20_000


def finder_index_parts(fin):
    """Finder's index seconds as (lexical layer, graph build, vectors), or None when not
    measured. Its `index_lexical_s` is the whole indexing run, the graph build after the
    lexical commit included; `index_graph_s` is that build's part."""
    run, graph = fin.get("index_lexical_s"), fin.get("index_graph_s")
    if run is None or graph is None:
        return None
    return run - graph, graph, fin.get("index_vector_s") or 0.0


# Issue 7's limits at a million fragments, on 2 cores: (what, mode, key, bound in ms).
LIMITS_1M = [
    ("lexical p50 < 5 ms", "lexical", "p50_ms", 5.0),
    ("hybrid p50 < 10 ms", "hybrid", "p50_ms", 10.0),
    ("graph boost p50 < 2 ms", "boost", "boost_p50_ms", 2.0),
]


def targets(dname, runs):
    fin = runs["finder"]
    out = []

    checks = []
    if (fin.get("fragments") or fin.get("docs") or 0) >= 1_000_000:
        for name, m, key, bound in LIMITS_1M:
            value = (mode(fin, m) or {}).get(key)
            if value is not None:
                checks.append((name, value < bound, f"{value:.2f} ms"))
    for m, peer, bound in (("lexical", "tantivy", 1.5), ("hybrid", "qdrant-edge", 1.0)):
        r = runs.get(peer)
        found = ratio(fin, r, m) if r and ok(r) else None
        if found:
            name = f"{m} p50 ≤ {bound}× {peer}" + (" hybrid" if m == "hybrid" else "")
            value, lo, hi = found
            shown = f"{value:.2f}×" + ("" if lo is None else f", rounds {lo:.2f}–{hi:.2f}")
            checks.append((name, value <= bound, shown))
    parts = finder_index_parts(fin)
    if parts and fin.get("fragments") and parts[0] > 0:
        lexical, graph, _ = parts
        rate = fin["fragments"] / lexical
        checks.append((
            f"lexical indexing ≥ {INDEX_RATE // 1000}k fragments/s",
            rate >= INDEX_RATE,
            f"{rate / 1000:.1f}k/s, {lexical:.2f} s; with the graph build after it "
            f"{fin['fragments'] / (lexical + graph) / 1000:.1f}k/s",
        ))
    fh = (mode(fin, "hybrid") or {}).get("ndcg10")
    peers = [
        (s, (mode(r, "hybrid") or {}).get("ndcg10"))
        for s, r in runs.items()
        if s != "finder" and ok(r) and (mode(r, "hybrid") or {}).get("ndcg10") is not None
    ]
    if fh is not None and peers and dname.startswith("scifact"):
        best_s, best = max(peers, key=lambda x: x[1])
        checks.append((
            "hybrid nDCG@10 ≥ every peer's hybrid",
            fh >= best,
            f"{fh:.4f} vs best peer {best_s} {best:.4f}",
        ))
    if checks:
        out.append("Targets: " + "; ".join(
            f"{name}: **{'met' if good else 'missed'}** ({val})" for name, good, val in checks
        ))
        out.append("")
    return out


def versions_table(data):
    seen = {}
    for runs in data.values():
        for s, r in runs.items():
            for k, v in (r.get("versions") or {}).items():
                if v:
                    seen.setdefault(s, {})[k] = v
    lines = ["| system | versions |", "|---|---|"]
    for s in sorted(seen, key=sys_key):
        lines.append(f"| {s} | " + ", ".join(f"{k} {v}" for k, v in sorted(seen[s].items())) + " |")
    return lines


def chart(data, path):
    """Draws the chart into `path` (not when `path` is None); returns the datasets it shows."""
    names = [d for d in data if d.startswith("synthetic")] or list(data)
    names.sort(key=lambda d: docs_of(data[d]))
    if path is None:
        return names
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = sorted({s for d in names for s in data[d]}, key=sys_key)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, m in zip(axes, MODES):
        for i, s in enumerate(systems):
            xs, ys = [], []
            for d in names:
                r = data[d].get(s)
                x = mode(r, m) if r and ok(r) else None
                if x and x.get("p50_ms"):
                    xs.append(docs_of(data[d]))
                    ys.append(x["p50_ms"])
            if xs:
                ax.plot(xs, ys, marker="o", label=s, color=colors[i % len(colors)],
                        linewidth=2.6 if s == "finder" else 1.4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{m} p50")
        ax.set_xlabel("documents")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p50 latency, ms (log)")
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return names


def machine_line(data):
    for runs in data.values():
        for r in runs.values():
            m = r.get("machine")
            if m:
                mem = f", {m['mem_gib']} GiB" if m.get("mem_gib") else ""
                return f"{m.get('nproc')} cores ({m.get('cpu')}){mem}, Linux {m.get('kernel')}"
    return "unknown"


def dates(data):
    ds = sorted({r.get("date", "")[:10] for runs in data.values() for r in runs.values() if r.get("date")})
    return ds[0] if len(ds) == 1 else (f"{ds[0]} – {ds[-1]}" if ds else "unknown")


def section(data, chart_rel, chart_sets, command):
    L = []
    L.append(
        "Finder and six embedded peers on the same data in one run: SciFact with all-MiniLM-L6-v2 "
        "vectors computed once and given to every system, and synthetic corpora from "
        "`finder-bench gen`. Query vectors are precomputed, so embedding time is excluded; "
        "query text analysis is inside the timing. Per mode: one untimed warm-up pass, then each "
        "query timed alone (top 10); nDCG@10 from the same lists. Each (system, dataset) is its own "
        "process: peak RSS is its `ru_maxrss` (plus the server's sampled PSS for PostgreSQL). "
        "Index MiB is what the index folder takes on disk (allocated blocks; tantivy's row "
        "includes the numpy matrix it searches, PostgreSQL's is `pg_total_relation_size`). "
        "Fusion is RRF over each side's top 100 everywhere, with Finder's constant (k=20 since "
        "2026-12-02, k=60 before: each run's notes name it); qdrant-edge and LanceDB use their "
        "native fusion. HNSW peers are built and searched with Finder's defaults (m 32, "
        "ef_construction 200, and the beam Finder's vector channel walks with: 3 x sqrt(docs), "
        "never below its window of 1.5 x the list depth of 200; m 16 and a beam of 300 in runs "
        "before docs/perf/hnsw-beam.md, 128 before 6352ce9; each run's notes name it). \"ANN x\" after a dense nDCG is the mean share of the exact "
        "top 10 that the system's dense top 10 holds (shown when below 1). See `bench/README.md` "
        "for what each peer maps to each mode."
    )
    L.append("")
    L.append(f"- command: `{command}`")
    L.append(f"- machine: {machine_line(data)}")
    L.append(f"- date: {dates(data)}")
    busy = sorted(
        f"{r.get('system')} on {d} ({others})"
        for d, runs in data.items()
        for r in runs.values()
        if (others := busy_others(r)) is not None and others > OTHERS_CPU_CAUTION
    )
    repeated = sorted(
        (r["rounds"], s, d) for d, runs in data.items() for s, r in runs.items() if r.get("rounds")
    )
    once = any(
        not r.get("rounds") and not r.get("skipped") and not r.get("error")
        for runs in data.values()
        for r in runs.values()
    )
    if repeated and not once:
        rounds = sorted({n for n, _, _ in repeated})
        L.append(
            f"- rounds: every (system, dataset) pair ran {' or '.join(map(str, rounds))} times, "
            "round after round; each latency is the median of the rounds, index time too, and "
            "peak RSS the largest"
        )
    elif repeated:
        # by dataset: the harness repeats small datasets (`--small-repeat`) for every system
        counts = {}
        for n, s, d in repeated:
            counts.setdefault(d, {}).setdefault(n, []).append(s)
        parts = []
        for d, by_n in counts.items():
            ran = [r for r in data[d].values() if not r.get("skipped") and not r.get("error")]
            if len(by_n) == 1 and len(next(iter(by_n.values()))) == len(ran):
                parts.append(f"every pair on {d} ({next(iter(by_n))})")
            else:
                parts.extend(f"{s} on {d} ({n})" for n, ss in by_n.items() for s in ss)
        L.append(
            "- rounds: "
            + ", ".join(parts)
            + " ran that many times, round after round (each latency the median of the rounds, "
            "index time too, peak RSS the largest); every other row is one run"
        )
    if busy:
        L.append(
            "- caution: other processes used more than "
            f"{OTHERS_CPU_CAUTION} of a core during these runs (the largest round's share in "
            "brackets; older records without that measure: the 1-minute load average at the "
            "start, above 1), so their latencies are noisier: " + ", ".join(busy)
        )
    L.append("")
    L.append(f"![p50 latency against corpus size]({chart_rel})")
    L.append("")
    L.append(f"(Chart: {', '.join(chart_sets)}; log-log.)")
    L.append("")
    for d in sorted(data, key=lambda d: docs_of(data[d])):
        L += dataset_table(d, data[d])
    L.append("Versions:")
    L.append("")
    L += versions_table(data)
    L.append("")
    return "\n".join(L)


def splice(doc_path, body):
    text = open(doc_path).read() if os.path.exists(doc_path) else "# Benchmarks\n"
    block = f"{BEGIN}\n{body}\n{END}"
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        a = text.index(BEGIN)
        b = text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n{block}\n"
    with open(doc_path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", default=os.path.join(BENCH, "results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    ap.add_argument("--chart", default=os.path.join(ROOT, "docs", "bench-p50.png"))
    ap.add_argument("--command", default=None,
                    help="the command to quote (default: results/run.json's, else bench/run.sh)")
    ap.add_argument("--print", action="store_true",
                    help="print the section instead of splicing; the chart is not written")
    a = ap.parse_args()
    if a.command is None:
        try:
            with open(os.path.join(a.results, "run.json")) as f:
                a.command = json.load(f)["command"]
        except (OSError, ValueError, KeyError):
            a.command = "bench/run.sh"
    data = load(a.results)
    if not data:
        sys.exit(f"report: no results under {a.results}")
    sets = chart(data, None if a.print else a.chart)
    rel = os.path.relpath(a.chart, os.path.dirname(os.path.abspath(a.doc)))
    body = section(data, rel, sets, a.command)
    if a.print:
        print(body)
    else:
        splice(a.doc, body)
        print(f"report: wrote {a.doc} and {a.chart}")


if __name__ == "__main__":
    main()
