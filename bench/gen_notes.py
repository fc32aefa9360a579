#!/usr/bin/env python3
"""A synthetic notes folder for the watch benchmarks: N Markdown notes, 1,000 per folder, each
a title, 40 words from a small vocabulary, two wiki links to random notes and a tag (seeded).

  python3 bench/gen_notes.py /tmp/syn/notes --notes 100000
  python3 bench/watch_latency.py /tmp/syn/notes --config C --edits 50   # C: embed none
"""

import argparse
import os
import random

WORDS = ("alpha beta gamma delta river stone cloud garden engine signal pattern orbit lantern "
         "harbor meadow circuit ledger compass canvas anchor").split()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--notes", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    for i in range(args.notes):
        folder = os.path.join(args.out, f"d{i // 1000:03d}")
        if i % 1000 == 0:
            os.makedirs(folder, exist_ok=True)
        title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {i}"
        body = " ".join(rng.choice(WORDS) for _ in range(40))
        links = " ".join(f"[[n{rng.randrange(args.notes)}]]" for _ in range(2))
        with open(os.path.join(folder, f"n{i}.md"), "w") as f:
            f.write(f"# {title}\n\n{body} {links} #{rng.choice(WORDS)}\n")


if __name__ == "__main__":
    main()
