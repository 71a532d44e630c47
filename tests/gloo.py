"""Two gloo processes on 127.0.0.1, for the tests of DDP, FSDP2 and torchmetrics' sync.

A worker reports by writing ``rank<N>.json`` in the test's directory inside the process group;
leaving the group waits (a barrier) until every rank has reported, and the tests judge the
reports, never the exit status. gloo's teardown can abort a process after that ("terminate called
without an active exception", when one rank closes its sockets while the other is still
destroying its group): that says nothing about autoreg, and is not a failure here. A rank that
never reported fails its test by name.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=20)


@contextmanager
def process_group(rank: int, port: int) -> Iterator[None]:
    """In a worker: join the 2-process gloo group on the loopback; on the way out, wait for every
    rank (when the block ended normally, so every rank has reported) and leave the group."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=COLLECTIVE_TIMEOUT,
    )
    try:
        yield
        dist.barrier()
    finally:
        dist.destroy_process_group()


def report(directory: str | Path, rank: int, result: dict[str, Any]) -> None:
    """In a worker: write what this rank found, for :func:`run` to read back."""
    Path(directory, f"rank{rank}.json").write_text(json.dumps(result))


def run(
    worker: Callable[..., None], directory: Path, deadline: float
) -> dict[int, dict[str, Any] | None]:
    """Run ``worker(rank, port, str(directory))`` on every rank, for at most ``deadline`` seconds;
    per rank, its last report, or None where it never wrote one (it crashed or ran out of time)."""
    context = mp.start_processes(
        worker, args=(_free_port(), str(directory)), nprocs=WORLD, join=False, start_method="spawn"
    )
    try:
        while not context.join(timeout=1.0):
            deadline -= 1.0
            if deadline <= 0:
                break
    except (mp.ProcessRaisedException, mp.ProcessExitedException):
        pass  # the reports say how far each rank got (see the module docstring)
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    reports = {rank: directory / f"rank{rank}.json" for rank in range(WORLD)}
    return {rank: json.loads(p.read_text()) if p.exists() else None for rank, p in reports.items()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
