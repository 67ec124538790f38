#!/usr/bin/env bash
# Launch a build from the template; returns once the job is submitted (it does not wait).
#   PROJECT=my-project REGION=europe-west4 BUCKET=my-bucket IMAGE=... \
#     deploy/dataflow/run.sh gs://my-bucket/configs/sft.yaml [on_overflow=truncate] [input_range_bytes=...]
set -euo pipefail
: "${PROJECT:?set PROJECT}" "${REGION:?set REGION}" "${BUCKET:?set BUCKET}" "${IMAGE:?set IMAGE (printed by build.sh)}"
CONFIG="${1:?usage: run.sh gs://.../config.yaml [name=value ...]}"
shift
PARAMS="config=${CONFIG},sdk_container_image=${IMAGE}"
for extra in "$@"; do PARAMS="${PARAMS},${extra}"; done

gcloud dataflow flex-template run "mintdim-beam-$(date +%Y%m%d-%H%M%S)" \
  --project "$PROJECT" \
  --region "$REGION" \
  --template-file-gcs-location "gs://${BUCKET}/templates/mintdim-beam.json" \
  --temp-location "gs://${BUCKET}/tmp" \
  --staging-location "gs://${BUCKET}/staging" \
  --parameters "$PARAMS"
