#!/usr/bin/env bash
# What open console pages cost the database while nothing changes: one server on a fresh
# PostgreSQL database, its transactions counted (pg_stat_database) over 10-second windows with no
# page open, then with 200 live inbox pages open. Background work (the sweeps) is in both.
#
#   PARLEY_BIN=target/release/parley bash benches/scripts/console_pages.sh
set -u
PARLEY_BIN="${PARLEY_BIN:-target/debug/parley}"
ADMIN=postgres://postgres@127.0.0.1:5432/test
DB=postgres://postgres@127.0.0.1:5432/console_pages
WORK=$(mktemp -d)
psql "$ADMIN" -qc "DROP DATABASE IF EXISTS console_pages" -c "CREATE DATABASE console_pages" 2>/dev/null
KEY=$("$PARLEY_BIN" admin bootstrap --database-url "$DB" --data-dir "$WORK" --workspace Acme --json \
  | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["api_key"])')
cd "$WORK"
PARLEY_DATABASE_URL=$DB PARLEY_DATA_DIR=$WORK PARLEY_BIND=127.0.0.1:18181 PARLEY_LOG=warn \
  "$PARLEY_BIN" serve > serve.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf localhost:18181/health >/dev/null && break; sleep 0.2; done
# A session cookie (a key's session; an operator's reads the same per page).
curl -s -o /dev/null -c jar -d "key=$KEY" localhost:18181/console/sign-in
xacts() { psql "$ADMIN" -tAc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'console_pages'"; }
window() { local a b; a=$(xacts); sleep 10; b=$(xacts); echo $((b - a)); }
echo "no page open: $(window), $(window) transactions in 10 s"
PIDS=()
for i in $(seq 1 200); do
  curl -s -N -b jar -H 'Accept: text/event-stream' localhost:18181/console/conversations/live > /dev/null &
  PIDS+=($!)
done
# Let every page open and read its first mark.
sleep 20
echo "200 pages open, nothing changing: $(window), $(window), $(window) transactions in 10 s"
kill "${PIDS[@]}" 2>/dev/null
kill $SERVER; wait $SERVER 2>/dev/null
