#!/usr/bin/env bash
# Re-resolve every dependency from pyproject.toml's open ranges in a fresh virtual environment and
# write the versions it got to constraints/pyXY.txt, XY being that Python's version (what `make
# setup`, `.ci/run` and the step image install on that Python: numpy and others drop old Pythons,
# so one file cannot serve every Python). Then run `make test` (it re-installs from the new file)
# and commit the file with it: the pins are only worth keeping once the suite has passed on them.
#
#   scripts/refresh_constraints.sh                      # python3: writes constraints/py311.txt here
#   PYTHON=python3.12 scripts/refresh_constraints.sh    # writes constraints/py312.txt
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$TORCH_SPEC"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
tag="$("$venv/bin/python" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
out="constraints/$tag.txt"
mkdir -p constraints
{
  echo "# Every package \`make setup\` (on this Python), .ci/run and the step image install, at the versions CI ran:"
  echo "# pip constraints (pyproject.toml keeps open ranges for users). Made by"
  echo "# scripts/refresh_constraints.sh with $("$venv/bin/python" -c 'import platform; print("Python", platform.python_version())')"
  echo "# on $(date -u +%Y-%m-%d); local version labels (+cpu) are dropped so a CUDA build satisfies them too."
  "$venv/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check \
    | grep -v -i '^frugalrl' | sed -E 's/^([^=]+==[^+]+)\+.*/\1/' | LC_ALL=C sort -f
} > "$out.new"
mv "$out.new" "$out"
echo "wrote $out ($(grep -c '==' "$out") packages); now run: make test"
