"""``python -m frugalrl ARGS`` and the ``frugalrl`` console script: the command, Ctrl-C included.

Importing the command takes a moment (typer, click); a Ctrl-C that lands then is the same one line
and exit code 130 as one that lands while a command runs (``frugalrl.cli.main``), not a traceback.
"""

import sys

from frugalrl.errors import INTERRUPTED  # a few lines, no imports: ready before the command loads


def run() -> None:
    try:
        # why here: inside the try, so a Ctrl-C while typer and click load is one line, exit code 130
        from frugalrl.cli import main
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
