#!/usr/bin/env bash
# The quick profile twice against one MLflow server: every stage as a subprocess, then every stage in
# the step image (--runner docker); then each registered model's versions with their scores and the
# image digest their runs recorded. Needs `make setup`, a Docker daemon and the image (`make image`).
#   scripts/compare_runners.sh [WORKDIR]      (default /tmp/frugalrl-runners)
set -euo pipefail
cd "$(dirname "$0")/.."
W="${1:-/tmp/frugalrl-runners}"
rm -rf "$W" && mkdir -p "$W"
PORT=5055
.venv/bin/mlflow server --host 127.0.0.1 --port $PORT --workers 1 --backend-store-uri "sqlite:///$W/mlflow.db" \
  --artifacts-destination "$W/artifacts" >"$W/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 1; done
export MLFLOW_TRACKING_URI="http://127.0.0.1:$PORT"
echo "load before: $(cat /proc/loadavg)"
for runner in subprocess docker; do
  start=$SECONDS
  .venv/bin/frugalrl pipeline run --profile quick --root "$W/$runner" --runner $runner | tail -7
  echo "$runner: $((SECONDS - start)) s; load: $(cat /proc/loadavg)"
done
.venv/bin/python - <<'PY'
from mlflow import MlflowClient

client = MlflowClient()
for model in client.search_registered_models():
    versions = sorted(client.search_model_versions(f"name='{model.name}'"), key=lambda v: int(v.version))
    rows = [(v.version, v.tags.get("frugalrl.score"), client.get_run(v.run_id).data.tags.get("frugalrl.image_digest"))
            for v in versions]
    print(model.name, rows)
PY
