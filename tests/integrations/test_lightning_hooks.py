"""Lightning: ``configure_model()`` builds like ``__init__``, and a compiled ``training_step``
compiles as often as the twin's.

Lightning asks users to build layers in ``configure_model()``, which it calls after ``__init__``
and before fitting: autoreg counts it as construction (row 10), so what it assigns is a buffer,
saved with ``persistent=True`` as the twin's ``register_buffer`` saves it (it was carried runtime
state, missing from the checkpoint). A compiled ``training_step`` that stores runtime state once
recompiled on every tensor stored under a new name afterwards (3 graphs against the twin's 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

import autoreg

pytestmark = [
    # Lightning's own use of torch.utils._pytree, deprecated in torch 2.13.
    pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated"),
]


class AutoBuilt(autoreg.AutoRegisterMixin, pl.LightningModule, persistent=True):
    def configure_model(self) -> None:
        if hasattr(self, "lin"):
            return  # Lightning may call it more than once
        self.lin = nn.Linear(4, 3)
        self.prior = torch.linspace(0.0, 1.0, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.prior

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        self.last_batch = x.detach()  # runtime state, stored at every step
        return functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class TwinBuilt(pl.LightningModule):
    forward = AutoBuilt.forward
    training_step = AutoBuilt.training_step
    configure_optimizers = AutoBuilt.configure_optimizers

    def configure_model(self) -> None:
        if hasattr(self, "lin"):
            return
        self.lin = nn.Linear(4, 3)
        self.register_buffer("prior", torch.linspace(0.0, 1.0, 3))


def _data() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 4, generator=generator), torch.randint(0, 3, (8,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=4)


@pytest.mark.parametrize("cls", [AutoBuilt, TwinBuilt], ids=["autoreg", "twin"])
def test_what_configure_model_builds_is_saved_as_the_twins_register_buffer(
    cls: type[pl.LightningModule], tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = cls()
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, _data())
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert list(checkpoint["state_dict"]) == ["prior", "lin.weight", "lin.bias"]
    assert [name for name, _ in model.named_buffers()] == ["prior"]


@pytest.mark.parametrize("cls", [AutoBuilt, TwinBuilt], ids=["autoreg", "twin"])
def test_a_compiled_training_step_compiles_once(cls: type[pl.LightningModule]) -> None:
    torch._dynamo.reset()
    model = cls()
    model.configure_model()
    counter = CompileCounterWithBackend("eager")
    step = torch.compile(model.training_step, backend=counter)
    batches = list(_data())
    for index, batch in enumerate(batches * 2):
        step(batch, index)
        setattr(model, f"seen_{index}", batch[0])  # stored eagerly, between compiled steps
    torch._dynamo.reset()
    assert counter.frame_count == 1
