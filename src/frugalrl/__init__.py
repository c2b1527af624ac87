"""frugalrl: cheaper reinforcement-learning training, every run auditable.

The Python API (docs/python-api.md): ``load_config``, ``train`` (a ``Run``), ``load_policy`` (a policy with
``predict``), ``evaluate`` (an ``EvalResult``), ``Callback`` (train's hooks) and ``FrugalError``, the one error
type a user can fix. Its names load on first use (``frugalrl.lazy_names``), so ``import frugalrl`` and
``frugalrl --help`` load neither torch nor pydantic.

``frugalrl.train`` is the API's function, also once the module of that name is imported: import what that
module holds with ``from frugalrl.training import ...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frugalrl.errors import FrugalError
from frugalrl.lazy_names import lazy_names

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use
    from frugalrl.api import Run, evaluate, load_config, load_policy, train
    from frugalrl.evaluation import EvalResult
    from frugalrl.loop import Callback

_LAZY = {
    "Callback": "loop",
    "EvalResult": "evaluation",
    "Run": "api",
    "evaluate": "api",
    "load_config": "api",
    "load_policy": "api",
    "train": "api",
}
_, __getattr__, _ = lazy_names(__name__, globals(), _LAZY)
__all__ = ["Callback", "EvalResult", "FrugalError", "Run", "evaluate", "load_config", "load_policy", "train"]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
