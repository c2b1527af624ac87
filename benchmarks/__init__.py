"""The lab beside the product: scripts that measure frugalrl's claims against its peers.

Each script runs its contenders side by side, keeps one row per finished run in
``benchmarks/results/<name>.jsonl`` and renders its section of ``docs/benchmarks.md`` from those rows.
Run a script as a module from the repository root::

    python -m benchmarks.ppo_vs_sb3 --env CartPole-v1 --write    # measure, keep the rows, write the section
    python -m benchmarks.ppo_vs_sb3 --report-only --check        # re-render from the kept rows, compare

This package is part of the repository, not of the frugalrl distribution: it imports frugalrl, and
nothing in ``src/frugalrl``, ``pipelines`` or ``components`` imports it. Modules named with a leading
underscore (``_report``, ``_harness``, ``_pivot``, ...) are the helpers the scripts share; a script
imports helpers only, never another script (``tests/test_lab_direction.py``).
"""
