"""LanceDB (embedded, local folder) via its synchronous Python API.

- lexical: Lance's native full-text index (`create_index(config=FTS())`: BM25,
  simple tokenizer, lower case, English stemmer, English stop words, ASCII folding; no
  positions) over one column title+text; `search(q, query_type="fts")`.
- dense: below LANCEDB_INDEX_MIN docs (default 50,000) no vector index: exact flat scan with
  cosine distance. From there on an IVF_HNSW_SQ index (cosine; LanceDB's default partitions;
  m and ef_construction as the other HNSW peers), queried with nprobes 20 and common.py's beam
  (the plain scan would be exact but linear). Which one ran is in the notes.
- hybrid: LanceDB's native hybrid query (`query_type="hybrid"`, both sub-queries limited to
  100) with `RRFReranker(K=RRF_K)`, top 10 of the fused list.
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

os.environ.setdefault("LANCEDB_LOG", "error")  # per-query deprecation warnings otherwise
import lancedb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from lancedb.index import FTS, IvfHnswSq  # noqa: E402
from lancedb.rerankers import RRFReranker  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "lancedb"
INDEX_MIN = int(os.environ.get("LANCEDB_INDEX_MIN", "50000"))
NPROBES = 20


def main():
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("lancedb", "pylance", "pyarrow")
    path = os.path.join(a.scratch, "lancedb")
    db = lancedb.connect(path)
    vecs = ds.doc_vectors()
    schema = pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("body", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), ds.dim)),
        ]
    )

    def batches():
        for batch in ds.corpus_batches(20000):
            rows = np.array([b[0] for b in batch])
            flat = pa.array(np.ascontiguousarray(vecs[rows[0] : rows[-1] + 1]).reshape(-1))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([b[1] for b in batch], pa.string()),
                    pa.array([C.body(b[2], b[3]) for b in batch], pa.string()),
                    pa.FixedSizeListArray.from_arrays(flat, ds.dim),
                ],
                schema=schema,
            )

    t = C.Timer()
    tbl = db.create_table("docs", data=batches(), schema=schema)
    t_load = t.s()
    t1 = C.Timer()
    tbl.create_index("body", config=FTS(with_position=False), replace=True)
    res["index_lexical_s"] = t1.s()
    t2 = C.Timer()
    vector_index = ds.docs >= INDEX_MIN
    if vector_index:
        tbl.create_index(
            "vector",
            config=IvfHnswSq(
                distance_type="cosine", m=C.HNSW_M, ef_construction=C.HNSW_EF_CONSTRUCTION
            ),
            replace=True,
        )
    res["index_vector_s"] = t2.s()
    res["index_s"] = t.s()
    res["notes"].append(
        f"index_s = table write {t_load} s + FTS index {res['index_lexical_s']} s + vector index "
        f"{res['index_vector_s']} s"
    )
    res["index_bytes"] = C.dir_bytes(path)
    res["notes"].append(
        "lexical: Lance native FTS (BM25; simple tokenizer, lower case, English stemmer and "
        "stop words, ASCII folding, no positions) over one column title+text"
    )
    ef = C.hnsw_ef(ds.docs)
    if vector_index:
        res["notes"].append(
            f"dense: IVF_HNSW_SQ (cosine, default partitions, m {C.HNSW_M}, ef_construction "
            f"{C.HNSW_EF_CONSTRUCTION}), nprobes {NPROBES}, ef {ef}"
        )
    else:
        res["notes"].append(
            f"dense: no vector index below {INDEX_MIN} docs: exact flat scan, cosine distance"
        )
    res["notes"].append(
        f"hybrid: native hybrid query, both sub-queries limit 100, RRFReranker(K={C.RRF_K}), top 10"
    )

    tbl = db.open_table("docs")
    qv = ds.query_vectors
    qtexts = [q for _, q in ds.queries]

    def vq(i, k):
        q = tbl.search(qv[i], query_type="vector").distance_type("cosine")
        if vector_index:
            q = q.nprobes(NPROBES).ef(ef)
        return q

    def lexical(i):
        t = tbl.search(qtexts[i], query_type="fts").select(["id"]).limit(C.TOP).to_arrow()
        return t["id"].to_pylist()

    def dense(i):
        return vq(i, C.TOP).select(["id"]).limit(C.TOP).to_arrow()["id"].to_pylist()

    rrf = RRFReranker(K=C.RRF_K)

    def hybrid(i):
        q = (
            tbl.search(query_type="hybrid")
            .vector(qv[i])
            .text(qtexts[i])
            .distance_type("cosine")
        )
        if vector_index:
            q = q.nprobes(NPROBES).ef(ef)
        t = q.select(["id"]).limit(C.FUSE_DEPTH).rerank(rrf).to_arrow()
        return t["id"].to_pylist()[: C.TOP]

    modes = {"lexical": lexical, "dense": dense, "hybrid": hybrid}
    for m in a.modes:
        try:
            res["modes"][m] = C.run_mode(modes[m], ds, m)
        except Exception as e:  # noqa: BLE001
            res["notes"].append(f"{m}: failed: {type(e).__name__}: {e}")
            C.log(f"{m} failed: {e!r}")
    C.write_result(a.out, res)


if __name__ == "__main__":
    main()
