#!/usr/bin/env bash
# The launcher flags for any portable job server (the local Python job service or a
# Flink job server) with an EXTERNAL Python worker pool. Used by local/portable.sh and
# flink/submit.sh so both run the pipeline the same way.
#   deploy/portable-flags.sh JOB_ENDPOINT WORKER_POOL_ENDPOINT
set -euo pipefail
JOB="${1:?usage: portable-flags.sh JOB_ENDPOINT WORKER_POOL_ENDPOINT}"
POOL="${2:?usage: portable-flags.sh JOB_ENDPOINT WORKER_POOL_ENDPOINT}"
echo "--runner=PortableRunner --job_endpoint=${JOB} --environment_type=EXTERNAL --environment_config=${POOL}"
