"""Benchmarks for autoreg: ``python -m benchmarks`` (``--quick`` for a smoke run; ``--plan gpu``).

``zoo``: the models, each written once; ``timing``: interleaved timing on ``torch.utils.benchmark``;
``forward`` and ``micro``: the two parts; ``report``: the machine and the result files;
``gpu_run.sh``: the GPU plan in one call on a machine with a GPU.
"""
