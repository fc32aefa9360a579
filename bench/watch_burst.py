#!/usr/bin/env python3
"""Rapid edits, renames and deletes under `finder watch`, then a comparison with a clean build.

Copies the first N notes of a vault (sorted by name) to a scratch folder, starts `finder watch`
on it, and makes OPS changes: appends to a note, renames a note to a
new name, deletes a note, or writes a new one (seeded), pausing up to --pause-ms between them. It then waits for the watch to go quiet
(commit and vectors unchanged for 3 s, every fragment embedded), stops it, and builds the same files into a second index. Both
must hold the same sources, fragments, vectors and graph edges (by kind); the watch must have
reported no error. Prints the counts, the watch's peak RSS and, with --rss-every K, its RSS
after every K changes (the growth is the last sample over the first).

  python3 bench/watch_burst.py ../shared/data/dendron_site_vault/notes --files 100 --ops 1000
  python3 bench/watch_burst.py ../shared/data/dendron_site_vault/notes --ops 10000 --rss-every 1000
"""

import argparse
import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time


def status(finder, index):
    out = subprocess.run([finder, "status", "--index", index, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def edges_by_kind(index):
    with open(os.path.join(index, "graph", "graph.json")) as f:
        graph = json.load(f)
    return dict(collections.Counter(str(kind) for _, _, kind in graph["edges"]))


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field))


def wait_quiet(finder, index):
    """Until the last commit and the vectors stay unchanged for 3 s, every fragment embedded."""
    last, since = None, time.monotonic()
    while True:
        s = status(finder, index)
        v = s.get("vectors")
        now = (s["committed_at"], v and v.get("done"))
        if now != last:
            last, since = now, time.monotonic()
        caught_up = v is None or (not v.get("pending") and v.get("done") == s["fragments"])
        if caught_up and time.monotonic() - since >= 3:
            return
        time.sleep(0.2)


def summary(finder, index):
    s = status(finder, index)
    vectors = (s.get("vectors") or {}).get("done")
    return {"sources": s["sources"], "fragments": s["fragments"], "vectors": vectors,
            "edges": edges_by_kind(index)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vault")
    ap.add_argument("--config", help="finder.toml for both indexes")
    ap.add_argument("--finder", default="target/release/finder")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--pause-ms", type=float, default=10, help="most pause between changes")
    ap.add_argument("--rss-every", type=int, default=0,
                    help="sample the watch's RSS after every K changes, once it caught up")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="finder-burst-")
    notes = os.path.join(work, "notes")
    watched, clean = os.path.join(work, "watched"), os.path.join(work, "clean")
    os.makedirs(notes)
    names = sorted(f for f in os.listdir(args.vault) if f.endswith(".md"))[: args.files]
    for name in names:
        shutil.copy(os.path.join(args.vault, name), notes)
    for index in (watched, clean):
        os.makedirs(index)
        if args.config:
            shutil.copy(args.config, os.path.join(index, "finder.toml"))
    log = open(os.path.join(work, "watch.log"), "w+")
    watch = subprocess.Popen([args.finder, "watch", notes, "--index", watched, "--rescan-secs", "0"],
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        while not os.path.exists(os.path.join(watched, "lexical")):
            time.sleep(0.05)
        rng = random.Random(args.seed)
        rss = []
        counts = collections.Counter()
        started = time.monotonic()
        for i in range(args.ops):
            present = sorted(os.listdir(notes))
            op = rng.choice(["edit"] * 5 + ["rename"] * 2 + ["delete", "create"])
            if len(present) < args.files // 2:
                op = "create"
            name = rng.choice(present)
            path = os.path.join(notes, name)
            if op == "edit":
                with open(path, "a") as f:
                    f.write(f"\n\nEdit {i}: burst{i}word\n")
            elif op == "rename":
                # one prefix, however often a note was renamed: names stay short
                base = re.sub(r"^(renamed-\d+-)+", "", name)
                os.rename(path, os.path.join(notes, f"renamed-{i}-{base}"))
            elif op == "delete":
                os.remove(path)
            else:
                with open(os.path.join(notes, f"new-{i}.md"), "w") as f:
                    f.write(f"# New {i}\n\nCreated in the burst, see [[{name[:-3]}]].\n")
            counts[op] += 1
            time.sleep(rng.uniform(0, args.pause_ms) / 1000)
            if args.rss_every and (i + 1) % args.rss_every == 0:
                wait_quiet(args.finder, watched)
                rss.append(round(rss_kib(watch.pid) / 1024, 1))
        burst_s = time.monotonic() - started
        wait_quiet(args.finder, watched)
        peak_kib = rss_kib(watch.pid, "VmHWM")
    finally:
        watch.terminate()
        watch.wait()
    log.seek(0)
    lines = log.read().splitlines()
    errors = [l for l in lines if l.startswith("warning") or "error" in l.lower()]
    subprocess.run([args.finder, "index", notes, "--index", clean], check=True,
                   stdout=subprocess.DEVNULL)
    a, b = summary(args.finder, watched), summary(args.finder, clean)
    out = {"ops": dict(counts), "burst_s": round(burst_s, 2), "runs": sum(" added, " in l for l in lines),
           "errors": errors, "watched": a, "clean": b, "equal": a == b,
           "watch_peak_rss_mib": round(peak_kib / 1024, 1)}
    if rss:
        out["rss_mib"] = rss
        out["rss_growth"] = round(rss[-1] / rss[0] - 1, 3)
    print(json.dumps(out, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if a == b and not errors else 1)


if __name__ == "__main__":
    main()
