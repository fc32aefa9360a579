#!/usr/bin/env bash
# Two query nodes over the same PostgreSQL shards, under load (docs/BENCHMARKS.md, PostgreSQL
# backend): a throwaway server with two databases as two shards and a streaming replica of it;
# the Dendron vault indexed into the shards (lexical and graph; embed none); node A reads the
# primaries, node B the replica; scripts/pg_nodes.py then runs CLIENTS clients for SECONDS
# against both, mixing search and upsert, and checks the nodes answer alike.
#
#   scripts/pg-nodes.sh [WORK_DIR]      default: target/pg-nodes; needs ../shared/data beside
# Environment: CLIENTS (50), SECONDS_LOAD (60), FINDER (default target/release/finder, built).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$ROOT/target/pg-nodes}"
DATA="$ROOT/../shared/data"
FINDER="${FINDER:-$ROOT/target/release/finder}"
PG="$ROOT/scripts/postgres.sh"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
[ -n "${FINDER_SKIP_BUILD:-}" ] || cargo build --release -p finder-cli --manifest-path "$ROOT/Cargo.toml" >&2

bash "$PG" start "$WORK/primary" >/dev/null
a="$(bash "$PG" createdb "$WORK/primary" finder_a)"
b="$(bash "$PG" createdb "$WORK/primary" finder_b)"
replica="$(bash "$PG" replica "$WORK/primary" "$WORK/replica")"
base="${replica%/*}"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  bash "$PG" stop "$WORK/replica" >/dev/null 2>&1 || true
  bash "$PG" stop "$WORK/primary" >/dev/null 2>&1 || true
}
trap cleanup EXIT

settings() {
  printf '[embed]\nbackend = "none"\n\n[storage]\nbackend = "postgres"\nurls = ["%s", "%s"]\n' "$a" "$b"
}
mkdir -p "$WORK/node-a" "$WORK/node-b"
settings >"$WORK/node-a/finder.toml"
{ settings; printf 'read_urls = [["%s"], ["%s"]]\n' "$base/finder_a" "$base/finder_b"; } >"$WORK/node-b/finder.toml"
rm -f "$WORK"/node-*/api-sources.jsonl
"$FINDER" index "$DATA/dendron_site_vault/notes" --index "$WORK/node-a" >&2

ports=()
for node in a b; do
  port=$((20000 + RANDOM % 20000))
  "$FINDER" serve --index "$WORK/node-$node" --addr "127.0.0.1:$port" >"$WORK/serve-$node.log" 2>&1 &
  pids+=($!)
  ports+=("$port")
  for _ in $(seq 100); do grep -q "serving at" "$WORK/serve-$node.log" && break; sleep 0.1; done
done
echo "== ${CLIENTS:-50} clients for ${SECONDS_LOAD:-60} s against two nodes (B on the replica)"
python3 "$ROOT/scripts/pg_nodes.py" \
  --nodes "http://127.0.0.1:${ports[0]},http://127.0.0.1:${ports[1]}" \
  --corpus "$DATA/dendron_site_vault/corpus.jsonl" \
  --clients "${CLIENTS:-50}" --seconds "${SECONDS_LOAD:-60}"
