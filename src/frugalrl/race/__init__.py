"""Which technique pays on my task? An equal-compute race of contenders against the plain learner.

``contenders`` turns what the user names (``plain``, ``random-skip``, ``LABEL=other.yaml``,
``LABEL:key=value``) into configs and refuses one that does not fit the config's learner; ``runs`` trains
every contender on paired seeds to the same CPU budget, one process per run, keeping a row as each run ends
(``rows.jsonl``), so a race resumes; ``verdict`` turns the rows into per-contender statistics and the
decision; ``table`` writes them out. docs/race.md is the user's page.
"""

from frugalrl.race.contenders import BUILTIN, Contender, parse_contenders
from frugalrl.race.runs import RaceSpec, load_spec, run_race
from frugalrl.race.verdict import MIN_SEEDS, Verdict, judge

__all__ = [
    "BUILTIN", "MIN_SEEDS", "Contender", "RaceSpec", "Verdict", "judge", "load_spec", "parse_contenders", "run_race",
]  # fmt: skip
