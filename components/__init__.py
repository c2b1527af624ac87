"""Kubeflow Pipelines v2 components: thin adapters around ``frugalrl.ops.steps``.

Each component reads typed KFP artifacts, makes one library call, and writes typed KFP
artifacts; MLflow logging happens inside the library. Every component is declared with the
default step image (``frugalrl.ops.images.DEFAULT_IMAGE``, the CPU image
``docker build -f images/Dockerfile.cpu -t frugalrl:0.1.0-cpu .`` builds). The image a compiled
pipeline or a local container run really uses is decided in one place, at compile or run time:
``pipelines.containers.resolve_image`` (``--image REF``, else the checkout's last build), which
``pinned_image`` writes into every step.
"""

from frugalrl.ops.images import DEFAULT_IMAGE

# The name every component module imports: decided once, here, never from the environment.
FRUGALRL_IMAGE = DEFAULT_IMAGE
