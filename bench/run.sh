#!/usr/bin/env bash
# Runs convlog's benchmarks next to PostgreSQL and Redis in one run on this
# machine, and writes BENCHMARKS.md and bench/get_latency.png.
#
#   bench/run.sh            full run (about 10 minutes on 2 cores)
#   bench/run.sh -quick     development run (about 3 minutes), report on stdout
#   bench/run.sh -merge FILE  full run, with the sections FILE (a -json of an
#                           earlier run) has and this run does not: the long
#                           scale and soak sections, run on their own with
#                           go run -C bench . -sections scale,soak -json FILE
#
# Other flags are passed to the bench (see `go run -C bench . -h`; bench/ is
# a Go module of its own).
#
# BENCH_BIN=path runs that bench binary instead of this tree's bench (one
# built from another commit with `go build -o path .` in its bench/), with
# the same PostgreSQL, Redis and nats-server: an alternated comparison of
# two trees runs run.sh once per tree, each with its own binary.
#
# PostgreSQL and Redis come from Debian's packages (installed with apt-get
# when missing; needs root). They are started here, on loopback ports of
# their own, with data directories in a temporary directory, and stopped
# and removed on exit, whatever happens. Nothing else on the machine is
# touched: a system PostgreSQL or Redis keeps running on its own ports.
set -euo pipefail

cd "$(dirname "$0")/.."

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

if [[ -z "$(pg_bin)" || ! -x "$(pg_bin)/initdb" ]] || ! command -v redis-server >/dev/null; then
	echo "run.sh: installing postgresql and redis-server (Debian packages)" >&2
	if [[ $(id -u) -ne 0 ]]; then
		echo "run.sh: need root to install packages; install postgresql and redis-server, or run as root" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null
fi
PGBIN=$(pg_bin)

# free_port prints a TCP port nothing listens on (loopback).
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "run.sh: no free port found" >&2
	exit 1
}

TMP=$(mktemp -d /tmp/convlog-bench.XXXXXX)
chmod 755 "$TMP"
PGDATA="$TMP/pg"
PGPORT=$(free_port)
REDISPORT=$(free_port)

# PostgreSQL refuses to run as root: as root, run it as the postgres user.
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

cleanup() {
	set +e
	if [[ -f "$PGDATA/postmaster.pid" ]]; then
		as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1
	fi
	if [[ -f "$TMP/redis.pid" ]]; then
		local pid
		pid=$(cat "$TMP/redis.pid")
		kill "$pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

mkdir -p "$PGDATA" "$TMP/redis"
if [[ $(id -u) -eq 0 ]]; then
	chown postgres "$PGDATA"
fi
echo "run.sh: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PGPORT, data in $PGDATA" >&2
as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres -A trust --no-sync >/dev/null
# Default settings but for where it listens; fsync and synchronous_commit
# stay on (the bench checks).
as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w \
	-o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$PGDATA -c max_connections=100" start >/dev/null

echo "run.sh: Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2) on 127.0.0.1:$REDISPORT, data in $TMP/redis" >&2
redis-server --port "$REDISPORT" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec \
	--dir "$TMP/redis" --daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis/redis.log"
for _ in $(seq 50); do
	redis-cli -p "$REDISPORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done

# The cluster section runs three real nats-server processes: the version
# go.mod requires, built here.
echo "run.sh: building nats-server for the cluster section" >&2
go build -o "$TMP/nats-server" github.com/nats-io/nats-server/v2

bench=(go run -C bench .)
if [[ -n "${BENCH_BIN:-}" ]]; then
	bench=("$BENCH_BIN")
fi
"${bench[@]}" -pg "postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable" -redis "127.0.0.1:$REDISPORT" \
	-dir "$TMP" -nats-server "$TMP/nats-server" -cmd "bench/run.sh${*:+ $*}" "$@"
