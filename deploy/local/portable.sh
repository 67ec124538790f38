#!/usr/bin/env bash
# Local stand-in for a Flink cluster: Beam's Python job service (the portable job API a
# Flink job server also speaks; deploy/local/job_service.py, which runs a job on the
# --direct_num_workers it asks for) plus an EXTERNAL Python worker pool, on loopback.
#
#   deploy/local/portable.sh start [JOB_PORT] [POOL_PORT]   # default 8099 50000
#   deploy/local/portable.sh stop
#   deploy/local/portable.sh flags                          # the launcher flags to pass
#
# Then: mintdim-beam build CONFIG $(deploy/local/portable.sh flags)
# The worker pool starts a bare `python`, so the venv's bin must come first on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-$PWD/.venv}"
STATE="${MINTDIM_PORTABLE_STATE:-/tmp/mintdim-portable}"
JOB_PORT="${2:-${JOB_PORT:-8099}}"
POOL_PORT="${3:-${POOL_PORT:-50000}}"
export PATH="$VENV/bin:$PATH"

wait_port() {
  for _ in $(seq 1 100); do
    if python -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  echo "port $1 did not open" >&2
  return 1
}

case "${1:-}" in
  start)
    mkdir -p "$STATE"
    python deploy/local/job_service.py \
      --port "$JOB_PORT" >"$STATE/job_service.log" 2>&1 &
    echo $! >"$STATE/job_service.pid"
    python -m apache_beam.runners.worker.worker_pool_main \
      --service_port "$POOL_PORT" >"$STATE/worker_pool.log" 2>&1 &
    echo $! >"$STATE/worker_pool.pid"
    echo "$JOB_PORT $POOL_PORT" >"$STATE/ports"
    wait_port "$JOB_PORT"
    wait_port "$POOL_PORT"
    echo "job service on localhost:$JOB_PORT, worker pool on localhost:$POOL_PORT (logs in $STATE)"
    ;;
  stop)
    for name in job_service worker_pool; do
      if [ -f "$STATE/$name.pid" ]; then
        kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
        rm -f "$STATE/$name.pid"
      fi
    done
    ;;
  flags)
    read -r JOB_PORT POOL_PORT <"$STATE/ports"
    deploy/portable-flags.sh "localhost:$JOB_PORT" "localhost:$POOL_PORT"
    ;;
  *)
    echo "usage: $0 start [JOB_PORT] [POOL_PORT] | stop | flags" >&2
    exit 2
    ;;
esac
