"""``python -m frugalrl.cli ARGS``: the command, as benchmarks and tests run it in a subprocess."""

from frugalrl.cli import main

if __name__ == "__main__":
    main()
