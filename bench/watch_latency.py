#!/usr/bin/env python3
"""Edit -> searchable latency of `finder serve --watch` on a copy of a notes vault.

Copies the vault to a scratch folder, indexes it, serves it with --watch, then appends a
unique word to one note at a time (seeded choice, 50-150 ms apart) and polls the search API
until the word finds that note; then until /v1/status says the graph is current.
Prints p50 / p95 / max of both and the server's idle CPU over 10 s.

  python3 bench/watch_latency.py ../shared/data/dendron_site_vault/notes \
      --config /tmp/dendron.toml --edits 200
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request


def post(url, body):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vault")
    ap.add_argument("--config", help="finder.toml for the index (e.g. embed none, link order)")
    ap.add_argument("--finder", default="target/release/finder")
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--port", type=int, default=7791)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="finder-watch-")
    notes, index = os.path.join(work, "notes"), os.path.join(work, "index")
    shutil.copytree(args.vault, notes)
    os.makedirs(index)
    if args.config:
        shutil.copy(args.config, os.path.join(index, "finder.toml"))
    subprocess.run([args.finder, "index", notes, "--index", index], check=True,
                   stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    server = subprocess.Popen(
        [args.finder, "serve", "--index", index, "--watch", "--addr", f"127.0.0.1:{args.port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                get(base + "/health")
                break
            except OSError:
                time.sleep(0.05)
        files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(notes) for f in fs if f.endswith(".md"))
        rng = random.Random(args.seed)
        searchable, graphed = [], []
        for i in range(args.edits):
            path = rng.choice(files)
            note_id = os.path.relpath(path, notes)
            word = f"zqwatch{i}x"
            with open(path, "a") as f:
                f.write(f"\n\nEdited: {word}\n")
            t0 = time.monotonic()
            while True:
                hits = post(base + "/v1/search", {"query": word, "limit": 10})["hits"]
                if any(h["id"] == note_id for h in hits):
                    break
                if time.monotonic() - t0 > 30:
                    sys.exit(f"edit {i} of {note_id} not searchable after 30 s")
                time.sleep(0.005)
            searchable.append(time.monotonic() - t0)
            while not get(base + "/v1/status")["index"].get("graph", {}).get("current"):
                if time.monotonic() - t0 > 30:
                    sys.exit(f"graph not current 30 s after edit {i}")
                time.sleep(0.005)
            graphed.append(time.monotonic() - t0)
            time.sleep(rng.uniform(0.05, 0.15))
        time.sleep(1)
        before = cpu_seconds(server.pid)
        time.sleep(10)
        idle = (cpu_seconds(server.pid) - before) / 10
        out = {
            "edits": args.edits,
            "notes": len(files),
            "searchable_s": {"p50": pct(searchable, 50), "p95": pct(searchable, 95),
                             "max": max(searchable)},
            "graph_current_s": {"p50": pct(graphed, 50), "p95": pct(graphed, 95),
                                "max": max(graphed)},
            "idle_cpu_share": idle,
        }
        print(json.dumps(out, indent=2))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
