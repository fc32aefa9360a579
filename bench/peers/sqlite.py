"""SQLite (through apsw: Python's own sqlite3 module cannot load extensions here) with FTS5
and sqlite-vec, one database file.

- lexical: FTS5 contentless table, tokenizer `porter unicode61` (English Porter stemmer, no
  stop words), `ORDER BY rank` (= bm25(), k1 1.2, b 0.75). The query text becomes an OR of
  its quoted word tokens (FTS5's own syntax would choke on natural text).
- dense: sqlite-vec `vec0` table, float[dim] with distance_metric=cosine; KNN by
  `embedding MATCH ? AND k = ?` is an exact brute-force scan (vec0 has no ANN index).
- hybrid: RRF (k=RRF_K) of the FTS5 top 100 and the vec0 top 100, in Python.
Bulk load in one transaction with journal_mode=OFF, synchronous=OFF.
"""
import os
import re
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import apsw  # noqa: E402
import numpy as np  # noqa: E402
import sqlite_vec  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "sqlite"
_word = re.compile(r"\w+", re.UNICODE)


def fts_query(text):
    toks = list(dict.fromkeys(t.lower() for t in _word.findall(text)))
    return " OR ".join(f'"{t}"' for t in toks)


def main():
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("apsw", "sqlite-vec")
    res["versions"]["sqlite"] = apsw.sqlite_lib_version()
    path = os.path.join(a.scratch, "sqlite", "bench.db")
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def connect():
        c = apsw.Connection(path)
        c.enable_load_extension(True)
        c.load_extension(sqlite_vec.loadable_path())
        return c

    con = connect()
    con.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144")
    con.execute(
        "CREATE VIRTUAL TABLE fts USING fts5(body, tokenize='porter unicode61', content='')"
    )
    con.execute(
        f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{ds.dim}] distance_metric=cosine)"
    )
    vecs = ds.doc_vectors()
    ids = []
    t = C.Timer()
    with con:
        for batch in ds.corpus_batches(10000):
            ids.extend(b[1] for b in batch)
            con.executemany(
                "INSERT INTO fts(rowid, body) VALUES (?, ?)",
                [(b[0] + 1, C.body(b[2], b[3])) for b in batch],
            )
    con.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    res["index_lexical_s"] = t.s()
    t2 = C.Timer()
    with con:
        for start in range(0, ds.docs, 10000):
            block = np.ascontiguousarray(vecs[start : start + 10000], dtype="<f4")
            con.executemany(
                "INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                [(start + j + 1, block[j].tobytes()) for j in range(len(block))],
            )
    res["index_vector_s"] = t2.s()
    res["index_s"] = round(res["index_lexical_s"] + res["index_vector_s"], 3)
    con.close()
    res["index_bytes"] = C.dir_bytes(os.path.dirname(path))
    res["notes"].append(
        "lexical: FTS5 (contentless, tokenizer porter unicode61, no stop words), ORDER BY rank "
        "= bm25() (k1 1.2, b 0.75); query = OR of its quoted word tokens; FTS5 'optimize' "
        "merge after the load (in index_lexical_s)"
    )
    res["notes"].append(
        "dense: sqlite-vec vec0 float32, distance_metric=cosine; exact brute-force KNN "
        "(no ANN index in vec0)"
    )
    res["notes"].append(f"hybrid: RRF k={C.RRF_K} of FTS5 top-100 and vec0 top-100, in Python")

    con = connect()
    qtexts = [q for _, q in ds.queries]
    qblobs = [np.ascontiguousarray(v, dtype="<f4").tobytes() for v in ds.query_vectors]
    lex_sql = "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?"
    vec_sql = "SELECT rowid FROM vec WHERE embedding MATCH ? AND k = ?"

    def lex(i, k):
        q = fts_query(qtexts[i])  # inside the timed part, like every system's query analysis
        if not q:
            return []
        return [ids[r - 1] for (r,) in con.execute(lex_sql, (q, k))]

    def dense(i, k):
        return [ids[r - 1] for (r,) in con.execute(vec_sql, (qblobs[i], k))]

    C.run_modes(res, C.client_fused_modes(lex, dense), ds, a.modes)
    C.write_result(a.out, res)


if __name__ == "__main__":
    main()
