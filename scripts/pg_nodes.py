"""Load run against two `finder serve` nodes over the same PostgreSQL shards (scripts/pg-nodes.sh
starts them). CLIENTS threads for SECONDS, each picking a node at random and either searching
(a note title of the corpus) or writing a document (PUT); then both nodes answer the same
queries and must agree, and every acknowledged document is read back (GET) through the node
that did not write it. Prints one JSON report: per operation and node, requests, errors and
p50 / p99 latency in ms; how many answers disagreed; how many documents the other node missed. Python standard library only.

    python scripts/pg_nodes.py --nodes http://127.0.0.1:7701,http://127.0.0.1:7702 \
        --corpus ../shared/data/dendron_site_vault/corpus.jsonl --clients 50 --seconds 60
"""

import argparse
import sys
import json
import math
import random
import threading
import time
import urllib.error
import urllib.request


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def request(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)


def titles(corpus, limit):
    out = []
    with open(corpus) as f:
        for line in f:
            title = json.loads(line).get("title", "").strip()
            if title:
                out.append(title)
    random.Random(7).shuffle(out)
    return out[:limit]


def ranking(answer):
    return [(h["id"], round(h["score"], 5)) for h in answer.get("hits", [])]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", required=True, help="comma-separated base URLs")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writes", type=float, default=0.1, help="share of requests that write")
    args = parser.parse_args()
    nodes = args.nodes.split(",")
    queries = titles(args.corpus, 500)
    stats = {}  # (op, node) -> {"ms": [...], "errors": n, "samples": [...]}
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds
    acknowledged = []  # (node, id, text)

    def record(op, node, ms, ok, sample):
        with lock:
            s = stats.setdefault((op, node), {"ms": [], "errors": 0, "samples": []})
            s["ms"].append(ms)
            if not ok:
                s["errors"] += 1
                if len(s["samples"]) < 5:
                    s["samples"].append(sample)

    def client(n):
        rng = random.Random(n)
        written = 0
        while time.monotonic() < deadline:
            node = rng.randrange(len(nodes))
            started = time.perf_counter()
            if rng.random() < args.writes:
                written += 1
                doc_id = f"load-{n}-{written}"
                body = {"title": f"Load note {n} {written}", "text": rng.choice(queries)}
                status, answer = request("PUT", f"{nodes[node]}/v1/documents/{doc_id}", body)
                op = "upsert"
                if status == 200:
                    with lock:
                        acknowledged.append((node, doc_id, body["text"]))
            else:
                body = {"query": rng.choice(queries), "limit": 10}
                status, answer = request("POST", f"{nodes[node]}/v1/search", body)
                op = "search"
            ms = (time.perf_counter() - started) * 1e3
            record(op, node, ms, status == 200, f"{status}: {str(answer)[:200]}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # Both nodes answer alike once the writes have settled (one node may still hold its
    # snapshot of the graph for a second).
    time.sleep(2)
    disagreed = []
    for q in queries[:100]:
        answers = [request("POST", f"{n}/v1/search", {"query": q, "limit": 10}) for n in nodes]
        if any(status != 200 for status, _ in answers):
            disagreed.append({"query": q, "status": [s for s, _ in answers]})
        elif len({json.dumps(ranking(a)) for _, a in answers}) > 1:
            disagreed.append({"query": q, "rankings": [ranking(a) for _, a in answers]})
    missed = []
    for node, doc_id, text in acknowledged:
        other = nodes[(node + 1) % len(nodes)]
        status, answer = request("GET", f"{other}/v1/documents/{doc_id}")
        if status != 200 or answer["document"]["text"] != text:
            missed.append({"id": doc_id, "status": status, "answer": str(answer)[:200]})
    report = {
        "clients": args.clients,
        "seconds": args.seconds,
        "nodes": nodes,
        "operations": [
            {
                "op": op,
                "node": node,
                "requests": len(s["ms"]),
                "errors": s["errors"],
                "p50_ms": round(percentile(s["ms"], 50), 2),
                "p99_ms": round(percentile(s["ms"], 99), 2),
                "error_samples": s["samples"],
            }
            for (op, node), s in sorted(stats.items())
        ],
        "errors": sum(s["errors"] for s in stats.values()),
        "compared": min(100, len(queries)),
        "disagreed": disagreed[:5],
        "disagreed_count": len(disagreed),
        "acknowledged": len(acknowledged),
        "missed": missed[:5],
        "missed_count": len(missed),
    }
    print(json.dumps(report, indent=2))
    return 1 if report["errors"] or disagreed or missed else 0


if __name__ == "__main__":
    sys.exit(main())
