#!/usr/bin/env bash
# A Python virtual environment with the official MCP SDK (PyPI `mcp`, pinned), for the
# real-client tests (crates/cli/tests/it/mcp_clients.rs) and the MCP load run
# (scripts/mcp_load.py). Idempotent; prints the environment's python on its last line.
#
#   scripts/mcp-venv.sh [DIR]     default: target/mcp-venv (or $FINDER_MCP_VENV)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-${FINDER_MCP_VENV:-${CARGO_TARGET_DIR:-$ROOT/target}/mcp-venv}}"
VERSION="${FINDER_MCP_SDK_VERSION:-2.3.0}"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2 || { echo "mcp-venv.sh: python3 -m venv failed (is python3-venv installed?)" >&2; exit 1; }
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "mcp==$VERSION" >&2 ||
    { echo "mcp-venv.sh: pip install mcp==$VERSION failed" >&2; exit 1; }
fi
echo "$VENV/bin/python"
