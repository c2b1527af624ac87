"""The operations layer: what runs, ships, checks and reports on the RL core, apart from it.

``steps`` (the pipeline steps the Kubeflow components call), ``profiles`` (the production DAG's typed
profiles), ``promotion`` (the statistical gate before a model becomes champion), ``report``, ``claims``
and ``video`` (the pipeline's HTML report, the seed documents' claims beside a run's figures, episode
GIFs), ``images`` and ``image_context`` (the step image: build, push, its build context), ``audit``
(re-run a tracked run and compare) and ``doctor`` (``frugalrl check``). The RL core (``train``,
``loop``, ``algos/``, the techniques) imports only ``promotion`` (``tracking.registry``) and
``images.REFERENCE`` (``fusion.trainjob``) from here. Imports nothing itself, so importing one module
loads no other.
"""
