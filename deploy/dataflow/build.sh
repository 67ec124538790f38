#!/usr/bin/env bash
# Build and push the image, then write the Flex Template spec.
#   PROJECT=my-project REGION=europe-west4 REPO=mintdim BUCKET=my-bucket deploy/dataflow/build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PROJECT:?set PROJECT}" "${REGION:?set REGION}" "${REPO:?set REPO (Artifact Registry)}" "${BUCKET:?set BUCKET}"
TAG="${TAG:-$(git rev-parse --short HEAD 2>/dev/null || echo latest)}"
IMAGE="${REGION}-docker.pkg.dev/${PROJECT}/${REPO}/mintdim-beam:${TAG}"

gcloud builds submit --project "$PROJECT" --tag "$IMAGE" --config /dev/stdin . <<YAML
steps:
- name: gcr.io/cloud-builders/docker
  args: [build, -f, deploy/dataflow/Dockerfile, -t, "$IMAGE", .]
images: ["$IMAGE"]
YAML

gcloud dataflow flex-template build "gs://${BUCKET}/templates/mintdim-beam.json" \
  --project "$PROJECT" \
  --image "$IMAGE" \
  --sdk-language PYTHON \
  --metadata-file deploy/dataflow/metadata.json

echo "template: gs://${BUCKET}/templates/mintdim-beam.json  image: $IMAGE"
