"""Drives Finder's MCP server with the official Python MCP SDK (PyPI `mcp`): a client no one
on this project wrote. Used by finder-cli's test `mcp_clients.rs`; runnable by hand:

    python scripts/mcp_clients.py --stdio 'finder mcp --index IDX' --http http://127.0.0.1:7700/mcp

Over each transport and protocol mode it lists the tools, calls each with valid arguments
(the SDK checks every answer against the tool's output schema, and so does this script), then
with invalid ones (the answer must be a tool error with a message), and an unknown tool (a
protocol error). It prints one JSON report and exits non-zero on any failure.
"""

import argparse
import asyncio
import json
import shlex
import sys

import httpx2
import jsonschema
from mcp import Client, MCPError, StdioServerParameters

TOOLS = ["search", "context", "get", "recommend", "status"]


class Check:
    def __init__(self, label):
        self.label = label
        self.failures = []
        self.calls = 0

    def expect(self, ok, what):
        if not ok:
            self.failures.append(f"{self.label}: {what}")


async def exercise(client, check, query, known_id):
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    check.expect(sorted(tools) == sorted(TOOLS), f"tools listed: {sorted(tools)}")
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        jsonschema.Draft202012Validator.check_schema(tool.output_schema or {})
        check.expect(tool.annotations is not None and tool.annotations.read_only_hint, f"{tool.name} is read-only")
        check.expect(len(tool.description or "") > 40, f"{tool.name} has a description")

    async def call(name, arguments):
        check.calls += 1
        result = await client.call_tool(name, arguments)
        return tools[name], result

    valid = {
        "search": {"query": query, "limit": 3},
        "context": {"query": query, "budget_tokens": 200},
        "get": {"id": known_id, "lines": "1-5"},
        "recommend": {"target": known_id, "limit": 3},
        "status": {},
    }
    found = {}
    for name, arguments in valid.items():
        tool, result = await call(name, arguments)
        check.expect(not result.is_error, f"{name} {arguments}: {result.content}")
        check.expect(result.content and result.content[0].type == "text", f"{name}: a text rendering")
        try:
            jsonschema.validate(result.structured_content, tool.output_schema)
        except jsonschema.ValidationError as e:
            check.expect(False, f"{name}: structured content against its schema: {e.message}")
        found[name] = result.structured_content
    hits = found["search"]["hits"]
    check.expect(len(hits) > 0, "search finds something")
    if hits and hits[0].get("hints"):
        # A hint's `at` is what `get` reads.
        at = hits[0]["hints"][0]["at"]
        _, lines = await call("get", {"id": at})
        text = lines.structured_content["text"]
        first = hits[0]["hints"][0]["line_start"]
        check.expect(text.lstrip().startswith(f"{first}  "), f"get {at} starts at line {first}: {text[:80]!r}")
    for detail in ["ids", "full"]:
        _, result = await call("search", {"query": query, "detail": detail})
        check.expect(not result.is_error, f"search detail={detail}")

    invalid = [
        ("search", {"query": query, "limit": 0}),
        ("search", {"query": query, "settings": {"lexical.b": 7}}),
        ("search", {"query": query, "space": "no-such-space"}),
        ("search", {"qeury": query}),
        ("get", {"id": "no/such/source.md"}),
        ("get", {"id": known_id, "lines": "9-3"}),
        ("context", {"query": query, "budget_chars": 5}),
        ("recommend", {"target": "no/such/source.md"}),
    ]
    for name, arguments in invalid:
        check.calls += 1
        try:
            result = await client.call_tool(name, arguments)
        except MCPError as e:
            check.expect(False, f"{name} {arguments}: a protocol error ({e}) instead of a tool error")
            continue
        message = result.content[0].text if result.content else ""
        check.expect(result.is_error and len(message) > 20, f"{name} {arguments}: is_error={result.is_error} {message!r}")
    check.calls += 1
    try:
        await client.call_tool("drop_everything", {})
        check.expect(False, "an unknown tool is refused")
    except MCPError as e:
        check.expect(e.error.code == -32602, f"unknown tool: code {e.error.code}")


async def run(args):
    checks = []
    transports = []
    if args.stdio:
        command = shlex.split(args.stdio)
        for mode in ["auto", "legacy"]:
            params = StdioServerParameters(command=command[0], args=command[1:])
            transports.append((f"stdio/{mode}", lambda p=params, m=mode: Client(p, mode=m)))
    if args.http:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        for mode in ["auto", "legacy"]:
            def make(m=mode):
                from mcp.client.streamable_http import streamable_http_client
                http = httpx2.AsyncClient(headers=headers, timeout=60)
                return Client(streamable_http_client(args.http, http_client=http), mode=m)
            transports.append((f"http/{mode}", make))
    for label, make in transports:
        check = Check(label)
        checks.append(check)
        try:
            async with make() as client:
                check.protocol = client.protocol_version
                await exercise(client, check, args.query, args.known_id)
        except Exception as e:  # noqa: BLE001 - the report names whatever broke
            check.expect(False, f"session failed: {type(e).__name__}: {e}")
    if args.http and args.token:
        check = Check("http/no-token")
        checks.append(check)
        try:
            async with Client(args.http) as client:
                await client.list_tools()
            check.expect(False, "a session without the token is refused")
        except Exception:  # noqa: BLE001 - any refusal will do; the Rust tests check the status
            pass
    report = {
        c.label: {"protocol": getattr(c, "protocol", None), "calls": c.calls, "failures": c.failures}
        for c in checks
    }
    print(json.dumps(report, indent=1))
    return 1 if any(c.failures for c in checks) else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdio", help="the command that starts `finder mcp`")
    parser.add_argument("--http", help="the URL of a served /mcp")
    parser.add_argument("--token", help="bearer token for --http")
    parser.add_argument("--query", default="refresh token")
    parser.add_argument("--known-id", default="tokens.md")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
