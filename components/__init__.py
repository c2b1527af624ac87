"""Kubeflow Pipelines v2 components: thin adapters around ``frugalrl.steps``.

Each component reads typed KFP artifacts, makes one library call, and writes typed KFP
artifacts; MLflow logging happens inside the library. The container image is taken from
``FRUGALRL_IMAGE`` at compile time (default: the CPU image built from ``images/``).
"""

import os

FRUGALRL_IMAGE = os.environ.get("FRUGALRL_IMAGE", "ghcr.io/frugalrl/frugalrl:0.1.0-cpu")
