#!/usr/bin/env bash
# CI: a PostgreSQL server for the tests of events/postgres, on loopback only.
#
# Installs PostgreSQL from Debian's packages when it is missing, starts a
# cluster of its own (not Debian's 15/main: a data directory of ours, on
# 127.0.0.1:${HOOKLINE_PG_PORT:-5433}, socket in that directory), creates the
# user and database "hookline", waits until the server accepts connections,
# and prints one line on stdout:
#
#   export HOOKLINE_POSTGRES_URL='postgres://hookline:hookline@127.0.0.1:5433/hookline?sslmode=disable'
#
# Everything else goes to stderr, so a caller can do
#
#   pgenv=$(.ci/postgres.sh)   # under set -e, a failure here stops the caller
#   eval "$pgenv"
#
# The URL is also written to $HOOKLINE_PG_DIR/env (same line), for a shell
# that wants to source a file. Idempotent: run it again and it reuses the
# cluster, starts it if it is down, and prints the same line. The password is
# a test password for a server that listens on loopback only.
#
# Environment: HOOKLINE_PG_DIR (default /var/tmp/hookline-postgres),
# HOOKLINE_PG_PORT (default 5433). Runs as root (the server then runs as the
# postgres user that the Debian package creates) or as any other user that
# can run the installed binaries.
set -euo pipefail

dir=${HOOKLINE_PG_DIR:-/var/tmp/hookline-postgres}
port=${HOOKLINE_PG_PORT:-5433}
user=hookline
password=hookline
db=hookline
url="postgres://$user:$password@127.0.0.1:$port/$db?sslmode=disable"

log() { printf 'postgres.sh: %s\n' "$*" >&2; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

if [ -z "$(bindir)" ] || [ ! -x "$(bindir)/initdb" ]; then
  log "installing PostgreSQL from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
fi
bin=$(bindir)
log "using $bin"

# as runs a command as the owner of the cluster: postgres when we are root
# (initdb and postgres refuse to run as root), ourselves otherwise.
if [ "$(id -u)" -eq 0 ]; then
  owner=postgres
  as() { runuser -u postgres -- "$@"; }
else
  owner=$(id -un)
  as() { "$@"; }
fi

data=$dir/data
mkdir -p "$dir"
if [ "$(id -u)" -eq 0 ]; then chown "$owner": "$dir"; fi
chmod 0700 "$dir"

if [ ! -s "$data/PG_VERSION" ]; then
  log "initdb $data"
  pwfile=$(mktemp)
  printf '%s\n' "$password" >"$pwfile"
  if [ "$(id -u)" -eq 0 ]; then chown "$owner": "$pwfile"; fi
  as "$bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >&2
  rm -f "$pwfile"
fi

# Loopback only, the socket in our directory (not /var/run/postgresql, which
# may not exist or may belong to Debian's own cluster). Enough connections
# for the parallel conformance suite.
opts="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c max_connections=200"
if ! as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  log "starting the server on 127.0.0.1:$port"
  as "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -o "$opts" -w -t 60 start >&2 ||
    { log "start failed; the server's log:"; tail -n 50 "$dir/server.log" >&2; exit 1; }
fi

ready=false
for _ in $(seq 1 60); do
  if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then ready=true; break; fi
  sleep 0.5
done
if [ "$ready" != true ]; then
  log "the server does not accept connections on 127.0.0.1:$port after 30s; its log:"
  tail -n 50 "$dir/server.log" >&2
  exit 1
fi

psql() { as "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ "$(psql -c "SELECT 1 FROM pg_roles WHERE rolname = '$user'")" != 1 ]; then
  log "creating user $user"
  psql -c "CREATE ROLE $user LOGIN PASSWORD '$password'" >&2
fi
if [ "$(psql -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
  log "creating database $db"
  psql -c "CREATE DATABASE $db OWNER $user" >&2
fi

line="export HOOKLINE_POSTGRES_URL='$url'"
printf '%s\n' "$line" >"$dir/env"
log "ready: $url (also in $dir/env)"
printf '%s\n' "$line"
