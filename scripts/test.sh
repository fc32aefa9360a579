#!/usr/bin/env bash
# The project's test command: formatting, lints, every test, and the SciFact quality gate.
# Called by .ci/run. Needs only cargo; reads ../shared/data when it is present.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --locked

# Quality gate on real data (read-only; the index cache goes under target/).
SCIFACT="../shared/data/scifact"
if [ -f "$SCIFACT/corpus.jsonl" ]; then
  echo "== SciFact lexical quality gate"
  cargo build --release --locked -p finder-cli
  FINDER_CACHE_DIR="$PWD/target/finder-cache" ./target/release/finder eval "$SCIFACT" \
    --runs lexical --min ndcg@10=0.675 --min recall@100=0.91
else
  echo "== SciFact not found at $SCIFACT; quality gate skipped"
fi
