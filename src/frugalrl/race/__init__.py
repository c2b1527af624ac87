"""Which technique pays on my task? An equal-compute race of contenders against the plain learner.

``contenders`` turns what the user names (``plain``, ``random-skip``, ``LABEL=other.yaml``,
``LABEL:key=value``) into configs and refuses one that does not fit the config's learner; ``runs`` trains
every contender on paired seeds to the same CPU budget, one process per run, keeping a row as each run ends
(``rows.jsonl``), so a race resumes; ``verdict`` turns the rows into per-contender statistics and the
decision; ``table`` writes them out. docs/race.md is the user's page.

The names below load on first use (PEP 562): a profile reads ``contenders`` without the runs' torch.
"""

from __future__ import annotations

from frugalrl.lazy_names import lazy_names

_HOME = {  # name -> the submodule that defines it
    **dict.fromkeys(["BUILTIN", "Contender", "parse_contenders"], "contenders"),
    **dict.fromkeys(["RaceSpec", "load_spec", "run_race"], "runs"),
    **dict.fromkeys(["MIN_SEEDS", "Verdict", "judge"], "verdict"),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, globals(), _HOME)
