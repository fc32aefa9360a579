#!/usr/bin/env bash
# Runs each cargo-fuzz target (fuzz/) for a bounded time and prints, per target, the seconds,
# the runs executed and the crashes found.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#   FUZZ_ARGS="-max_len=20000" scripts/fuzz.sh 120 markdown   (more libFuzzer flags)
#
# Installs the pinned cargo-fuzz when it is missing; needs the nightly toolchain. Each target
# starts from its regression cases (crates/index/tests/fuzz_cases/<target>/, replayed by
# `cargo test`) plus the corpus it grew on earlier runs (fuzz/corpus/, not committed). A crash
# is saved under fuzz/artifacts/<target>/; copy it into the regression folder once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.1
SECS="${1:-60}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(markdown records query config)
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 2
fi
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# Sanitizer builds of every target, in fuzz/target.
cargo +nightly fuzz build

status=0
summary=()
for target in "${TARGETS[@]}"; do
  corpus="fuzz/corpus/$target"
  artifacts="fuzz/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  cp crates/index/tests/fuzz_cases/"$target"/* "$corpus"/
  before=$(find "$artifacts" -type f ! -name 'slow-unit-*' | wc -l)
  log="fuzz/artifacts/$target.log"
  started=$(date +%s)
  # -timeout flags an input that takes 30 s (a quadratic parser) as a finding too. The
  # instrumented build is slow (~35 µs per byte of the 300 KB unclosed-brackets seed, linear:
  # 12 s), so 10 s flagged that seed although it is not quadratic.
  set +e
  cargo +nightly fuzz run "$target" "$corpus" -- \
    -max_total_time="$SECS" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
    ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  took=$(($(date +%s) - started))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
  # slow-unit-* files are libFuzzer's notes of slow inputs, not findings.
  after=$(find "$artifacts" -type f ! -name 'slow-unit-*' | wc -l)
  crashes=$((after - before))
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    crashes=1
  fi
  line="fuzz $target: ${took} s, ${runs:-0} runs, $crashes crashes"
  if [ "$crashes" -gt 0 ]; then
    status=1
    line="$line (see $log and $artifacts/)"
    grep -m 3 -E 'panicked at|ERROR: libFuzzer|SUMMARY' "$log" || true
  fi
  echo "$line"
  summary+=("$line")
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit "$status"
