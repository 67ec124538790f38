#!/usr/bin/env bash
# Submit a build to the Flink cluster of docker-compose.yml through Beam's Flink job
# server, with the same launcher flags as the local portable setup (deploy/portable-flags.sh).
#   deploy/flink/submit.sh CONFIG [more beam flags...]
# JOB_ENDPOINT (default localhost:8099) is the job server as seen from here;
# WORKER_POOL (default localhost:50000) is the worker pool as seen from the TaskManager.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG="${1:?usage: submit.sh CONFIG [beam flags...]}"
shift
FLAGS=$(deploy/portable-flags.sh "${JOB_ENDPOINT:-localhost:8099}" "${WORKER_POOL:-localhost:50000}")
# shellcheck disable=SC2086
exec mintdim-beam build "$CONFIG" $FLAGS --parallelism="${PARALLELISM:-4}" "$@"
