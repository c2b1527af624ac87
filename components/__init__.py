"""Kubeflow Pipelines v2 components: thin adapters around ``frugalrl.steps``.

Each component reads typed KFP artifacts, makes one library call, and writes typed KFP
artifacts; MLflow logging happens inside the library. The container image is taken from
``FRUGALRL_IMAGE`` at compile time; the default is the CPU image that
``docker build -f images/Dockerfile.cpu -t frugalrl:0.1.0-cpu .`` builds. On a cluster, push
it to your registry and compile with ``FRUGALRL_IMAGE=<registry>/frugalrl:0.1.0-cpu``.
"""

import os

# FRUGALRL_IMAGE names the image outright; otherwise it is <FRUGALRL_REGISTRY>/frugalrl:<FRUGALRL_IMAGE_TAG>
# (e.g. FRUGALRL_REGISTRY=ghcr.io/acme FRUGALRL_IMAGE_TAG=0.1.0-cuda for GPU node pools).
_REGISTRY = os.environ.get("FRUGALRL_REGISTRY", "").rstrip("/")
_TAG = os.environ.get("FRUGALRL_IMAGE_TAG", "0.1.0-cpu")
FRUGALRL_IMAGE = os.environ.get("FRUGALRL_IMAGE") or (f"{_REGISTRY}/" if _REGISTRY else "") + f"frugalrl:{_TAG}"
