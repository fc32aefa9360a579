#!/usr/bin/env python3
"""A small throwaway dataset in the shared data contract, for developing the runners without
the Rust generator (`finder-bench gen`). Zipf-distributed pseudo words, one relevant document
per query (the query's words are drawn from it), query vector = that document's vector plus
noise, so lexical, dense and hybrid all have something to find.

    python bench/toy_data.py --docs 3000 --queries 200 --out /tmp/bench-toy
    python bench/toy_data.py --beir ../shared/data/scifact --out /tmp/bench-scifact-text

With --beir, the corpus, test queries and qrels of a BEIR folder with random vectors: real
text for checking the lexical runners' nDCG, meaningless dense numbers.
"""
import argparse
import json
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    ap.add_argument("--beir", help="BEIR folder: real text, random vectors")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    if a.beir:
        return beir(a, rng)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = sorted({"".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(20000)})
    vocab = np.array(vocab)
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    p /= p.sum()
    docs = []
    with open(os.path.join(a.out, "corpus.jsonl"), "w") as f:
        for i in range(a.docs):
            words = rng.choice(vocab, size=int(rng.integers(40, 200)), p=p)
            title = " ".join(rng.choice(vocab, size=4, p=p))
            docs.append(words)
            f.write(json.dumps({"id": f"d{i}", "title": title, "text": " ".join(words)}) + "\n")
    dv = rng.standard_normal((a.docs, a.dim)).astype("<f4")
    dv /= np.linalg.norm(dv, axis=1, keepdims=True)
    dv.tofile(os.path.join(a.out, "corpus.f32"))
    targets = rng.choice(a.docs, size=a.queries, replace=False)
    qv = dv[targets] + 0.08 * rng.standard_normal((a.queries, a.dim)).astype("<f4")
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    qv.astype("<f4").tofile(os.path.join(a.out, "queries.f32"))
    with open(os.path.join(a.out, "queries.jsonl"), "w") as fq, open(
        os.path.join(a.out, "qrels.tsv"), "w"
    ) as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for j, t in enumerate(targets):
            # rarer words of the target make a findable query
            words = sorted(set(docs[t]), key=lambda w: -np.searchsorted(vocab, w))[:4]
            fq.write(json.dumps({"id": f"q{j}", "text": " ".join(words)}) + "\n")
            fr.write(f"q{j}\td{t}\t1\n")
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"name": os.path.basename(os.path.abspath(a.out)), "dim": a.dim, "docs": a.docs,
                   "queries": a.queries, "model": "random-unit", "generator": "bench/toy_data.py",
                   "seed": a.seed}, f)


def beir(a, rng):
    qrels = {}
    with open(os.path.join(a.beir, "qrels", "test.tsv")) as f:
        next(f)
        for line in f:
            q, d, sc = line.rstrip("\n").split("\t")
            qrels.setdefault(q, []).append((d, sc))
    n = 0
    with open(os.path.join(a.beir, "corpus.jsonl")) as f, open(
        os.path.join(a.out, "corpus.jsonl"), "w"
    ) as out:
        for line in f:
            d = json.loads(line)
            out.write(json.dumps({"id": d["_id"], "title": d.get("title", ""),
                                  "text": d.get("text", "")}) + "\n")
            n += 1
    qs = []
    with open(os.path.join(a.beir, "queries.jsonl")) as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                qs.append(q)
    with open(os.path.join(a.out, "queries.jsonl"), "w") as out:
        for q in qs:
            out.write(json.dumps({"id": q["_id"], "text": q["text"]}) + "\n")
    with open(os.path.join(a.out, "qrels.tsv"), "w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for q in qs:
            for d, sc in qrels[q["_id"]]:
                out.write(f"{q['_id']}\t{d}\t{sc}\n")
    for name, rows in (("corpus.f32", n), ("queries.f32", len(qs))):
        v = rng.standard_normal((rows, a.dim)).astype("<f4")
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        v.tofile(os.path.join(a.out, name))
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"name": os.path.basename(os.path.abspath(a.out)), "dim": a.dim, "docs": n,
                   "queries": len(qs), "model": "random-unit (text from BEIR)",
                   "generator": "bench/toy_data.py --beir"}, f)


if __name__ == "__main__":
    main()
