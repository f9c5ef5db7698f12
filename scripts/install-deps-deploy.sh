#!/bin/sh
# Installs what the container image and Kubernetes parts need (deploy/,
# tests/deploy/), and nothing that is already there. Safe to run again.
#   - Debian packages: buildah (builds and runs the image), python3-grpcio
#     (the tests' gRPC client), protobuf-compiler, iproute2, util-linux,
#     binutils, ca-certificates; nodejs and npm only if there is no node.
#   - npm packages pinned in tests/deploy/package.json + package-lock.json,
#     into tests/deploy/node_modules (never global): kubernetes-models and
#     @kubernetes-models/prometheus-operator (API schemas), typescript (strict
#     field check against the same models' types), yaml.
#   - kubectl (for `kubectl kustomize`) is not a current Debian 12 package:
#     this only checks that the one on the machine renders kustomize v4+
#     kustomizations (kubectl 1.21 or newer).
# Uses sudo for apt when not run as root.
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")


PACKAGES="buildah python3-grpcio protobuf-compiler iproute2 util-linux binutils ca-certificates"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES="$PACKAGES nodejs npm"
fi

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-deploy $PACKAGES

# npm: install from the lock file unless every pinned package is already
# there at its pinned version.
# shellcheck disable=SC2016  # JavaScript, not shell
if (cd "$repo/tests/deploy" && node -e '
    const fs = require("fs");
    const deps = require("./package.json").dependencies;
    for (const [name, version] of Object.entries(deps)) {
      const file = `node_modules/${name}/package.json`;
      if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file)).version !== version) process.exit(1);
    }') 2>/dev/null; then
  echo "install-deps-deploy: tests/deploy/node_modules up to date"
else
  echo "install-deps-deploy: npm ci in tests/deploy/"
  (cd "$repo/tests/deploy" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi

if command -v kubectl >/dev/null 2>&1 && kubectl kustomize "$repo/deploy/k8s" >/dev/null 2>&1; then
  echo "install-deps-deploy: kubectl renders deploy/k8s ($(kubectl version --client 2>/dev/null | grep -i kustomize || echo 'kustomize built in'))"
elif command -v kustomize >/dev/null 2>&1 && kustomize build "$repo/deploy/k8s" >/dev/null 2>&1; then
  echo "install-deps-deploy: kustomize renders deploy/k8s"
else
  echo "install-deps-deploy: WARNING: no kubectl (1.21+) or kustomize that renders deploy/k8s; Debian 12's kubernetes-client (1.20) is too old. deploy.k8s_manifests and deploy.k8s_pod will fail." >&2
fi
