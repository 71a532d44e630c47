"""Benchmarks for autoreg: ``python -m benchmarks`` (``--quick`` for a smoke run).

- ``zoo``: nine models, each written three ways: (a) nn.Module with bare tensor attributes, (b)
  nn.Module with hand-registered buffers, (c) autoreg.Module with bare tensor attributes.
- ``move``: ``.to()`` each one, count the tensors that stayed behind (``walk``), run forward.
- ``speed``: forward time of (c) against (b), eager and compiled, interleaved rounds.
- ``micro``: the assignment paths and module-wide operations, against plain nn.Module.
- ``report``: the stdout table, and the JSON, markdown and PNG files under ``results/``.
"""
