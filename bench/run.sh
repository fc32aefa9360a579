#!/usr/bin/env bash
# Finder side by side with embedded peers (tantivy, qdrant-edge, LanceDB, SQLite FTS5 +
# sqlite-vec, bm25s, PostgreSQL + pgvector) on the same data, in one run. See bench/README.md.
#
#   bench/run.sh [options]
#     --sizes LIST       synthetic corpus sizes (default 10k,100k,1m; "" for none)
#     --no-scifact       leave SciFact out (default: in)
#     --systems LIST     default finder,tantivy,qdrant-edge,lancedb,sqlite,bm25s,pgvector
#     --timeout S        per (system, dataset) run, seconds (default 7200)
#     --queries-limit N  only the first N queries of each dataset
#     --repeat N         run every (system, dataset) pair N times, round after round, and
#                        report the medians (default 1)
#     --small-repeat N   at least N rounds for SciFact and the 10k and 100k corpora
#                        (datasets of at most 100,000 documents; default 3)
#     --ignore-caps      run even what bench/caps.json says would take too long
#     --skip-build       use target/release/finder-bench as it is
#     --report-only      only rewrite docs/BENCHMARKS.md and docs/bench-p50.png from bench/results
#
# Environment: FINDER_BENCH_HOME (default ~/.cache/finder/bench: venv/, data/, scratch/, logs/),
# FINDER_BENCH_SIZES, FINDER_BENCH_SYSTEMS, FINDER_BENCH_TIMEOUT, FINDER_BENCH_REPEAT,
# FINDER_BENCH_SMALL_REPEAT, FINDER_BENCH_SCIFACT (the BEIR folder, default
# ../shared/data/scifact beside the repository), PYTHON (default python3).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="$ROOT/bench"
HOME_DIR="${FINDER_BENCH_HOME:-$HOME/.cache/finder/bench}"
VENV="$HOME_DIR/venv"
DATA="$HOME_DIR/data"
SIZES="${FINDER_BENCH_SIZES-10k,100k,1m}"
SYSTEMS="${FINDER_BENCH_SYSTEMS:-finder,tantivy,qdrant-edge,lancedb,sqlite,bm25s,pgvector}"
TIMEOUT="${FINDER_BENCH_TIMEOUT:-7200}"
SCIFACT_SRC="${FINDER_BENCH_SCIFACT:-$ROOT/../shared/data/scifact}"
SCIFACT=1
REPORT_ONLY=0
BUILD=1
EXTRA=()
ARGS="$*"

die() { echo "bench/run.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --no-scifact) SCIFACT=0; shift ;;
    --systems) SYSTEMS="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --queries-limit) EXTRA+=(--queries-limit "$2"); shift 2 ;;
    --repeat) EXTRA+=(--repeat "$2"); shift 2 ;;
    --small-repeat) EXTRA+=(--small-repeat "$2"); shift 2 ;;
    --ignore-caps) EXTRA+=(--ignore-caps); shift ;;
    --skip-build) BUILD=0; shift ;;
    --report-only) REPORT_ONLY=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

# 1. The virtual environment with the pinned peers (reinstalled when requirements.txt changes).
mkdir -p "$HOME_DIR"
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV" || die "python3 -m venv failed (python3-venv installed?)"
fi
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$BENCH/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== pip install -r bench/requirements.txt into $VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$BENCH/requirements.txt"
  echo "$WANT" >"$STAMP"
fi
PY="$VENV/bin/python"

report() {
  echo "== report"
  "$PY" "$BENCH/report.py"
}
if [ "$REPORT_ONLY" = 1 ]; then
  report
  exit 0
fi

# 2. Finder's binaries.
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/finder-bench"
if [ "$BUILD" = 1 ]; then
  echo "== cargo build --release -p finder-bench -p finder-cli"
  (cd "$ROOT" && cargo build --release -p finder-bench -p finder-cli)
fi
[ -x "$BIN" ] || die "no $BIN (cargo build --release -p finder-bench)"

# 3. Datasets (made once, kept under $DATA).
mkdir -p "$DATA"
DATASETS=()
if [ "$SCIFACT" = 1 ]; then
  if [ ! -f "$DATA/scifact/meta.json" ]; then
    [ -d "$SCIFACT_SRC" ] || die "no SciFact BEIR folder at $SCIFACT_SRC (set FINDER_BENCH_SCIFACT)"
    # The model the vectors come from, into FINDER_MODEL_DIR or the default data folder
    # (a fresh machine has none; an installed, verified model is left alone).
    FINDER="$(dirname "$BIN")/finder"
    [ -x "$FINDER" ] || die "no $FINDER (cargo build --release -p finder-cli)"
    "$FINDER" model install
    echo "== finder-bench embed (SciFact with all-MiniLM-L6-v2; about 10 minutes on 2 cores)"
  fi
  # embed itself skips an up-to-date output
  "$BIN" embed --beir "$SCIFACT_SRC" --out "$DATA/scifact"
  DATASETS+=(scifact)
fi
IFS=',' read -r -a SIZE_LIST <<<"$SIZES"
for s in "${SIZE_LIST[@]}"; do
  [ -n "$s" ] || continue
  case "$s" in
    *k) n=$(( ${s%k} * 1000 )) ;;
    *m) n=$(( ${s%m} * 1000000 )) ;;
    *[0-9]) n="$s" ;;
    *) die "bad size $s (like 10k, 100k, 1m)" ;;
  esac
  name="synthetic-$s"
  # A cached corpus is kept only if this generator, with these options, made it.
  if ! "$BIN" gen --docs "$n" --out "$DATA/$name" --check 2>/dev/null; then
    echo "== finder-bench gen --docs $n → $DATA/$name"
    rm -rf "$DATA/$name.tmp"
    "$BIN" gen --docs "$n" --out "$DATA/$name.tmp"
    rm -rf "$DATA/$name"
    mv "$DATA/$name.tmp" "$DATA/$name"
  fi
  DATASETS+=("$name")
done
[ ${#DATASETS[@]} -gt 0 ] || die "no datasets selected"

# 4. Every system on every dataset, each in its own process.
DS="$(IFS=,; echo "${DATASETS[*]}")"
mkdir -p "$BENCH/results"
# the command the report quotes (a later --report-only keeps it)
printf '{"command": "bench/run.sh%s", "started": "%s"}\n' "${ARGS:+ $ARGS}" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$BENCH/results/run.json"
echo "== harness: datasets $DS; systems $SYSTEMS; timeout $TIMEOUT s per run"
"$PY" "$BENCH/harness.py" --data-root "$DATA" --datasets "$DS" --systems "$SYSTEMS" \
  --timeout "$TIMEOUT" --python "$PY" --finder-bin "$BIN" \
  --scratch "$HOME_DIR/scratch" --logs "$HOME_DIR/logs" ${EXTRA[@]+"${EXTRA[@]}"}

# 5. The report.
report
