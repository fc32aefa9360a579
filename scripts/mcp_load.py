"""Measures Finder's MCP answers with the official Python SDK (PyPI `mcp`; scripts/mcp-venv.sh
installs it). Two jobs, each printing one JSON report:

    sizes  Answer sizes per tool and `detail` for queries drawn from a vault's corpus.jsonl
           (note titles, every k-th note), in tokens estimated as characters / 4, both for the
           text an agent reads and for the structured content:
             python scripts/mcp_load.py sizes --stdio 'finder mcp --index IDX' \
               --corpus ../shared/data/dendron_site_vault/corpus.jsonl --queries 50
    load   SESSIONS concurrent MCP sessions over streamable HTTP for SECONDS, each mixing
           search / get / context; latency percentiles, errors, and the server's resident
           memory sampled each second from /proc (give its --pid):
             python scripts/mcp_load.py load --http http://127.0.0.1:7700/mcp --pid PID \
               --corpus ../shared/data/silverbullet_docs_vault/corpus.jsonl
"""

import argparse
import asyncio
import json
import math
import shlex
import time

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

CHARS_PER_TOKEN = 4


def tokens(text):
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def summary(values):
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


def queries(corpus, count):
    titles = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            title = (record.get("title") or "").strip()
            if len(title) >= 3:
                titles.append(title)
    step = max(1, len(titles) // count)
    return titles[::step][:count]


def connect(args):
    if args.stdio:
        command = shlex.split(args.stdio)
        return Client(StdioServerParameters(command=command[0], args=command[1:]))
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    return Client(streamable_http_client(args.http, http_client=http))


async def sizes(args):
    asked = queries(args.corpus, args.queries)
    shapes = {
        "search detail=ids": ("search", {"detail": "ids"}),
        "search detail=hints (default)": ("search", {}),
        "search detail=full": ("search", {"detail": "full"}),
        "context (default budget)": ("context", {}),
    }
    found = {name: {"text": [], "structured": []} for name in shapes}
    async with connect(args) as client:
        for query in asked:
            for name, (tool, extra) in shapes.items():
                result = await client.call_tool(tool, {"query": query, **extra})
                if result.is_error:
                    raise SystemExit(f"{tool} {query!r}: {result.content}")
                text = "".join(c.text for c in result.content if c.type == "text")
                found[name]["text"].append(tokens(text))
                structured = json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
                found[name]["structured"].append(tokens(structured))
    report = {
        "queries": len(asked),
        "tokens": {name: {form: summary(v) for form, v in forms.items()} for name, forms in found.items()},
    }
    print(json.dumps(report, indent=1))


def rss_mib(pid):
    fields = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    kib = lambda k: int(fields[k].split()[0]) / 1024 if k in fields else None  # noqa: E731
    return kib("VmRSS"), kib("VmHWM")


async def session(args, asked, index, deadline, record):
    n = index
    async with connect(args) as client:
        last_at = None
        while time.monotonic() < deadline:
            query = asked[n % len(asked)]
            op = ["search", "get", "context"][n % 3] if last_at else "search"
            arguments = {
                "search": {"query": query},
                "get": {"id": last_at},
                "context": {"query": query, "budget_tokens": 500},
            }[op]
            started = time.perf_counter()
            try:
                result = await client.call_tool(op, arguments)
                ok = not result.is_error
                if ok and op == "search":
                    hits = result.structured_content["hits"]
                    if hits and hits[0].get("hints"):
                        last_at = hits[0]["hints"][0]["at"]
                error = None if ok else str(result.content)[:200]
            except Exception as e:  # noqa: BLE001 - counted and reported
                error = f"{type(e).__name__}: {e}"[:200]
            record(op, (time.perf_counter() - started) * 1000, error)
            n += args.sessions


async def load(args):
    asked = queries(args.corpus, 200)
    latencies = {"search": [], "get": [], "context": []}
    errors = []

    def record(op, ms, error):
        latencies[op].append(ms)
        if error:
            errors.append(f"{op}: {error}")

    samples = []
    start_rss = rss_mib(args.pid) if args.pid else (None, None)
    deadline = time.monotonic() + args.seconds

    async def sample():
        while time.monotonic() < deadline:
            if args.pid:
                samples.append(rss_mib(args.pid)[0])
            await asyncio.sleep(1)

    began = time.monotonic()
    await asyncio.gather(sample(), *(session(args, asked, i, deadline, record) for i in range(args.sessions)))
    elapsed = time.monotonic() - began
    end_rss, peak = rss_mib(args.pid) if args.pid else (None, None)
    every = [ms for values in latencies.values() for ms in values]
    round2 = lambda v: None if v is None else round(v, 2)  # noqa: E731
    report = {
        "sessions": args.sessions,
        "seconds": round(elapsed, 1),
        "calls": len(every),
        "calls_per_second": round(len(every) / elapsed, 1),
        "errors": len(errors),
        "first_errors": errors[:5],
        "latency_ms": {op: {k: round2(v) for k, v in summary(values).items()} for op, values in [("all", every), *latencies.items()]},
        "server_rss_mib": {
            "before": round2(start_rss[0]),
            "during_max": round2(max(samples)) if samples else None,
            "after": round2(end_rss),
            "peak_vmhwm": round2(peak),
        },
    }
    print(json.dumps(report, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", choices=["sizes", "load"])
    parser.add_argument("--stdio", help="the command that starts `finder mcp` (sizes)")
    parser.add_argument("--http", help="the URL of a served /mcp")
    parser.add_argument("--token", help="bearer token for --http")
    parser.add_argument("--corpus", required=True, help="a corpus.jsonl whose titles are the queries")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--pid", type=int, help="the server's process id, for its memory")
    args = parser.parse_args()
    if args.job == "load" and not args.http:
        parser.error("load needs --http")
    if not args.stdio and not args.http:
        parser.error("give --stdio or --http")
    asyncio.run(sizes(args) if args.job == "sizes" else load(args))


if __name__ == "__main__":
    main()
