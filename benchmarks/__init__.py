"""Benchmarks for autoreg: ``python -m benchmarks`` (``--quick`` for a smoke run; ``--plan gpu``).

- ``zoo``: ten small models and a transformer layer, each written once and built three ways.
- ``timing``: interleaved timing on ``torch.utils.benchmark``, and a row of results.
- ``forward``: forward time of autoreg against hand-registered, eager and compiled, with the
  dynamo and CUDA-graph counters per side.
- ``micro``: construction, assignment and ``.to()``, each with an A/A control and its target.
- ``report``: the machine, the stdout tables, and the JSON, markdown and PNG files.
- ``gpu_run.sh``: the GPU plan in one call on a machine with a GPU.
"""
