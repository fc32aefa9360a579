"""bm25s: BM25 as a sparse matrix in numpy (lexical only; no vectors, so dense and hybrid are
not applicable). Tokenizer: bm25s.tokenize (lower case, `\\w\\w+` tokens, English stop words,
PyStemmer English Snowball), method "lucene", k1 1.2, b 0.75 (set to match the other
systems; bm25s's own default k1 is 1.5), numpy backend. Per query the timed part is the
query's tokenization plus `retrieve(k=10)`."""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

import bm25s  # noqa: E402
import Stemmer  # noqa: E402

import common as C  # noqa: E402

SYSTEM = "bm25s"


def main():
    a = C.parse_args(SYSTEM)
    ds = C.Dataset(a.data, a.queries_limit)
    res = C.new_result(SYSTEM, ds)
    res["versions"] = C.versions("bm25s", "PyStemmer")
    path = os.path.join(a.scratch, "bm25s")
    stemmer = Stemmer.Stemmer("english")
    t = C.Timer()
    ids, texts = [], []
    for _, did, title, text in ds.corpus():
        ids.append(did)
        texts.append(C.body(title, text))
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    del texts
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(tokens, show_progress=False)
    del tokens
    res["index_lexical_s"] = res["index_s"] = t.s()
    retriever.save(path, show_progress=False)
    res["index_bytes"] = C.dir_bytes(path)
    res["notes"].append(
        "lexical: bm25s (numpy backend, method lucene, k1 1.2, b 0.75), tokenizer \\w\\w+, "
        "English stop words, PyStemmer English; index_s excludes save(); index_bytes = "
        "the saved index folder"
    )
    res["notes"].append("dense, hybrid: not applicable (bm25s has no vector search)")
    qtexts = [q for _, q in ds.queries]

    def lexical(i):
        q = bm25s.tokenize(qtexts[i], stopwords="en", stemmer=stemmer, return_ids=False,
                           show_progress=False)
        if not q[0]:
            return []
        docs, scores = retriever.retrieve(q, k=min(C.TOP, len(ids)), show_progress=False,
                                          n_threads=1)
        return [ids[d] for d, s in zip(docs[0], scores[0]) if s > 0]  # no zero-score filler

    for m in a.modes:
        if m == "lexical":
            res["modes"][m] = C.run_mode(lexical, ds, m)
    C.write_result(a.out, res)


if __name__ == "__main__":
    main()
