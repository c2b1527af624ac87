"""The GPU path of gradient fusion, with NCCL: run where a GPU is; says plainly when it did not run.

    python scripts/gpu_check.py

One process per visible GPU (at most 2; one GPU gives a world of 1, which still sends every
tensor through NCCL). Each rank fuses the same CUDA gradients with dense all-reduce and with
top-k at k = 1 (every value sent), as the CPU test does on gloo, and checks that both give the
mean gradient. Exit 0 when it ran and passed, 1 when it failed, 3 when there is no GPU to run on.
"""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _rank(rank: int, world: int, port: int, failures: dict) -> None:
    from frugalrl.config import DistributedConfig
    from frugalrl.fusion import make_reducer
    from frugalrl.fusion.sync import collective_device

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    try:
        assert collective_device() == torch.device("cuda", rank), collective_device()
        shapes = [(64, 32), (32,), (300,)]

        def draw(seed: int) -> list[torch.Tensor]:
            generator = torch.Generator().manual_seed(seed)
            return [torch.randn(shape, generator=generator) for shape in shapes]

        expected = [torch.stack(parts).mean(0) for parts in zip(*(draw(r) for r in range(world)), strict=True)]
        for mode in ("dense", "topk"):
            params = [torch.nn.Parameter(torch.zeros(shape, device="cuda")) for shape in shapes]
            for p, g in zip(params, draw(rank), strict=True):
                p.grad = g.cuda()
            share = {"share": 1.0} if mode == "topk" else {}
            config = DistributedConfig(kind=mode, settings=share, beta=0.0, value_dtype="float32")
            make_reducer(config, world).synchronize(params)  # the path training takes
            for p, e in zip(params, expected, strict=True):
                assert p.grad.is_cuda, mode
                torch.testing.assert_close(p.grad.cpu(), e, rtol=1e-5, atol=1e-5)
    except Exception as exc:  # reported by the parent
        failures[rank] = f"{type(exc).__name__}: {exc}"
    finally:
        dist.destroy_process_group()


def main() -> int:
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print("gpu_check: no GPU visible: the NCCL path of gradient fusion did NOT run here")
        return 3
    world = min(2, torch.cuda.device_count())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    failures = mp.Manager().dict()
    mp.spawn(_rank, args=(world, port, failures), nprocs=world, join=True)
    if failures:
        print(f"gpu_check: FAILED on {world} GPU(s): {dict(failures)}")
        return 1
    print(f"gpu_check: passed on {world} GPU(s) ({torch.cuda.get_device_name(0)}): dense and top-k fusion over NCCL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
