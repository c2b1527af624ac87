"""Thirteen ways to fine-tune a policy network, behind one registry.

Each method is one ``register(Method(...))`` into ``PEFT_METHODS``, a ``plugins.Registry`` like every
other seam's: its settings model (the options ``peft.methods.<name>`` accepts, with their defaults and
types), the layers it targets, how it makes its parameters trainable (``apply``), what fits a
layer (``fits``) and which options the config bounds by the network's width. ``adapt``, the config
checks and the comparison read only that entry, so a new method touches nothing else.

``adapt(network, spec)`` changes ``network`` in place so that exactly the method's parameters
are trainable, and returns what was done. The network is an MLP policy or critic: torso
``nn.Linear`` layers (the ``hidden`` ones are those after the first), then small output heads
(``heads`` names them). Every method except ``full``, ``head_only`` and ``bitfit`` also trains
the heads, as ``peft``'s ``modules_to_save`` does: the output layer is where a new task's
action scale lands.

- ``full``       every parameter (the reference the others are measured against)
- ``head_only``  the output heads only (a linear probe on the frozen torso)
- ``lora`` ``dora`` ``loha`` ``lokr`` ``ia3`` ``oft`` ``vera`` ``fourierft``: the ``peft``
  library's tuners on the torso's linear layers
- ``bitfit``     every bias, nothing else (Ben Zaken et al. 2022)
- ``adapter``    Houlsby bottleneck adapters after each torso layer: h + up(relu(down(h))),
  ``up`` zero-initialised so training starts from the source policy exactly
- ``prefix``     a learned vector added to each torso layer's input. Prefix-tuning prepends
  learned activations that attention mixes in; an MLP has no attention, so a learned prefix
  can only enter additively: as an input shift (the same shift for every state)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import torch
from pydantic import BaseModel, ConfigDict, Field, StrictInt
from torch import nn

from frugalrl.errors import ConfigError
from frugalrl.plugins import Registry

# (network, resolved options, torso layer names, the layers) -> objects the adaptation keeps alive.
# Called with every parameter frozen; it makes its own parameters trainable (the heads are adapt's).
Apply = Callable[[nn.Module, dict[str, Any], list[str], list[nn.Linear]], list[Any]]
# (resolved options, one targeted layer) -> why the options do not fit it, or None
Fits = Callable[[dict[str, Any], nn.Linear], str | None]


def _fits_anything(options: dict[str, Any], layer: nn.Linear) -> str | None:
    return None


# ---------------------------------------------------------------------------- each method's settings
# Every option is a positive whole number (a rank, a width, a count); a bool or 8.0 is refused.
Positive = Annotated[StrictInt, Field(ge=1)]


class NoOptions(BaseModel):
    """A method that takes no options (``peft.methods.<name>: {}``)."""

    model_config = ConfigDict(extra="forbid")


class LowRank(NoOptions):
    rank: Positive = Field(
        8, description="the update's rank: more trainable parameters as it grows; at most a layer's width"
    )
    alpha: Positive = Field(16, description="the update's scale (it is multiplied by alpha / rank)")


class BlockSize(NoOptions):
    block_size: Positive = Field(16, description="size of each orthogonal block; it must divide each layer's inputs")


class VeraRank(NoOptions):
    # one shared random pair: it may be wider than a layer
    rank: Positive = Field(64, description="rank of the shared frozen random pair (may exceed a layer's width)")


class Frequencies(NoOptions):
    n_frequency: Positive = Field(256, description="spectral coefficients learned per layer (the trainable parameters)")


class Bottleneck(NoOptions):
    bottleneck: Positive = Field(16, description="the adapter's inner width; at most the adapted layer's width")


@dataclass(frozen=True)
class Method:
    """One fine-tuning method: its settings, the layers it adapts, how it adapts them, what fits a layer."""

    name: str
    description: str
    apply: Apply
    settings: type[BaseModel] = NoOptions  # the options peft.methods.<name> accepts
    layers: str = "all"  # all torso linears, or "hidden" (not a torso's input layer)
    trains_heads: bool = True
    fits: Fits = _fits_anything
    # options bounded by a layer's width: the config refuses them above the narrowest hidden layer
    width_options: tuple[str, ...] = ()


# The seam's registry. Its package is this module: a method defined elsewhere registers when its module
# is imported (there is no folder of methods to discover).
PEFT_METHODS: Registry[Method] = Registry("PEFT method", "peft.methods", __name__)


def register(method: Method) -> Method:
    """Add ``method`` under its name: ``peft.methods`` and ``adapt`` accept it from then on."""
    return PEFT_METHODS.register(method.name, settings=method.settings)(method)


def unregister(name: str) -> None:
    """Forget method ``name`` (a test's or a notebook's registration)."""
    PEFT_METHODS.unregister(name)


def method_names() -> list[str]:
    """The registered methods' names, sorted."""
    return PEFT_METHODS.kinds()


def method(name: str) -> Method:
    """The method registered as ``name``; a ``ConfigError`` naming the known ones otherwise."""
    if name not in PEFT_METHODS.kinds():
        raise ConfigError(f"unknown PEFT method {name!r}; allowed: {method_names()}")
    return PEFT_METHODS.entry(name).factory


def resolve_options(name: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` validated by method ``name``'s settings model, its defaults filled in; a ``ConfigError``
    naming the method and the key otherwise (an unknown key lists the allowed ones)."""
    model = method(name).settings
    try:
        return PEFT_METHODS.settings_for(name, options or {}).model_dump()
    except ValueError as exc:
        text = str(exc)
        if "unknown key" in text:
            unknown = sorted(set(options or {}) - set(model.model_fields))
            allowed = sorted(model.model_fields) or "none"
            text = f"unknown option(s) {unknown}; allowed: {allowed}"
        raise ConfigError(f"PEFT method {name}: {text}; change peft.methods.{name}") from None


@dataclass
class Adaptation:
    """What ``adapt`` did: the method, its resolved options, and the parameter counts."""

    method: str
    options: dict[str, Any]
    trainable: int
    base_parameters: int
    keep_alive: list[Any] = field(default_factory=list, repr=False)  # peft tuners holding shared state

    @property
    def trainable_share(self) -> float:
        return self.trainable / self.base_parameters


# ---------------------------------------------------------------------------- own small methods
class BottleneckAdapter(nn.Module):
    """A linear layer followed by a residual bottleneck: y + up(relu(down(y)))."""

    def __init__(self, base: nn.Linear, bottleneck: int):
        super().__init__()
        self.base = base
        self.down = nn.Linear(base.out_features, bottleneck)
        self.up = nn.Linear(bottleneck, base.out_features)
        nn.init.zeros_(self.up.weight)  # identity at the start: the source policy, unchanged
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        return y + self.up(torch.relu(self.down(y)))


class PrefixLinear(nn.Module):
    """A linear layer whose input gets a learned additive prefix (zero at the start)."""

    def __init__(self, base: nn.Linear):
        super().__init__()
        self.base = base
        self.prefix = nn.Parameter(torch.zeros(base.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x + self.prefix)


# ---------------------------------------------------------------------------- helpers
def torso_linears(network: nn.Module, heads: list[str]) -> list[str]:
    """Names of the network's ``nn.Linear`` layers that are not heads, in order."""
    head_prefixes = tuple(f"{h}." for h in heads)
    return [
        name
        for name, module in network.named_modules()
        if isinstance(module, nn.Linear) and name not in heads and not name.startswith(head_prefixes)
    ]


def _set_module(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, child, module)


def _count(network: nn.Module) -> int:
    return sum(p.numel() for p in network.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------- what fits a layer
def _rank_fits(options: dict[str, Any], layer: nn.Linear) -> str | None:
    smallest = min(layer.in_features, layer.out_features)
    rank = int(options["rank"])
    return None if 1 <= rank <= smallest else f"rank {options['rank']} must be between 1 and {smallest}"


def _vera_fits(options: dict[str, Any], layer: nn.Linear) -> str | None:
    # its shared random pair may be wider than a layer: only r >= 1 matters
    return None if int(options["rank"]) >= 1 else f"rank {options['rank']} must be between 1 and 1"


def _block_fits(options: dict[str, Any], layer: nn.Linear) -> str | None:
    block = int(options["block_size"])
    if block < 1 or layer.in_features % block:
        return f"block_size {options['block_size']} must divide its {layer.in_features} inputs"
    return None


def _frequency_fits(options: dict[str, Any], layer: nn.Linear) -> str | None:
    most = layer.in_features * layer.out_features
    return (
        None
        if 1 <= int(options["n_frequency"]) <= most
        else f"n_frequency {options['n_frequency']} must be between 1 and {most}"
    )


def _bottleneck_fits(options: dict[str, Any], layer: nn.Linear) -> str | None:
    if 1 <= int(options["bottleneck"]) <= layer.out_features:
        return None
    return f"bottleneck {options['bottleneck']} must be between 1 and {layer.out_features}"


def _fits(method: Method, options: dict[str, Any], layers: list[nn.Linear], names: list[str]) -> None:
    """A rank, block size or frequency count that does not fit a targeted layer is a config error."""
    for name, layer in zip(names, layers, strict=True):
        problem = method.fits(options, layer)
        if problem:
            raise ConfigError(
                f"PEFT method {method.name}: layer {name} ({layer.in_features}->{layer.out_features}): {problem}; "
                f"change peft.methods.{method.name}"
            )


# ---------------------------------------------------------------------------- how each method adapts
def _train_everything(
    network: nn.Module, options: dict[str, Any], names: list[str], layers: list[nn.Linear]
) -> list[Any]:
    network.requires_grad_(True)
    return []


def _train_heads_only(
    network: nn.Module, options: dict[str, Any], names: list[str], layers: list[nn.Linear]
) -> list[Any]:
    return []  # adapt makes the heads trainable


def _train_biases(network: nn.Module, options: dict[str, Any], names: list[str], layers: list[nn.Linear]) -> list[Any]:
    for name, param in network.named_parameters():
        param.requires_grad_(name.endswith("bias"))
    return []


def _wrapper(wrap: Callable[[nn.Linear, dict[str, Any]], nn.Module]) -> Apply:
    """Each targeted layer replaced by ``wrap(layer, options)``; the wrappers' own parameters train."""

    def apply(network: nn.Module, options: dict[str, Any], names: list[str], layers: list[nn.Linear]) -> list[Any]:
        for name, layer in zip(names, layers, strict=True):
            _set_module(network, name, wrap(layer, options))
        for module in network.modules():
            if isinstance(module, BottleneckAdapter):
                module.down.requires_grad_(True)
                module.up.requires_grad_(True)
            elif isinstance(module, PrefixLinear):
                module.prefix.requires_grad_(True)
        return []

    return apply


def _tuner(name: str, peft_config: Callable[[Any, dict[str, Any], dict[str, Any]], Any]) -> Apply:
    """A ``peft`` library tuner injected into the targeted layers; ``peft_config(peft, options, common)``
    builds its config (``common``: the target modules, no modules to save)."""

    def apply(network: nn.Module, options: dict[str, Any], names: list[str], layers: list[nn.Linear]) -> list[Any]:
        import peft  # third-party and slow to load: only when a tuner is applied
        from peft.mapping import PEFT_TYPE_TO_TUNER_MAPPING

        config = peft_config(peft, options, {"target_modules": names, "modules_to_save": None})
        try:
            return [PEFT_TYPE_TO_TUNER_MAPPING[config.peft_type](network, config, "default")]  # holds shared state
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"PEFT method {name} {options}: {exc}; change peft.methods.{name}") from None

    return apply


def _lora(dora: bool) -> Callable[[Any, dict[str, Any], dict[str, Any]], Any]:
    def build(peft: Any, o: dict[str, Any], common: dict[str, Any]) -> Any:
        return peft.LoraConfig(r=o["rank"], lora_alpha=o["alpha"], lora_dropout=0.0, use_dora=dora, **common)

    return build


for _method in [
    Method("full", "full fine-tuning (every parameter)", _train_everything),
    Method("head_only", "output heads only (linear probe)", _train_heads_only),
    Method("lora", "LoRA: low-rank update W + BA", _tuner("lora", _lora(False)), LowRank,
           fits=_rank_fits, width_options=("rank",)),
    Method("dora", "DoRA: LoRA on the direction, a learned magnitude", _tuner("dora", _lora(True)), LowRank,
           fits=_rank_fits, width_options=("rank",)),
    Method("loha", "LoHa: Hadamard product of two low-rank updates",
           _tuner("loha", lambda peft, o, c: peft.LoHaConfig(r=o["rank"], alpha=o["alpha"], **c)), LowRank,
           fits=_rank_fits, width_options=("rank",)),
    Method("lokr", "LoKr: Kronecker-factored update",
           _tuner("lokr", lambda peft, o, c: peft.LoKrConfig(r=o["rank"], alpha=o["alpha"], **c)), LowRank,
           fits=_rank_fits, width_options=("rank",)),
    Method("ia3", "IA3: learned scaling of each layer's inputs",
           _tuner("ia3", lambda peft, o, c: peft.IA3Config(feedforward_modules=c["target_modules"], **c))),
    Method("oft", "OFT: block-diagonal orthogonal rotation of the weights",
           _tuner("oft", lambda peft, o, c: peft.OFTConfig(r=0, oft_block_size=o["block_size"], **c)),
           BlockSize, layers="hidden", fits=_block_fits),
    Method("vera", "VeRA: shared frozen random low-rank pair, learned scalings",
           _tuner("vera", lambda peft, o, c: peft.VeraConfig(r=o["rank"], **c)), VeraRank, fits=_vera_fits),
    Method("fourierft", "FourierFT: learned spectral coefficients of the update",
           _tuner("fourierft", lambda peft, o, c: peft.FourierFTConfig(n_frequency=o["n_frequency"], **c)),
           Frequencies, fits=_frequency_fits),
    Method("bitfit", "BitFit: biases only", _train_biases, trains_heads=False),
    Method("adapter", "Houlsby bottleneck adapters after each layer",
           _wrapper(lambda layer, o: BottleneckAdapter(layer, o["bottleneck"])), Bottleneck,
           fits=_bottleneck_fits, width_options=("bottleneck",)),
    Method("prefix", "learned input prefix (an additive shift) for each layer",
           _wrapper(lambda layer, o: PrefixLinear(layer))),
]:  # fmt: skip
    register(_method)


# ---------------------------------------------------------------------------- the entry point
def adapt(network: nn.Module, method_name: str, options: dict[str, Any] | None, heads: list[str]) -> Adaptation:
    """Apply ``method`` to ``network`` in place; only its parameters stay trainable.

    ``heads`` names the output layers (``["mean", "log_std"]`` for the SAC actor). Unknown
    options and a rank that does not fit a layer are ``ConfigError``s.
    """
    entry = method(method_name)
    resolved = resolve_options(method_name, options)
    base_parameters = sum(p.numel() for p in network.parameters())
    names = torso_linears(network, heads)
    if entry.layers == "hidden":  # not the input layer of any torso (the critics have two torsos)
        names = [n for n in names if not n.endswith("body.0")]
    layers = [network.get_submodule(n) for n in names]
    _fits(entry, resolved, layers, names)
    network.requires_grad_(False)
    keep = entry.apply(network, resolved, names, layers)
    if entry.trains_heads:
        for head in heads:
            network.get_submodule(head).requires_grad_(True)
    return Adaptation(method_name, resolved, _count(network), base_parameters, keep)


def merged(network: nn.Module) -> nn.Module:
    """A copy of ``network`` with every ``peft``-library adapter folded into its base layer.

    The served model is then plain torch layers: ``mlflow.pyfunc.load_model`` needs neither
    frugalrl nor ``peft``. Outputs match the adapted network to float rounding. frugalrl's own
    wrappers (``adapter``, ``prefix``) are not linear and stay; they are pickled by value.
    """
    import copy

    out = copy.deepcopy(network)
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:  # no peft: no peft layers either
        return out
    for name, module in list(out.named_modules()):
        if isinstance(module, BaseTunerLayer):
            module.merge()
            _set_module(out, name, module.get_base_layer())
    for module in out.modules():  # the tuner leaves its config on the model it injected into
        module.__dict__.pop("peft_config", None)
    return out


def trainable_state(network: nn.Module) -> dict[str, torch.Tensor]:
    """The trainable tensors by state-dict name: what an adapter file holds."""
    trainable = {name for name, p in network.named_parameters() if p.requires_grad}
    return {name: t.detach().clone() for name, t in network.state_dict().items() if name in trainable}
