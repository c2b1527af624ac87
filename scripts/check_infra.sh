#!/usr/bin/env bash
# Static checks of what is deployed rather than imported: the Dockerfiles (hadolint), the
# rendered Kustomize overlays (kubectl where installed, else scripts/kustomize.py) against the
# Kubernetes schemas (kubernetes-validate, strict), and
# the Terraform module's formatting. `terraform validate` needs the provider plugins from
# registry.terraform.io; where that is unreachable (as in CI here) only `terraform fmt` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}

"$BIN/hadolint" images/Dockerfile.cpu images/Dockerfile.cuda
echo "hadolint: images/Dockerfile.cpu images/Dockerfile.cuda clean"

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
for overlay in infra/overlays/*/; do
  name=$(basename "$overlay")
  if command -v kubectl >/dev/null 2>&1; then
    kubectl kustomize "$overlay" > "$rendered/$name.yaml"
  else  # a machine with only Python: the project's renderer of the Kustomize subset infra/ uses
    "$BIN/python" scripts/kustomize.py "$overlay" > "$rendered/$name.yaml"
    echo "kubectl not found: rendered $overlay with scripts/kustomize.py"
  fi
  "$BIN/kubernetes-validate" --strict --quiet "$rendered/$name.yaml"
  echo "manifests: infra/overlays/$name valid ($(grep -c '^kind:' "$rendered/$name.yaml") resources)"
done

"$BIN/frugalrl" pytorchjob validate infra/training/pytorchjob.yaml

if command -v terraform >/dev/null 2>&1; then
  TF_CLI_CONFIG_FILE=/dev/null terraform fmt -check -recursive infra/terraform 2>/dev/null
  echo "terraform fmt: infra/terraform formatted (terraform validate skipped: needs registry.terraform.io)"
else
  echo "terraform not installed: infra/terraform checks skipped"
fi
