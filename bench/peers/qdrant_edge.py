"""qdrant-edge (PyPI `qdrant-edge-py`, the embedded Qdrant shard, `qdrant_edge.EdgeShard`).

- dense: named vector "dense", cosine, HNSW with the shared settings of common.py (m 32,
  ef_construct 200, hnsw_ef 3 x sqrt(docs), at least 300: Finder's defaults; Qdrant's own are 16/100), built by
  `EdgeShard.optimize()` after the upload.
- lexical: named sparse vector "bm25" with `Modifier.Idf` (the shard applies IDF at query
  time); document weights from qdrant-edge's own `Bm25` model (English tokenizer, stop words,
  Snowball stemmer; `avg_len` set to the corpus's mean token count); queries embedded with
  `Bm25.embed_query` (one per unique token). This is Qdrant's documented BM25 recipe.
  `--lexical text` uses instead a payload text index with `scoring=True` and `TextQuery`
  (Qdrant's in-index BM25 over a text field); `--lexical both` measures both and reports the
  text-index variant as the extra mode "lexical_textindex".
- hybrid: one `QueryRequest` with two `Prefetch`es (lexical top 100, dense top 100) and
  native `Fusion.Rrf(k=RRF_K)`.
"""
import os
import re
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import qdrant_edge as Q  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "qdrant-edge"
BATCH = 1000
_word = re.compile(r"\w+")


def main():
    lexical_kind = os.environ.get("QDRANT_EDGE_LEXICAL", "sparse")
    for i, arg in enumerate(sys.argv):
        if arg == "--lexical":
            lexical_kind = sys.argv[i + 1]
            del sys.argv[i : i + 2]
            break
    assert lexical_kind in ("sparse", "text", "both"), lexical_kind
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("qdrant-edge-py")
    path = os.path.join(a.scratch, "qdrant-edge")
    use_sparse = lexical_kind in ("sparse", "both")
    use_text = lexical_kind in ("text", "both")

    t = C.Timer()
    # Corpus statistic for the Bm25 model: mean number of word tokens per document
    # (a first pass over the corpus, counted in the index time).
    n, tokens = 0, 0
    if use_sparse:
        for _, _, title, text in ds.corpus():
            tokens += len(_word.findall(C.body(title, text)))
            n += 1
    avg_len = max(1.0, tokens / max(1, n))
    bm25 = Q.Bm25(Q.Bm25Config(language="english", avg_len=avg_len)) if use_sparse else None

    cfg = Q.EdgeConfig(
        vectors={"dense": Q.EdgeVectorParams(size=ds.dim, distance=Q.Distance.Cosine)},
        sparse_vectors={"bm25": Q.EdgeSparseVectorParams(modifier=Q.Modifier.Idf)} if use_sparse else None,
        hnsw_config=Q.HnswIndexConfig(
            m=C.HNSW_M, ef_construct=C.HNSW_EF_CONSTRUCTION, full_scan_threshold=10000
        ),
        wal_enabled=False,
    )
    shard = Q.EdgeShard.create(path, cfg)
    if use_text:
        shard.update(
            Q.UpdateOperation.create_field_index(
                "body",
                Q.TextIndexParams(
                    tokenizer=Q.TokenizerType.Word,
                    lowercase=True,
                    stopwords=Q.Language.English,
                    stemmer=Q.SnowballParams(Q.SnowballLanguage.English),
                    scoring=True,
                ),
            )
        )
    vecs = ds.doc_vectors()
    ids = []
    for batch in ds.corpus_batches(BATCH):
        pts = []
        for row, did, title, text in batch:
            ids.append(did)
            v = {"dense": vecs[row].tolist()}
            b = C.body(title, text)
            if use_sparse:
                v["bm25"] = bm25.embed_document(b)
            pts.append(Q.Point(row, v, {"body": b} if use_text else None))
        shard.update(Q.UpdateOperation.upsert_points(pts))
    t_upload = t.s()
    shard.optimize()
    shard.flush()
    res["index_s"] = t.s()
    res["notes"].append(
        f"index_s = upload {t_upload} s (sparse BM25 embedding in Python included) + "
        f"optimize (HNSW build, segment merge) {round(res['index_s'] - t_upload, 3)} s"
    )
    info = shard.info()
    res["notes"].append(
        f"shard: {info.segments_count} segments, {info.points_count} points, "
        f"{info.indexed_vectors_count} indexed vectors"
    )
    shard.close()
    res["index_bytes"] = C.dir_bytes(path)
    res["index_apparent_bytes"] = C.dir_bytes(path, apparent=True)
    shard = Q.EdgeShard.load(path)

    ef = C.hnsw_ef(ds.docs)
    res["notes"].append(
        f"dense: HNSW m {C.HNSW_M}, ef_construct {C.HNSW_EF_CONSTRUCTION}, full_scan_threshold "
        f"10000 KB (a segment with less vector data is searched exactly), hnsw_ef {ef}; WAL "
        "disabled for the bulk load"
    )
    if use_sparse:
        res["notes"].append(
            "lexical: sparse vector with Modifier.Idf + qdrant_edge.Bm25 (english: stop words, "
            f"Snowball stemmer; k 1.2, b 0.75, avg_len {avg_len:.1f} = corpus mean word count)"
        )
    else:
        res["notes"].append(
            "lexical: payload text index (word tokenizer, English stop words, Snowball) with "
            "scoring=True, TextQuery BM25 (k 1.2, b 0.75)"
        )
    res["notes"].append(f"hybrid: native prefetch (lexical 100, dense 100) + Fusion.Rrf(k={C.RRF_K})")

    params = Q.SearchParams(hnsw_ef=ef)
    qv = ds.query_vectors
    qtexts = [q for _, q in ds.queries]
    dense_q = [qv[i].tolist() for i in range(len(qtexts))]

    def lex_query(i):
        if use_sparse:
            return Q.Query.Nearest(bm25.embed_query(qtexts[i]), using="bm25")
        return Q.TextQuery("body", qtexts[i])

    def run(req):
        return [ids[p.id] for p in shard.query(req)]

    def lexical(i):
        return run(Q.QueryRequest(limit=C.TOP, query=lex_query(i), with_payload=False))

    def lexical_text(i):
        return run(Q.QueryRequest(limit=C.TOP, query=Q.TextQuery("body", qtexts[i]), with_payload=False))

    def dense(i):
        return run(
            Q.QueryRequest(
                limit=C.TOP,
                query=Q.Query.Nearest(dense_q[i], using="dense"),
                params=params,
                with_payload=False,
            )
        )

    def hybrid(i):
        return run(
            Q.QueryRequest(
                limit=C.TOP,
                prefetches=[
                    Q.Prefetch(limit=C.FUSE_DEPTH, query=lex_query(i)),
                    Q.Prefetch(
                        limit=C.FUSE_DEPTH,
                        query=Q.Query.Nearest(dense_q[i], using="dense"),
                        params=params,
                    ),
                ],
                query=Q.Fusion.Rrf(k=C.RRF_K),
                with_payload=False,
            )
        )

    res["notes"].append(
        "the query's Bm25.embed_query (tokenizing) is inside the timed part, as every system's "
        "query analysis is; dense query vectors are precomputed for all"
    )
    modes = {"lexical": lexical, "dense": dense, "hybrid": hybrid}
    C.run_modes(res, modes, ds, a.modes)
    if lexical_kind == "both":
        res["modes"]["lexical_textindex"] = C.run_mode(lexical_text, ds, "lexical_textindex")
        res["notes"].append(
            "extra mode lexical_textindex: payload text index + TextQuery BM25 (not in hybrid)"
        )
    shard.close()
    C.write_result(a.out, res)


if __name__ == "__main__":
    main()
