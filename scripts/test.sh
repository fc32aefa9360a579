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
log="$(mktemp)"
cargo test --workspace --all-targets --locked 2>&1 | tee "$log"
passed=$(grep -Eo '^test result: [a-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"

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

echo "tests: $passed passed, $failed failed"
