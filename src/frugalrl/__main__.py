"""``python -m frugalrl ARGS``: the ``frugalrl`` command without its console script (torchrun workers, images)."""

from frugalrl.cli import main

if __name__ == "__main__":
    main()
