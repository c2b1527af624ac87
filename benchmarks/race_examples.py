"""The worked races of docs/race.md: each one's ``frugalrl race`` command, its kept files, its table.

A race keeps its own rows (``RACE/rows.jsonl``, ``RACE/race.json``) and measures its runs' CPU itself, so this
script runs nothing: after the page's command has run (``--out runs/race-NAME``), ``--keep`` copies those two
files to ``benchmarks/results/races/NAME/``, and the page's section is rendered from them with the command's
own code (``frugalrl.race``); ``--report-only --check`` says whether the page shows what the kept rows say.

    frugalrl race --config configs/cartpole-ppo.yaml --contenders plain random-skip --seeds 5 \
        --cpu-budget-s 15 --out runs/race-cartpole           # the section's command, as the page shows it
    python -m benchmarks.race_examples --race cartpole --keep --write
    python -m benchmarks.race_examples --report-only --check
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from frugalrl.race import judge
from frugalrl.race.runs import RACE_FILE, ROWS_FILE, read_rows
from frugalrl.race.table import render

from . import _report

DOC = _report.REPO_ROOT / "docs" / "race.md"
KEPT = _report.RACES_DIR
RACES = {
    "cartpole": ["--config", "configs/cartpole-ppo.yaml", "--contenders", "plain", "random-skip", "--seeds", "5",
                 "--cpu-budget-s", "15"],
    "roadrunner": ["--config", "configs/atari100k-ppo.yaml", "--set", "env.id=ALE/RoadRunner-v5", "--set",
                   "eval.episodes=10", "--contenders", "plain", "latent=configs/roadrunner-latent.yaml", "--seeds",
                   "5", "--cpu-budget-s", "90"],
    # the claims ledger's latent-size row (benchmarks/ledger.py reads this race's kept files)
    "latent-size": ["--config", "configs/roadrunner-latent.yaml", "--set", "eval.episodes=10", "--contenders",
                    "d64:latent.latent_dim=64", "d32:latent.latent_dim=32", "d128:latent.latent_dim=128", "--seeds",
                    "3", "--cpu-budget-s", "50"],
}  # fmt: skip


def section(name: str) -> str:
    """The page's section for race ``name``, from its kept files."""
    race = json.loads((KEPT / name / RACE_FILE).read_text())
    rows = read_rows(KEPT / name)
    verdicts, winner, bar = judge(rows, [c["name"] for c in race["contenders"]])
    command = " ".join(["frugalrl", "race", *RACES[name], "--out", f"runs/race-{name}"])
    runs = f"{len(rows)} runs kept in `benchmarks/results/races/{name}/` ({ROWS_FILE}, {RACE_FILE})"
    return _report.wrap_prose(f"```bash\n{command}\n```\n\n{render(race, verdicts, winner, bar, rows)}\n{runs}.")


def keep(name: str) -> None:
    """Copy the finished race in ``runs/race-NAME`` (the page's command) into the kept files."""
    out = _report.REPO_ROOT / "runs" / f"race-{name}"
    if not (out / ROWS_FILE).is_file():
        command = " ".join(["frugalrl", "race", *RACES[name], "--out", f"runs/race-{name}"])
        raise SystemExit(f"no race in {out.relative_to(_report.REPO_ROOT)}: run `{command}` first")
    (KEPT / name).mkdir(parents=True, exist_ok=True)
    for file in (RACE_FILE, ROWS_FILE):
        shutil.copyfile(out / file, KEPT / name / file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--race", nargs="+", choices=list(RACES), default=None, help="default: every kept race")
    parser.add_argument("--keep", action="store_true", help="first copy each race's files from runs/race-NAME")
    parser.add_argument("--report-only", action="store_true", help="render from the kept files (the default)")
    parser.add_argument("--write", action="store_true", help="put the sections into docs/race.md")
    parser.add_argument("--check", action="store_true", help="exit 1 unless docs/race.md holds exactly this")
    args = parser.parse_args()
    names = args.race or [n for n in RACES if (KEPT / n / ROWS_FILE).is_file()]
    failed = []
    for name in names:
        if args.keep and not args.report_only:
            keep(name)
        text = section(name)
        print(text)
        key = f"race_{name}"
        if args.write:
            _report.write_section(key, text, path=DOC)
        if args.check and _report.doc_section(key, DOC) != text.strip():
            failed.append(key)
    if failed:
        sys.exit(f"docs/race.md sections {', '.join(failed)} are not what their kept rows render")


if __name__ == "__main__":
    main()
