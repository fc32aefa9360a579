#!/usr/bin/env bash
# Installs what the browser end-to-end test needs: Debian's chromium and chromium-driver.
# Idempotent and quiet when they are already there. Needs root (or sudo) on Debian 12.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have chromium && have chromedriver; then
  exit 0
fi

if ! have apt-get; then
  echo "install-test-deps: no apt-get; install chromium and chromedriver yourself" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if have sudo; then sudo="sudo"; else
    echo "install-test-deps: not root and no sudo; cannot install chromium" >&2
    exit 1
  fi
fi

echo "== installing chromium and chromium-driver (browser test)"
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends \
      chromium chromium-driver fonts-dejavu-core; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "install-test-deps: apt-get failed" >&2
  exit 1
fi
rm -f "$log"
have chromium && have chromedriver
