"""Checks for library authors' test suites: ``assert_no_strays(model, *args, **kwargs)``.

One assertion covers both halves of "which data needs ``.to(device)``?": the tensors a model
stores where ``.to()`` does not reach them (``autoreg.find_unregistered``) and the tensors its
forward pass makes on the default device or dtype (``autoreg.audit_forward``):

```python
from autoreg.testing import assert_no_strays

def test_the_model_moves_with_everything_it_uses():
    assert_no_strays(MyModel(), torch.ones(2, 16))
```
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._audit import find_unregistered
from ._forward_audit import (
    LOW_PRECISION,
    ModeChoice,
    Step,
    audit_forward,
    audited_modes,
    what_runs,
)
from ._report import Forward, report_text

__all__ = ["assert_no_strays"]


def assert_no_strays(
    model: nn.Module,
    /,
    *args: Any,
    step: Step | None = None,
    mode: ModeChoice | None = None,
    backward: bool = False,
    low_precision: torch.dtype | None = LOW_PRECISION,
    **kwargs: Any,
) -> None:
    """Raise ``AssertionError`` with the audit's report if anything would stay behind when
    ``model`` moves: a tensor it holds that ``.to()`` leaves (``find_unregistered``), or one
    that ``model(*args, **kwargs)`` - or ``step(model, *args, **kwargs)``, a loss or a training
    step - makes on the default device or dtype, or stores where ``.to()`` leaves it
    (``audit_forward``, which takes ``mode``, ``backward`` and ``low_precision``). The report is
    the command line's.
    """
    findings = find_unregistered(model)
    found = audit_forward(
        model,
        *args,
        step=step,
        mode=mode,
        backward=backward,
        low_precision=low_precision,
        **kwargs,
    )
    if findings or found:
        modes, what = audited_modes(model, mode), what_runs(model, step)
        forward = Forward(found, modes, what, low_precision=low_precision)
        raise AssertionError(report_text(model, findings, forward))
