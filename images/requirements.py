"""Print the step image's requirements: frugalrl's dependencies and the extras its steps use.

Run by both Dockerfiles before frugalrl itself is built, so the environment layer outlives code
changes: ``python3 images/requirements.py pyproject.toml pipelines peft > requirements.txt``.
Python 3.10 bases (the CUDA image's Ubuntu) have no tomllib; pip's vendored tomli reads the same.
"""

import sys

try:
    import tomllib
except ModuleNotFoundError:
    from pip._vendor import tomli as tomllib


def requirements(pyproject: str, extras: list[str]) -> list[str]:
    with open(pyproject, "rb") as file:
        project = tomllib.load(file)["project"]
    chosen = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]
    return [r for r in chosen if not r.startswith(project["name"] + "[")]  # an extra naming others: those are listed


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1], sys.argv[2:])))
