"""tantivy (tantivy-py): BM25 over title+text with tantivy's built-in `en_stem` analyzer
(lowercase, remove long tokens, English Snowball stemmer). tantivy has no vectors: dense is
exact brute-force numpy dot over the float32 matrix (labelled "numpy-exact"), hybrid is RRF
(k=RRF_K) of tantivy's top 100 and numpy's top 100."""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

# One BLAS thread: the brute-force baseline then does not depend on a free second core (on 2
# busy cores a 2-thread matrix-vector product waits for the scheduler, milliseconds at p50).
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import tantivy  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "tantivy"


def main():
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("tantivy")
    idx_dir = os.path.join(a.scratch, "tantivy")
    os.makedirs(idx_dir, exist_ok=True)

    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("row", stored=False, fast=True, indexed=False)
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    schema = sb.build()
    index = tantivy.Index(schema, path=idx_dir)
    t = C.Timer()
    writer = index.writer(heap_size=512_000_000)
    ids = []
    for row, did, title, text in ds.corpus():
        ids.append(did)
        doc = tantivy.Document()
        doc.add_unsigned("row", row)  # Document(row=int) would infer i64 and panic
        doc.add_text("body", C.body(title, text))
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    res["index_lexical_s"] = t.s()
    # dense: the matrix is loaded into RAM (what a numpy user would do)
    t2 = C.Timer()
    mat = np.ascontiguousarray(ds.doc_vectors())
    res["index_vector_s"] = t2.s()
    res["index_s"] = round(res["index_lexical_s"] + res["index_vector_s"], 3)
    res["index_bytes"] = C.dir_bytes(idx_dir) + mat.nbytes
    res["notes"].append(
        "lexical: tantivy BM25 (k1 1.2, b 0.75 fixed) over one field title+text, tokenizer "
        "en_stem (English Snowball), default index options (positions)"
    )
    res["notes"].append(
        "dense: tantivy has no vectors; exact brute-force numpy dot over the float32 matrix in "
        f"RAM (numpy-exact, {os.environ['OPENBLAS_NUM_THREADS']} BLAS thread); index_bytes "
        "counts the tantivy folder + the matrix"
    )
    res["notes"].append(f"hybrid: RRF k={C.RRF_K} of tantivy top-100 and numpy top-100, in Python")

    index.reload()
    searcher = index.searcher()
    res["notes"].append(f"tantivy segments: {searcher.num_segments}")
    qtexts = [q for _, q in ds.queries]

    def parse(q):
        # parse_query would refuse query syntax in natural text (quotes, colons, +/-); the
        # lenient parser keeps what it can. Parsing (analysis) is inside the timed part.
        pq, _errs = index.parse_query_lenient(q, ["body"])
        return pq

    def lex(i, k):
        hits = searcher.search(parse(qtexts[i]), k, count=False).hits
        if not hits:
            return []
        rows = searcher.fast_field_values("row", [h[1] for h in hits])
        return [ids[r] for r in rows]

    qv = ds.query_vectors

    def dense(i, k):
        return [ids[r] for r in C.topk_dot(mat, qv[i], k)]

    C.run_modes(res, C.client_fused_modes(lex, dense), ds, a.modes)
    C.write_result(a.out, res)


if __name__ == "__main__":
    main()
