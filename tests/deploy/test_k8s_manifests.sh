#!/bin/bash
# deploy.k8s_manifests: deploy/k8s and each overlay render with kustomize, and
# every rendered object validates offline against the Kubernetes schemas and
# types, plus the checks of manifests.mjs (probes on the gRPC port, the volume
# under --db or, for overlays/postgresql, the Secret under --store_file and the
# pod otherwise the base's, the image tag = project version, the security
# context, drain timing, Services, PodDisruptionBudget, Prometheus scraping,
# and the PrometheusRule = deploy/monitoring/hilo-rules.yaml).
#   test_k8s_manifests.sh SOURCE_DIR
set -euo pipefail
TEST_NAME=deploy.k8s_manifests  # used by common.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$here/common.sh"
src=$(cd "${1:?usage: test_k8s_manifests.sh SOURCE_DIR}" && pwd)
need_node_modules "$src"

work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-k8s-manifests.XXXXXX")
trap 'rm -rf "$work"' EXIT

if command -v kubectl >/dev/null; then
  log "renderer: kubectl $(kubectl version --client 2>/dev/null | tr '\n' ' ')"
fi
render "$src/deploy/k8s" "$work/base.yaml"
node "$here/manifests.mjs" validate --src "$src" --variant base "$work/base.yaml"

overlays=0
for dir in "$src"/deploy/k8s/overlays/*/; do
  name=$(basename "$dir")
  render "$dir" "$work/$name.yaml"
  node "$here/manifests.mjs" validate --src "$src" --variant "$name" --base "$work/base.yaml" "$work/$name.yaml"
  overlays=$((overlays + 1))
done
[ "$overlays" -ge 1 ] || fail "no overlay under deploy/k8s/overlays"
log "ok: base and $overlays overlay(s) render and validate"
