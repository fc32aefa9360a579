#!/usr/bin/env python3
"""Runs every (system, dataset) pair in its own subprocess and records one result JSON each
in bench/results/<dataset>/<system>.json.

- peak RSS: the child's ru_maxrss from os.wait4 (the largest resident set of the runner and
  any process it waited for); a runner that drives a server of its own (pgvector) adds the
  server's sampled peak (`server_peak_pss_bytes`).
- a per-run timeout (SIGTERM, then SIGKILL 30 s later, to the run's process group);
- the index lives in a scratch folder that is deleted after each run;
- a run that fails, times out or is skipped by a cap writes a JSON saying why (`error` or
  `skipped`), and the harness goes on with the next one;
- `--repeat N` runs every pair N times, in rounds (each round runs every pair once, so a
  machine that slows down or speeds up during the run weighs on every system alike), and
  keeps per mode the median of the rounds' latencies with each round's p50 beside it
  (`modes.<mode>.rounds_p50_ms`, in round order; peak RSS is the largest of the rounds).
- small datasets (at most `--small-docs` documents, default 100,000: SciFact and the 10k and
  100k corpora) run at least `--small-repeat` rounds (default 3): their queries take about a
  tenth of a millisecond, and single rounds moved Finder/peer ratios by a third at 10k and
  between 0.71x and 1.61x at 100k.

    python bench/harness.py --data-root ~/.cache/finder/bench/data \
        --datasets scifact,synthetic-10k --systems finder,tantivy,qdrant-edge
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
from statistics import median
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
PEERS = ["tantivy", "qdrant-edge", "lancedb", "sqlite", "bm25s", "pgvector"]
SYSTEMS = ["finder"] + PEERS
MODULE = {"qdrant-edge": "qdrant_edge"}
DEFAULT_CAPS = os.path.join(BENCH, "caps.json")


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gib": mem, "kernel": platform.release()}


def load_caps(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def dataset_docs(ddir):
    with open(os.path.join(ddir, "meta.json")) as f:
        return int(json.load(f)["docs"])


def rounds_for(docs, args):
    """Rounds for a dataset of `docs` documents: `--repeat`, and at least `--small-repeat`
    when it has at most `--small-docs`."""
    return max(args.repeat, args.small_repeat) if docs <= args.small_docs else args.repeat


def exact_top10(ddir, cache_dir, dname):
    """Row ids of the exact top 10 (dot product of unit vectors = cosine) for every query,
    computed once per dataset in chunks and cached; with the corpus ids."""
    import numpy as np

    with open(os.path.join(ddir, "meta.json")) as f:
        meta = json.load(f)
    dim = int(meta["dim"])
    os.makedirs(cache_dir, exist_ok=True)
    stamp = os.stat(os.path.join(ddir, "corpus.f32"))
    cache = os.path.join(cache_dir, f"{dname}-exact10-{stamp.st_size}-{int(stamp.st_mtime)}.npy")
    q = np.fromfile(os.path.join(ddir, "queries.f32"), dtype="<f4").reshape(-1, dim)
    if os.path.exists(cache):
        top = np.load(cache)
    else:
        docs = np.memmap(os.path.join(ddir, "corpus.f32"), dtype="<f4", mode="r").reshape(-1, dim)
        best_s = np.full((len(q), 10), -np.inf, dtype="f4")
        best_i = np.zeros((len(q), 10), dtype="i8")
        step = 50_000
        for start in range(0, len(docs), step):
            s = np.asarray(docs[start:start + step]) @ q.T  # rows × queries
            k = min(10, len(s))
            part = np.argpartition(-s, k - 1, axis=0)[:k]  # k × queries
            cand_s = np.concatenate([best_s, np.take_along_axis(s, part, 0).T], axis=1)
            cand_i = np.concatenate([best_i, part.T + start], axis=1)
            order = np.argsort(-cand_s, axis=1, kind="stable")[:, :10]
            best_s = np.take_along_axis(cand_s, order, 1)
            best_i = np.take_along_axis(cand_i, order, 1)
        top = best_i
        np.save(cache, top)
    ids = []
    with open(os.path.join(ddir, "corpus.jsonl")) as f:
        for line in f:
            if line.strip():
                ids.append(str(json.loads(line)["id"]))
    return [[ids[r] for r in row] for row in top]


def add_exact_overlap(rec, lists_path, ddir, args, dname):
    """modes.dense.exact_overlap10: mean share of the exact top 10 in the system's dense top
    10 (1.0 for exact search; below it for an approximate index). Computed in a child process:
    the harness itself must stay small, because a child started with vfork inherits the
    harness's peak RSS into its own ru_maxrss."""
    if not os.path.exists(lists_path) or "dense" not in (rec.get("modes") or {}):
        return
    out = subprocess.run(
        [args.python, os.path.abspath(__file__), "--overlap", ddir, lists_path, args.cache, dname],
        capture_output=True, text=True,
    )
    try:
        rec["modes"]["dense"]["exact_overlap10"] = float(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        rec.setdefault("notes", []).append(
            "exact overlap not computed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
        )


def overlap_main(ddir, lists_path, cache_dir, dname):
    with open(lists_path) as f:
        lists = json.load(f)["dense"]
    exact = exact_top10(ddir, cache_dir, dname)
    shares = [len(set(got) & set(exact[i])) / 10 for i, got in enumerate(lists)]
    print(round(sum(shares) / len(shares), 4))


def vm_hwm():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def cpu_snapshot():
    """(CPU seconds the whole machine has been busy since boot, from /proc/stat; this
    harness's own CPU seconds), or None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        busy = (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    me = resource.getrusage(resource.RUSAGE_SELF)
    return busy, me.ru_utime + me.ru_stime


def others_cpu(start, end, rusage, wall):
    """Cores' worth of CPU that processes other than the run and this harness used during the
    run: the machine's busy time less the run's own user and system time, over its wall
    time. Unlike the load average, it does not hold the previous run's work."""
    if start is None or end is None or rusage is None or wall <= 0:
        return None
    own = rusage.ru_utime + rusage.ru_stime + (end[1] - start[1])
    return round(max(0.0, end[0] - start[0] - own) / wall, 2)


def command_for(system, ddir, out, scratch, queries_limit, args):
    if system == "finder":
        # boost: hybrid with the graph boost, which only Finder has (its own table line)
        cmd = [args.finder_bin, "run", "--data", ddir, "--out", out,
               "--modes", "lexical,dense,hybrid,boost"]
    else:
        cmd = [
            args.python,
            "-m",
            "peers." + MODULE.get(system, system),
            "--data",
            ddir,
            "--out",
            out,
            "--scratch",
            scratch,
        ]
    if queries_limit:
        cmd += ["--queries-limit", str(queries_limit)]
    return cmd


def run_one(system, dname, ddir, args, caps):
    out_dir = os.path.join(args.results, dname)
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{system}.json")
    docs = dataset_docs(ddir)
    base = {
        "system": system,
        "dataset": dname,
        "docs": docs,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
    }
    cap = caps.get("max_docs", {}).get(system)
    if cap is not None and docs > cap and not args.ignore_caps:
        reason = caps.get("why", {}).get(system, "")
        rec = dict(base, skipped=f"capped: {docs} docs > max_docs {cap} for {system}"
                   + (f" ({reason})" if reason else ""))
        write(out, rec)
        print(f"[{dname}] {system}: skipped ({rec['skipped']})", flush=True)
        return rec
    ql = args.queries_limit
    large = caps.get("large_queries_limit")
    if not ql and large and docs >= large.get("min_docs", 1 << 62):
        ql = large["limit"]
    scratch = os.path.join(args.scratch, f"{dname}-{system}")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch, exist_ok=True)
    tmp_out = os.path.join(scratch, "result.json")
    cmd = command_for(system, ddir, tmp_out, scratch, ql, args)
    env = dict(os.environ)
    env["TMPDIR"] = scratch
    env["FINDER_BENCH_SCRATCH"] = scratch
    pg_tmp = None
    if system == "pgvector":
        # the server's user must reach its folder: keep it out of a 0700 home
        pg_tmp = os.path.join(args.pg_tmp, f"finder-bench-pg-{os.getpid()}")
        os.makedirs(pg_tmp, exist_ok=True)
        os.chmod(pg_tmp, 0o755)
        env["FINDER_BENCH_PG_TMP"] = pg_tmp
    log_dir = os.path.join(args.logs, dname)
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, f"{system}.log")
    print(f"[{dname}] {system}: {' '.join(cmd)}", flush=True)
    load_start = os.getloadavg()[0]
    harness_hwm = vm_hwm()
    cpu_start = cpu_snapshot()
    t0 = time.monotonic()
    status, rusage, timed_out = None, None, False
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            proc = subprocess.Popen(
                cmd, cwd=BENCH, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            rec = dict(base, error=f"could not start: {e}", command=cmd)
            write(out, rec)
            print(f"[{dname}] {system}: FAILED to start: {e}", flush=True)
            return rec
        deadline = t0 + args.timeout
        term_at = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if term_at is None and now > deadline:
                timed_out = True
                term_at = now
                killpg(proc.pid, signal.SIGTERM)
            elif term_at is not None and now > term_at + 30:
                killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any
    wall = round(time.monotonic() - t0, 1)
    # 1-minute load average before and after (it still holds the previous run's work), and
    # what other processes used meanwhile
    load = {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)}
    others = others_cpu(cpu_start, cpu_snapshot(), rusage, time.monotonic() - t0)
    if pg_tmp:
        cleanup_pg(pg_tmp)
    maxrss = rusage.ru_maxrss * 1024
    rec = None
    if not timed_out and proc.returncode == 0 and os.path.exists(tmp_out):
        with open(tmp_out) as f:
            rec = json.load(f)
        extra = rec.get("server_peak_pss_bytes") or 0
        rec["peak_rss_client_bytes"] = maxrss
        # a floor under every ru_maxrss: what the harness itself had when it spawned the run
        rec["harness_hwm_bytes"] = harness_hwm
        rec["peak_rss_bytes"] = maxrss + extra
        rec["dataset"] = dname
        rec["wall_s"] = wall
        rec["load_avg_1m"] = load
        rec["others_cpu"] = others
        rec["date"] = base["date"]
        rec["machine"] = base["machine"]
        rec["command"] = cmd_display(cmd)
        if system == "finder" and not rec.get("versions"):
            rec["versions"] = {"finder": workspace_version()}
        if ql:
            rec.setdefault("notes", []).append(f"queries limited to the first {ql}")
        add_exact_overlap(rec, os.path.join(scratch, "lists.json"), ddir, args, dname)
        print(
            f"[{dname}] {system}: ok in {wall} s, peak RSS {rec['peak_rss_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    else:
        tail = tail_of(log_path)
        why = (
            f"timed out after {args.timeout} s"
            if timed_out
            else f"exit code {proc.returncode}" + ("" if os.path.exists(tmp_out) else ", no result")
        )
        rec = dict(base, error=why, log_tail=tail, wall_s=wall, peak_rss_bytes=maxrss,
                   load_avg_1m=load, command=cmd_display(cmd))
        print(f"[{dname}] {system}: FAILED ({why}); log: {log_path}", flush=True)
    write(out, rec)
    if not args.keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return rec


def merge_rounds(recs):
    """One record from a pair's rounds: the median of each latency figure and of the index
    time, the largest peak RSS, each round's p50 and load average kept; nDCG and sizes from
    the first round (they do not change between rounds). A pair with a failed round keeps
    the failure."""
    bad = next((r for r in recs if "error" in r or "skipped" in r), None)
    if bad is not None or len(recs) == 1:
        return bad or recs[0]
    out = json.loads(json.dumps(recs[0]))
    out["rounds"] = len(recs)
    for m, x in (out.get("modes") or {}).items():
        per = [(r.get("modes") or {}).get(m) or {} for r in recs]
        for key in ("mean_ms", "p50_ms", "p95_ms", "p99_ms",
                    "boost_p50_ms", "boost_p95_ms", "boost_p99_ms"):
            vals = [p[key] for p in per if p.get(key) is not None]
            if vals:
                x[key] = median(vals)
        x["rounds_p50_ms"] = [p.get("p50_ms") for p in per]
    for key in ("index_s", "index_lexical_s", "index_graph_s", "index_vector_s"):
        vals = [r[key] for r in recs if r.get(key) is not None]
        if vals:
            out[key] = median(vals)
    for key in ("peak_rss_bytes", "peak_rss_client_bytes", "self_rss_bytes"):
        vals = [r[key] for r in recs if r.get(key) is not None]
        if vals:
            out[key] = max(vals)
    out["load_avg_1m_rounds"] = [r.get("load_avg_1m") for r in recs]
    out["others_cpu_rounds"] = [r.get("others_cpu") for r in recs]
    out["wall_s"] = round(sum(r.get("wall_s") or 0 for r in recs), 1)
    return out


def workspace_version():
    """Finder's version from the workspace Cargo.toml ([workspace.package] version)."""
    try:
        section = None
        with open(os.path.join(ROOT, "Cargo.toml")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("["):
                    section = line
                elif section == "[workspace.package]" and line.startswith("version"):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def cmd_display(cmd):
    home = os.path.expanduser("~")
    return " ".join(c.replace(ROOT + "/", "").replace(home, "~") for c in cmd)


def killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cleanup_pg(pg_tmp):
    """Stops a server a killed pgvector runner left behind, then removes its folders."""
    for name in os.listdir(pg_tmp):
        d = os.path.join(pg_tmp, name)
        if os.path.exists(os.path.join(d, "data", "postmaster.pid")):
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "postgres.sh"), "stop", d],
                           capture_output=True)
    shutil.rmtree(pg_tmp, ignore_errors=True)


def tail_of(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def write(path, rec):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--overlap":
        return overlap_main(*sys.argv[2:])
    home = os.environ.get("FINDER_BENCH_HOME", os.path.expanduser("~/.cache/finder/bench"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data-root", default=os.path.join(home, "data"))
    ap.add_argument("--datasets", default="scifact,synthetic-10k,synthetic-100k,synthetic-1m",
                    help="folder names under --data-root, or paths")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("FINDER_BENCH_TIMEOUT", 7200)),
                    help="seconds per (system, dataset) run")
    ap.add_argument("--results", default=os.path.join(BENCH, "results"))
    ap.add_argument("--scratch", default=os.path.join(home, "scratch"))
    ap.add_argument("--logs", default=os.path.join(home, "logs"))
    ap.add_argument("--cache", default=os.path.join(home, "cache"),
                    help="exact nearest neighbours per dataset (for the dense overlap)")
    ap.add_argument("--pg-tmp", default="/tmp", help="parent of the PostgreSQL server folder")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the peers installed")
    ap.add_argument("--finder-bin", default=os.path.join(ROOT, "target", "release", "finder-bench"))
    ap.add_argument("--caps", default=DEFAULT_CAPS, help="JSON: max_docs per system, ...")
    ap.add_argument("--ignore-caps", action="store_true")
    ap.add_argument("--queries-limit", type=int, default=None)
    ap.add_argument("--keep-scratch", action="store_true")
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("FINDER_BENCH_REPEAT", 1)),
                    help="rounds over every (system, dataset) pair; latencies are the median")
    ap.add_argument("--small-repeat", type=int,
                    default=int(os.environ.get("FINDER_BENCH_SMALL_REPEAT", 3)),
                    help="rounds, at least, for datasets of at most --small-docs documents")
    ap.add_argument("--small-docs", type=int, default=100_000)
    args = ap.parse_args()
    # Every run starts in bench/ (the peers are imported from there): a path given relative to
    # the caller's folder must not change meaning on the way.
    for name in ("data_root", "results", "scratch", "logs", "cache", "pg_tmp", "finder_bin", "caps"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    if os.sep in args.python:
        args.python = os.path.abspath(args.python)
    if args.repeat < 1:
        ap.error(f"--repeat must be 1 or more, not {args.repeat}")
    if args.small_repeat < 1:
        ap.error(f"--small-repeat must be 1 or more, not {args.small_repeat}")
    caps = load_caps(args.caps)
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    datasets = []
    for d in [d for d in args.datasets.split(",") if d]:
        ddir = os.path.abspath(d) if os.path.isdir(d) else os.path.join(args.data_root, d)
        if not os.path.exists(os.path.join(ddir, "meta.json")):
            print(f"[{d}] no dataset at {ddir} (meta.json missing): skipped", flush=True)
            continue
        datasets.append((os.path.basename(os.path.normpath(ddir)), ddir))
    datasets.sort(key=lambda x: dataset_docs(x[1]))
    planned = {d: rounds_for(dataset_docs(ddir), args) for d, ddir in datasets}
    total = max(planned.values(), default=1)
    failures = 0
    rounds = {}
    for round_no in range(total):
        this_round = [(d, ddir) for d, ddir in datasets if planned[d] > round_no]
        if total > 1:
            names = "" if len(this_round) == len(datasets) else f" ({', '.join(d for d, _ in this_round)})"
            print(f"== round {round_no + 1} of {total}{names}", flush=True)
        for dname, ddir in this_round:
            for s in systems:
                if s == "finder" and not os.access(args.finder_bin, os.X_OK):
                    rec = {"system": s, "dataset": dname, "docs": dataset_docs(ddir),
                           "error": f"no executable {args.finder_bin} (cargo build --release -p finder-bench)"}
                    os.makedirs(os.path.join(args.results, dname), exist_ok=True)
                    write(os.path.join(args.results, dname, f"{s}.json"), rec)
                    print(f"[{dname}] finder: FAILED ({rec['error']})", flush=True)
                    failures += 1
                    continue
                recs = rounds.setdefault((dname, s), [])
                if recs and ("error" in recs[-1] or "skipped" in recs[-1]):
                    continue  # a pair that failed or is capped is not run again
                rec = run_one(s, dname, ddir, args, caps)
                failures += 1 if "error" in rec else 0
                recs.append(rec)
                if planned[dname] > 1:
                    write(os.path.join(args.results, dname, f"{s}.json"), merge_rounds(recs))
    print(f"done: {failures} failed run(s)", flush=True)


if __name__ == "__main__":
    main()
