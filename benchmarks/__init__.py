"""Benchmarks for autoreg: ``python -m benchmarks`` (``--quick`` for a smoke run; ``--plan gpu``).

- ``zoo``: ten small models and a transformer layer (4096 wide, and 64 wide for CPU rehearsals),
  each written three ways: (a) nn.Module with bare tensor attributes, (b) nn.Module with
  hand-registered buffers, (c) autoreg.Module with bare tensor attributes.
- ``move``: ``.to()`` each one, count the tensors that stayed behind (``walk``), run forward.
- ``speed``: forward time of (c) against (b), eager and compiled (CUDA graphs included),
  interleaved rounds, with compile and CUDA-graph counters per variant.
- ``micro``: the assignment paths and module-wide operations, against plain nn.Module, each with
  an A/A control and issue 11's targets.
- ``report``: the stdout table, and the JSON, markdown and PNG files under ``results/``.
- ``gpu_run.sh``: the GPU plan in one call on a machine with a GPU.
"""
