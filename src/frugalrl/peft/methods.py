"""Thirteen ways to fine-tune a policy network, behind one registry.

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

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from frugalrl.errors import ConfigError


@dataclass(frozen=True)
class Method:
    """A registry entry: its defaults, which torso layers it adapts, and whether it trains the heads."""

    name: str
    description: str
    defaults: dict[str, Any] = field(default_factory=dict)
    layers: str = "all"  # all torso linears, or "hidden" (not a torso's input layer)
    trains_heads: bool = True


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("full", "full fine-tuning (every parameter)", trains_heads=True),
        Method("head_only", "output heads only (linear probe)"),
        Method("lora", "LoRA: low-rank update W + BA", {"rank": 8, "alpha": 16}),
        Method("dora", "DoRA: LoRA on the direction, a learned magnitude", {"rank": 8, "alpha": 16}),
        Method("loha", "LoHa: Hadamard product of two low-rank updates", {"rank": 8, "alpha": 16}),
        Method("lokr", "LoKr: Kronecker-factored update", {"rank": 8, "alpha": 16}),
        Method("ia3", "IA3: learned scaling of each layer's inputs"),
        Method("oft", "OFT: block-diagonal orthogonal rotation of the weights", {"block_size": 16}, layers="hidden"),
        Method("vera", "VeRA: shared frozen random low-rank pair, learned scalings", {"rank": 64}),
        Method("fourierft", "FourierFT: learned spectral coefficients of the update", {"n_frequency": 256}),
        Method("bitfit", "BitFit: biases only", trains_heads=False),
        Method("adapter", "Houlsby bottleneck adapters after each layer", {"bottleneck": 16}),
        Method("prefix", "learned input prefix (an additive shift) for each layer"),
    ]
}


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


def _fits(spec_method: str, options: dict[str, Any], layers: list[nn.Linear], names: list[str]) -> None:
    """A rank, block size or frequency count that does not fit a targeted layer is a config error."""
    for name, layer in zip(names, layers, strict=True):
        smallest = min(layer.in_features, layer.out_features)
        problem = None
        if spec_method == "vera":  # its shared random pair may be wider than a layer: only r >= 1 matters
            smallest = max(int(options["rank"]), 1)
        if "rank" in options and not 1 <= int(options["rank"]) <= smallest:
            problem = f"rank {options['rank']} must be between 1 and {smallest}"
        if "block_size" in options and (
            int(options["block_size"]) < 1 or layer.in_features % int(options["block_size"])
        ):
            problem = f"block_size {options['block_size']} must divide its {layer.in_features} inputs"
        if "n_frequency" in options and not 1 <= int(options["n_frequency"]) <= layer.in_features * layer.out_features:
            problem = (
                f"n_frequency {options['n_frequency']} must be between 1 and {layer.in_features * layer.out_features}"
            )
        if "bottleneck" in options and not 1 <= int(options["bottleneck"]) <= layer.out_features:
            problem = f"bottleneck {options['bottleneck']} must be between 1 and {layer.out_features}"
        if problem:
            raise ConfigError(
                f"PEFT method {spec_method}: layer {name} ({layer.in_features}->{layer.out_features}): {problem}; "
                f"change peft.methods.{spec_method}"
            )


def _peft_config(method: str, options: dict[str, Any], targets: list[str], heads: list[str]) -> Any:
    import peft

    common = {"target_modules": targets, "modules_to_save": heads or None}
    if method in ("lora", "dora"):
        return peft.LoraConfig(
            r=options["rank"], lora_alpha=options["alpha"], lora_dropout=0.0, use_dora=method == "dora", **common
        )
    if method == "loha":
        return peft.LoHaConfig(r=options["rank"], alpha=options["alpha"], **common)
    if method == "lokr":
        return peft.LoKrConfig(r=options["rank"], alpha=options["alpha"], **common)
    if method == "ia3":
        return peft.IA3Config(feedforward_modules=targets, **common)
    if method == "oft":
        return peft.OFTConfig(r=0, oft_block_size=options["block_size"], **common)
    if method == "vera":
        return peft.VeraConfig(r=options["rank"], **common)
    if method == "fourierft":
        return peft.FourierFTConfig(n_frequency=options["n_frequency"], **common)
    raise AssertionError(method)


# ---------------------------------------------------------------------------- the entry point
def adapt(network: nn.Module, method: str, options: dict[str, Any] | None, heads: list[str]) -> Adaptation:
    """Apply ``method`` to ``network`` in place; only its parameters stay trainable.

    ``heads`` names the output layers (``["mean", "log_std"]`` for the SAC actor). Unknown
    options and a rank that does not fit a layer are ``ConfigError``s.
    """
    if method not in METHODS:
        raise ConfigError(f"unknown PEFT method {method!r}; allowed: {sorted(METHODS)}")
    entry = METHODS[method]
    unknown = sorted(set(options or {}) - set(entry.defaults))
    if unknown:
        allowed = sorted(entry.defaults) or "none"
        raise ConfigError(f"PEFT method {method}: unknown option(s) {unknown}; allowed: {allowed}")
    resolved = {**entry.defaults, **(options or {})}
    base_parameters = sum(p.numel() for p in network.parameters())
    names = torso_linears(network, heads)
    if entry.layers == "hidden":  # not the input layer of any torso (the critics have two torsos)
        names = [n for n in names if not n.endswith("body.0")]
    layers = [network.get_submodule(n) for n in names]
    _fits(method, resolved, layers, names)
    keep: list[Any] = []
    if method == "full":
        network.requires_grad_(True)
    else:
        network.requires_grad_(False)
        heads_trainable = entry.trains_heads
        if method == "head_only":
            pass
        elif method == "bitfit":
            for name, param in network.named_parameters():
                param.requires_grad_(name.endswith("bias"))
        elif method in ("adapter", "prefix"):
            for name, layer in zip(names, layers, strict=True):
                wrapped = (
                    BottleneckAdapter(layer, resolved["bottleneck"]) if method == "adapter" else PrefixLinear(layer)
                )
                _set_module(network, name, wrapped)
            for module in network.modules():
                if isinstance(module, BottleneckAdapter):
                    module.down.requires_grad_(True)
                    module.up.requires_grad_(True)
                elif isinstance(module, PrefixLinear):
                    module.prefix.requires_grad_(True)
        else:
            from peft.mapping import PEFT_TYPE_TO_TUNER_MAPPING

            config = _peft_config(method, resolved, names, [])
            try:
                keep.append(PEFT_TYPE_TO_TUNER_MAPPING[config.peft_type](network, config, "default"))
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"PEFT method {method} {resolved}: {exc}; change peft.methods.{method}") from None
        if heads_trainable:
            for head in heads:
                network.get_submodule(head).requires_grad_(True)
    return Adaptation(method, resolved, _count(network), base_parameters, keep)


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
