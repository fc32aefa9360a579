#!/usr/bin/env python3
"""Known-item queries: does a word that only one note holds find that note?

Indexes a notes vault into a scratch folder (or reuses --index), serves it, and asks for
words of six or more letters whose spelling appears in exactly one note. Words the lexical
list alone does not find in their note are skipped. The analyser stems, so another note may
hold the same stem: the lexical list is not always right either. Prints how often the note is
first and in the top 10 with the defaults, with hybrid alone (no graph channels, no recency)
and with the lexical list alone (which finds every asked note in its top 10 by construction).

  python3 bench/known_items.py ../shared/data/dendron_site_vault/notes \
      --config /tmp/dendron.toml --queries 100
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
import urllib.request

PLAIN = {"graph.boost": False, "graph.entities": False, "graph.neighbours": False,
         "refine.recency": False}
PRESETS = {
    "defaults": {},
    "hybrid": PLAIN,
    "lexical": {**PLAIN, "vector.enabled": False},
}
WORD = re.compile(r"(?<![\w./:-])([a-z]{6,})(?![\w./:-])")


def single_note_words(vault):
    count, where = collections.Counter(), {}
    for d, _, files in os.walk(vault):
        for f in files:
            if not f.endswith(".md"):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                words = set(WORD.findall(fh.read().lower()))
            for w in words:
                count[w] += 1
                where[w] = os.path.relpath(path, vault)
    return {w: where[w] for w, c in count.items() if c == 1}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vault")
    ap.add_argument("--config", help="finder.toml for the index (e.g. the link order)")
    ap.add_argument("--index", help="an index of the vault to reuse instead of building one")
    ap.add_argument("--finder", default="target/release/finder")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--port", type=int, default=7795)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()

    work = None if args.index else tempfile.mkdtemp(prefix="finder-known-")
    server = None
    try:
        index = args.index
        if index is None:
            index = os.path.join(work, "index")
            os.makedirs(index)
            if args.config:
                shutil.copy(args.config, os.path.join(index, "finder.toml"))
            subprocess.run([args.finder, "index", args.vault, "--index", index], check=True,
                           stdout=subprocess.DEVNULL)
        command = [args.finder, "serve", "--index", index, "--addr", f"127.0.0.1:{args.port}"]
        if args.config:
            command += ["--config", args.config]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{args.port}"
        for _ in range(400):
            if server.poll() is not None:
                sys.exit(f"finder serve exited with {server.returncode}")
            try:
                urllib.request.urlopen(base + "/health", timeout=10)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit(f"finder serve did not answer on {base}")

        def ask(query, settings):
            body = json.dumps({"query": query, "limit": 10, "settings": settings}).encode()
            req = urllib.request.Request(base + "/v1/search", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return [h["id"] for h in json.load(r)["hits"]]

        words = single_note_words(args.vault)
        order = sorted(words)
        random.Random(args.seed).shuffle(order)
        first = collections.Counter()
        top10 = collections.Counter()
        asked = 0
        for w in order:
            if asked == args.queries:
                break
            if words[w] not in ask(w, PRESETS["lexical"]):
                continue
            asked += 1
            for name, settings in PRESETS.items():
                ids = ask(w, settings)
                first[name] += ids[:1] == [words[w]]
                top10[name] += words[w] in ids
        if asked == 0:
            sys.exit("no word of one note was found by the lexical list")
        out = {name: {"first": first[name] / asked, "top10": top10[name] / asked}
               for name in PRESETS}
        print(json.dumps({"queries": asked, **out}, indent=2))
    finally:
        if server:
            server.terminate()
            server.wait()
        if work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
