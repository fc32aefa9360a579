"""Shared pieces of the peer runners: the dataset contract, the latency method, the metrics,
RRF and the result JSON. Every runner measures the same way, so the numbers compare.

Latency method (the same for every system, Finder's `finder-bench run` included): per mode,
one untimed warm-up pass over the queries, then each query timed on its own with
`time.perf_counter` for the top 10 ids; p50/p95/p99/mean over all queries. nDCG@10 and
recall@10 come from those same top-10 lists: gains are the qrels scores (binary or graded,
trec_eval's linear gain), log2 discount, ideal DCG from the qrels; averaged over the queries
that have at least one relevant judgement.
"""
import argparse
import importlib.metadata
import json
import math
import os
import signal
import sys
import time

import numpy as np

# RRF's constant for every peer's hybrid, matched to Finder's default
# (crates/core/src/settings.rs: finder.rrf_k), as the HNSW settings below are.
RRF_K = int(os.environ.get("FINDER_BENCH_RRF_K", "20"))
FUSE_DEPTH = 100
TOP = 10
MODES = ("lexical", "dense", "hybrid")
# HNSW settings for every peer with a graph index (qdrant-edge, pgvector, LanceDB's
# IVF_HNSW_SQ), matched to Finder's defaults (crates/ann/src/lib.rs: m 32 since the run that
# added hnsw_ef below, 16 before; ef_construction 200). The search beam is hnsw_ef(docs).
HNSW_M = int(os.environ.get("FINDER_BENCH_HNSW_M", "32"))
HNSW_EF_CONSTRUCTION = int(os.environ.get("FINDER_BENCH_HNSW_EFC", "200"))


def hnsw_ef(docs):
    """The beam Finder's vector channel walks with over `docs` vectors at its defaults, in the
    dense mode as in the hybrid: 3 x sqrt(docs) (crates/core/src/settings/mod.rs:
    BEAM_PER_SQRT_ROW), never below its window of 1.5 x the list depth of 200
    (crates/index/src/vector/search.rs). Runs before it gave every size 300 (128 before
    6352ce9). FINDER_BENCH_HNSW_EF sets one beam for every size."""
    if os.environ.get("FINDER_BENCH_HNSW_EF"):
        return int(os.environ["FINDER_BENCH_HNSW_EF"])
    return max(300, math.ceil(3 * math.sqrt(docs)))
# Each mode's top-10 id lists, written beside the result (lists.json) for the harness, which
# compares the dense lists with the exact neighbours.
LISTS = {}


# ----------------------------------------------------------------------------- dataset


class Dataset:
    def __init__(self, path, queries_limit=None):
        self.path = os.path.abspath(path)
        with open(os.path.join(path, "meta.json")) as f:
            self.meta = json.load(f)
        self.name = self.meta.get("name") or os.path.basename(self.path)
        self.dim = int(self.meta["dim"])
        self.queries = []  # (id, text)
        with open(os.path.join(path, "queries.jsonl")) as f:
            for line in f:
                if line.strip():
                    q = json.loads(line)
                    self.queries.append((str(q["id"]), q["text"]))
        qv = np.fromfile(os.path.join(path, "queries.f32"), dtype="<f4")
        self.query_vectors = qv.reshape(-1, self.dim)
        assert len(self.query_vectors) == len(self.queries), "queries.f32 rows != queries.jsonl lines"
        if queries_limit:
            self.queries = self.queries[:queries_limit]
            self.query_vectors = self.query_vectors[:queries_limit]
        self.qrels = {}
        with open(os.path.join(path, "qrels.tsv")) as f:
            for i, line in enumerate(f):
                parts = line.rstrip("\n").split("\t")
                if i == 0 and parts[0] == "query-id":
                    continue
                if len(parts) < 3:
                    continue
                score = float(parts[2])
                if score > 0:
                    self.qrels.setdefault(parts[0], {})[parts[1]] = score
        n = self.meta.get("docs")
        size = os.path.getsize(os.path.join(path, "corpus.f32"))
        self.docs = size // (4 * self.dim)
        if n is not None:
            assert int(n) == self.docs, f"meta.docs {n} != corpus.f32 rows {self.docs}"

    def doc_vectors(self):
        """N×dim float32, memory-mapped (row i = corpus line i)."""
        return np.memmap(os.path.join(self.path, "corpus.f32"), dtype="<f4", mode="r").reshape(
            -1, self.dim
        )

    def corpus(self):
        """Yields (row, id, title, text) in file order."""
        with open(os.path.join(self.path, "corpus.jsonl")) as f:
            row = 0
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                yield row, str(d["id"]), d.get("title") or "", d.get("text") or ""
                row += 1

    def corpus_batches(self, size=10000):
        batch = []
        for item in self.corpus():
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch


def body(title, text):
    """The one text field every peer indexes: title and text together."""
    return f"{title}\n{text}" if title else text


# ----------------------------------------------------------------------------- measuring


def run_mode(search, ds, mode):
    """search(i) -> list of doc ids (best first) for query i. Returns the mode's result dict."""
    n = len(ds.queries)
    for i in range(n):  # warm-up, untimed
        search(i)
    lat = np.empty(n)
    results = []
    for i in range(n):
        t0 = time.perf_counter()
        ids = search(i)
        lat[i] = time.perf_counter() - t0
        results.append(list(ids)[:TOP])
    LISTS[mode] = results
    out = latency_stats(lat)
    out.update(quality(ds, results))
    print(
        f"  {mode:8s} p50 {out['p50_ms']:.3f} ms  p99 {out['p99_ms']:.3f} ms  "
        f"nDCG@10 {out['ndcg10']}",
        file=sys.stderr,
        flush=True,
    )
    return out


def run_modes(res, modes, ds, wanted):
    """Runs each wanted mode (modes: name -> search(i)) into res["modes"]."""
    for m in wanted:
        res["modes"][m] = run_mode(modes[m], ds, m)


def client_fused_modes(lexical, dense):
    """The modes of a peer with no fusion of its own, from lexical(i, k) and dense(i, k)
    (best-first id lists): hybrid is RRF of each side's top FUSE_DEPTH, fused here."""
    return {
        "lexical": lambda i: lexical(i, TOP),
        "dense": lambda i: dense(i, TOP),
        "hybrid": lambda i: rrf([lexical(i, FUSE_DEPTH), dense(i, FUSE_DEPTH)]),
    }


def latency_stats(lat_s):
    ms = np.asarray(lat_s) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 4),
        "p95_ms": round(float(np.percentile(ms, 95)), 4),
        "p99_ms": round(float(np.percentile(ms, 99)), 4),
        "mean_ms": round(float(ms.mean()), 4),
    }


def quality(ds, results):
    nd, rc = [], []
    for (qid, _), ids in zip(ds.queries, results):
        rel = ds.qrels.get(qid)
        if not rel:
            continue
        dcg = sum(rel.get(d, 0.0) / math.log2(r + 2) for r, d in enumerate(ids[:TOP]))
        ideal = sorted(rel.values(), reverse=True)[:TOP]
        idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
        nd.append(dcg / idcg if idcg > 0 else 0.0)
        rc.append(len(set(ids[:TOP]) & set(rel)) / len(rel))
    if not nd:
        return {"ndcg10": None, "recall10": None, "judged_queries": 0}
    return {
        "ndcg10": round(float(np.mean(nd)), 4),
        "recall10": round(float(np.mean(rc)), 4),
        "judged_queries": len(nd),
    }


def rrf(lists, k=RRF_K, top=TOP):
    """Reciprocal rank fusion of best-first id lists; ties by first appearance."""
    score = {}
    for lst in lists:
        for r, d in enumerate(lst):
            score[d] = score.get(d, 0.0) + 1.0 / (k + r + 1)
    return sorted(score, key=lambda d: -score[d])[:top]


def topk_dot(matrix, q, k):
    """Exact top-k rows of matrix by dot product with q (best first)."""
    s = matrix @ q
    k = min(k, len(s))
    idx = np.argpartition(-s, k - 1)[:k]
    return idx[np.argsort(-s[idx], kind="stable")]


class Timer:
    def __init__(self):
        self.t0 = time.perf_counter()

    def s(self):
        return round(time.perf_counter() - self.t0, 3)


def dir_bytes(path, apparent=False):
    """Bytes the folder takes on disk: allocated blocks (what `du` says), so preallocated
    sparse files (qdrant's 32 MiB mmap pages) count for what they hold; apparent=True sums
    file lengths instead."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            total += st.st_size if apparent else st.st_blocks * 512
    return total


def versions(*packages):
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for p in packages:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = None
    return out


def rss_now():
    """Current RSS of this process (bytes), for progress lines."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


# ----------------------------------------------------------------------------- runner CLI


def parse_args(system):
    ap = argparse.ArgumentParser(description=f"benchmark runner for {system}")
    ap.add_argument("--data", required=True, help="dataset folder (bench data contract)")
    ap.add_argument("--out", required=True, help="result JSON to write")
    ap.add_argument("--scratch", required=True, help="folder for the index (deleted afterwards)")
    ap.add_argument("--queries-limit", type=int, default=None)
    ap.add_argument("--modes", default=",".join(MODES))
    a = ap.parse_args()
    a.modes = [m for m in a.modes.split(",") if m]
    # the harness's timeout sends SIGTERM: exit through `finally` blocks (pgvector's server)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(a.scratch, exist_ok=True)
    return a


def new_result(system, ds):
    return {
        "system": system,
        "dataset": ds.name,
        "docs": ds.docs,
        "queries": len(ds.queries),
        "index_s": None,
        "index_lexical_s": None,
        "index_vector_s": None,
        "index_bytes": None,
        "peak_rss_bytes": None,
        "modes": {},
        "notes": [],
        "versions": {},
    }


def write_result(path, result):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    if LISTS:
        with open(os.path.join(os.path.dirname(os.path.abspath(path)), "lists.json"), "w") as f:
            json.dump(LISTS, f)


def log(*a):
    print(*a, file=sys.stderr, flush=True)
