#!/usr/bin/env bash
# The reliability checks at full size (docs/RELIABILITY.md quotes what this prints):
#   crash harness     FINDER_CRASH_KILLS kills of `finder index` (default 40),
#                     FINDER_CRASH_WATCH_KILLS of `finder watch` during bursts (40) and
#                     FINDER_CRASH_SERVER_KILLS of `finder serve` (default 10)
#   readers           searches during indexing runs see whole commits
#   bad inputs        the generated malformed-input corpus
#   load              FINDER_LOAD_CLIENTS clients (50) for FINDER_LOAD_SECS seconds (60)
#   fuzzing           scripts/fuzz.sh, FUZZ_SECS per target (60), when nightly is present
# `.ci/run` runs the same tests at reduced counts as part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

export FINDER_CRASH_KILLS="${FINDER_CRASH_KILLS:-40}"
export FINDER_CRASH_SERVER_KILLS="${FINDER_CRASH_SERVER_KILLS:-10}"
export FINDER_CRASH_WATCH_KILLS="${FINDER_CRASH_WATCH_KILLS:-40}"
export FINDER_LOAD_SECS="${FINDER_LOAD_SECS:-60}"
export FINDER_LOAD_CLIENTS="${FINDER_LOAD_CLIENTS:-50}"

log="$(mktemp)"
# The summary lines follow the test's name on the same line, so they are matched anywhere.
summary() { grep -oE '(crash|readers|bad inputs|fuzz cases|load): .*' "$log" || true; }
: > /tmp/finder-reliability.txt

echo "== crash harness ($FINDER_CRASH_KILLS index, $FINDER_CRASH_WATCH_KILLS watch, $FINDER_CRASH_SERVER_KILLS server kills)"
cargo test --profile ci --locked -p finder-cli --test it crash -- --nocapture --test-threads 1 >"$log" 2>&1 || { cat "$log"; exit 1; }
summary >> /tmp/finder-reliability.txt

echo "== consistent readers and bad inputs"
cargo test --profile ci --locked -p finder-index --test it -- readers bad_inputs fuzz_cases --nocapture >"$log" 2>&1 || { cat "$log"; exit 1; }
summary >> /tmp/finder-reliability.txt
cargo test --profile ci --locked -p finder-cli --test it bad_inputs -- --nocapture >"$log" 2>&1 || { cat "$log"; exit 1; }
summary >> /tmp/finder-reliability.txt

echo "== load ($FINDER_LOAD_CLIENTS clients, $FINDER_LOAD_SECS s)"
cargo test --profile ci --locked -p finder-server --test it load -- --nocapture >"$log" 2>&1 || { cat "$log"; exit 1; }
summary >> /tmp/finder-reliability.txt

if cargo +nightly --version >/dev/null 2>&1; then
  echo "== fuzzing (${FUZZ_SECS:-60} s per target)"
  bash scripts/fuzz.sh "${FUZZ_SECS:-60}" || echo "fuzz: findings above (fuzz/artifacts/)" >> /tmp/finder-reliability.txt
else
  echo "== fuzzing skipped: cargo fuzz needs a nightly toolchain"
fi

echo "== summary"
cat /tmp/finder-reliability.txt
