#!/usr/bin/env bash
# The MCP figures of docs/BENCHMARKS.md and docs/RELIABILITY.md, measured with the official
# Python SDK (scripts/mcp_load.py):
#   1. answer sizes per tool and `detail`, 50 queries over `finder mcp` (stdio) on the Dendron
#      vault, indexed lexical-only (the sizes do not depend on the channels);
#   2. SESSIONS concurrent MCP sessions over HTTP for SECONDS against one `finder serve` of the
#      SilverBullet vault with its vectors (one model, loaded once), mixing search/get/context.
#
#   scripts/mcp-load.sh [WORK_DIR]      default: target/mcp-load; needs ../shared/data beside
# Environment: SESSIONS (20), SECONDS_LOAD (60), FINDER (default target/release/finder, built).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$ROOT/target/mcp-load}"
DATA="$ROOT/../shared/data"
FINDER="${FINDER:-$ROOT/target/release/finder}"
PY="$(bash "$ROOT/scripts/mcp-venv.sh")"
mkdir -p "$WORK"
[ -n "${FINDER_SKIP_BUILD:-}" ] || cargo build --release -p finder-cli --manifest-path "$ROOT/Cargo.toml" >&2

if [ ! -d "$WORK/dendron" ]; then
  mkdir -p "$WORK/dendron" && printf '[embed]\nbackend = "none"\n' > "$WORK/dendron/finder.toml"
  "$FINDER" index "$DATA/dendron_site_vault/notes" --index "$WORK/dendron" >&2
fi
echo "== answer sizes (tokens = characters / 4), dendron vault, 50 queries"
"$PY" "$ROOT/scripts/mcp_load.py" sizes --stdio "$FINDER mcp --index $WORK/dendron" \
  --corpus "$DATA/dendron_site_vault/corpus.jsonl" --queries 50

"$FINDER" index "$DATA/silverbullet_docs_vault/notes" --index "$WORK/silverbullet" >&2
port=$((20000 + RANDOM % 20000))
"$FINDER" serve --index "$WORK/silverbullet" --addr "127.0.0.1:$port" >"$WORK/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "serving at" "$WORK/serve.log" && break; sleep 0.2; done
echo "== ${SESSIONS:-20} MCP sessions over HTTP for ${SECONDS_LOAD:-60} s, silverbullet vault with vectors"
"$PY" "$ROOT/scripts/mcp_load.py" load --http "http://127.0.0.1:$port/mcp" --pid "$server" \
  --corpus "$DATA/silverbullet_docs_vault/corpus.jsonl" \
  --sessions "${SESSIONS:-20}" --seconds "${SECONDS_LOAD:-60}"
