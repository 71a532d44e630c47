"""Lightning: an autoreg LightningModule trains, checkpoints and reloads as its twin does.

The rule (docs/contract.md, row 4): what code of a base class that does not use autoreg assigns -
here LightningModule and its mixins: the hyperparameters, the optimizer list, the requires-grad
record, and ``_example_input_array`` through the property setter - keeps nn.Module's behaviour,
exactly as on the twin; what the LightningModule subclass's own code assigns follows autoreg's
contract (its tensors move). On main the hyperparameters were carried: ``precision="64-true"``
converted the class weights to float64, the checkpoint stored them so, and the reloaded float32
model failed in ``cross_entropy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

import autoreg

from ._support import carried

pytestmark = [
    # Lightning's own use of torch.utils._pytree, deprecated in torch 2.13.
    pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated"),
]

CLASS_WEIGHTS = (1.0, 2.0, 3.0)
LIGHTNING_INTERNALS = ("_hparams", "_hparams_initial", "_fabric_optimizers")


class AutoClassifier(autoreg.AutoRegisterMixin, pl.LightningModule):
    def __init__(self, class_weights: torch.Tensor, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()  # a tensor hyperparameter: Lightning's, not autoreg's
        self.lin = nn.Linear(4, 3)
        self.prior = torch.linspace(0.0, 1.0, 3)  # the subclass's own tensor: a buffer
        self.example_input_array = torch.zeros(2, 4)  # Lightning's property setter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.prior

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        self.last_batch = x.detach()  # runtime state: carried on autoreg, plain on the twin
        logits = self(x)
        return functional.cross_entropy(
            logits, y, weight=self.hparams["class_weights"].to(logits.dtype)
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


class TwinClassifier(pl.LightningModule):
    forward = AutoClassifier.forward
    training_step = AutoClassifier.training_step
    configure_optimizers = AutoClassifier.configure_optimizers

    def __init__(self, class_weights: torch.Tensor, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("prior", torch.linspace(0.0, 1.0, 3), persistent=False)
        self.example_input_array = torch.zeros(2, 4)


CLASSES = pytest.mark.parametrize("cls", [AutoClassifier, TwinClassifier], ids=["autoreg", "twin"])


def _data() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 4, generator=generator), torch.randint(0, 3, (8,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=4)


def _trainer(root: Path, precision: str) -> pl.Trainer:
    return pl.Trainer(
        max_steps=2,
        precision=precision,  # type: ignore[arg-type]
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
    )


def test_lightnings_own_attributes_keep_nn_modules_behaviour() -> None:
    auto = AutoClassifier(torch.tensor(CLASS_WEIGHTS))
    twin = TwinClassifier(torch.tensor(CLASS_WEIGHTS))

    assert [name for name, _ in auto.named_buffers()] == ["prior"]  # main: + _example_input_array
    assert [name for name, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert auto.state_dict().keys() == twin.state_dict().keys()
    for name in (*LIGHTNING_INTERNALS, "_param_requires_grad_state", "_example_input_array"):
        assert not carried(auto, name), name  # main: all but the last carried
    auto.double()
    twin.double()
    for model in (auto, twin):
        assert model.hparams["class_weights"].dtype == torch.float32  # main: float64 on autoreg
        assert model.hparams_initial["class_weights"].dtype == torch.float32
        assert model.example_input_array.dtype == torch.float32
        assert model.prior.dtype == torch.float64


@CLASSES
@pytest.mark.parametrize("precision", ["64-true", "bf16-mixed"])
def test_fit_checkpoint_and_reload_keep_the_hyperparameters(
    cls: type[pl.LightningModule], precision: str, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = cls(torch.tensor(CLASS_WEIGHTS))
    trainer = _trainer(tmp_path, precision)

    trainer.fit(model, _data())
    trainer.save_checkpoint(tmp_path / "last.ckpt")

    dtype = torch.float64 if precision == "64-true" else torch.float32
    assert model.dtype == dtype
    assert model.device == torch.device("cpu")
    assert model.prior.dtype == dtype  # the subclass's own buffer follows the model
    assert model.hparams["class_weights"].dtype == torch.float32  # main: float64 on autoreg
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["hyper_parameters"]["class_weights"].dtype == torch.float32
    assert "prior" not in checkpoint["state_dict"]

    loaded = cls.load_from_checkpoint(tmp_path / "last.ckpt")
    x, y = next(iter(_data()))
    loss = functional.cross_entropy(
        loaded(x), y, weight=loaded.hparams["class_weights"]
    )  # main: raises
    assert loss.dtype == torch.float32
    for name, parameter in loaded.named_parameters():
        torch.testing.assert_close(parameter, model.get_parameter(name).float(), msg=name)


@CLASSES
def test_the_subclasss_own_tensors_move_and_lightning_tracks_the_dtype(
    cls: type[pl.LightningModule], tmp_path: Path
) -> None:
    model = cls(torch.tensor(CLASS_WEIGHTS))
    _trainer(tmp_path, "32-true").fit(model, _data())

    model.to(torch.bfloat16)

    assert model.dtype == torch.bfloat16
    assert model.device == torch.device("cpu")
    assert model.prior.dtype == torch.bfloat16
    assert model.hparams["class_weights"].dtype == torch.float32
    # The runtime tensor from training_step: carried by autoreg; the twin leaves it behind.
    expected = torch.bfloat16 if cls is AutoClassifier else torch.float32
    assert model.last_batch.dtype == expected


class HoldsWeights(autoreg.AutoRegisterMixin, pl.LightningModule):
    def __init__(self, class_weights: torch.Tensor) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning's code keeps the tensor in _hparams (row 4)
        self.linear = nn.Linear(2, 3)


def test_a_tensor_lightning_keeps_in_the_hyperparameters_is_told_to_be_the_models_own() -> None:
    """Lightning's dicts are its own (row 4): autoreg never carries them, and the fix says so.
    Before: "autoreg.BufferDict(...): buffers that move", which Lightning's dict cannot be."""
    findings = autoreg.find_unregistered(HoldsWeights(torch.ones(3)))
    assert {f.path for f in findings} == {
        "_hparams['class_weights']",
        "_hparams_initial['class_weights']",
    }
    assert all(
        f.fix
        == (
            "kept by the code of a base class without autoreg (nn.Module's rules, row 4): convert "
            "it where it is used, or assign it from HoldsWeights's own code"
        )
        for f in findings
    )


def _hparams_of(base: type) -> dict[str, Any]:
    """The hyperparameters ``save_hyperparameters()`` in ``base.__init__`` collects for a subclass
    with arguments of its own, as a project's base class for several architectures has."""

    class Base(base):  # type: ignore[misc, valid-type]
        def __init__(self, lr: float = 0.1, **kwargs: Any) -> None:
            super().__init__()
            self.save_hyperparameters()

    class Sub(Base):
        def __init__(self, temperature: float = 1.0, lr: float = 0.1) -> None:
            super().__init__(lr=lr)
            self.temperature = temperature

    return dict(Sub(temperature=0.07, lr=0.5).hparams)


def test_save_hyperparameters_in_a_base_collects_the_subclass_arguments_as_on_the_twin() -> None:
    """Lightning walks the frames of the ``__init__``s on the stack while each holds
    ``__class__``; autoreg's construction wrapper sat between the base's and the subclass's and
    held none: the subclass's arguments were silently missing from ``hparams``, and
    ``load_from_checkpoint`` rebuilt the model with their defaults."""
    mixin = type("MixinBase", (autoreg.AutoRegisterMixin, pl.LightningModule), {})
    expected = {"lr": 0.5, "temperature": 0.07}
    assert _hparams_of(mixin) == _hparams_of(pl.LightningModule) == expected


def _rebound_hparams(base: type) -> dict[str, Any]:
    class Model(base):  # type: ignore[misc, valid-type]
        def __init__(self, lr: float | None = None, layers: str = "4,4", **kwargs: Any) -> None:
            super().__init__()
            lr = 1e-3 if lr is None else lr * 8  # a default filled in, a value scaled
            sizes = [int(size) for size in layers.split(",")]
            layers = sizes  # type: ignore[assignment]  # a string parsed
            self.debug = kwargs.pop("debug", False)  # an option, not a hyperparameter
            self.save_hyperparameters()

    return dict(Model(lr=0.5, layers="8,8", debug=True).hparams)


def test_save_hyperparameters_reads_the_arguments_as_init_rebound_them_as_on_the_twin() -> None:
    """Lightning keeps the outermost ``__init__`` frame's values. Before: autoreg's wrapper
    frame, outside the model's ``__init__``, offered the keyword arguments as the caller passed
    them (its signature took ``**kwargs``): ``hparams`` got ``lr=0.5``, ``layers="8,8"`` and the
    popped ``debug``, and the optimizer trained at another learning rate."""
    mixin = type("MixinBase", (autoreg.AutoRegisterMixin, pl.LightningModule), {})
    expected = {"lr": 4.0, "layers": [8, 8]}
    assert _rebound_hparams(mixin) == _rebound_hparams(pl.LightningModule) == expected


def _hparams_past_a_base_without_super(base: type) -> dict[str, Any]:
    class Base(base):  # type: ignore[misc, valid-type]
        def __init__(self, dim: int, act: str = "relu") -> None:
            pl.LightningModule.__init__(self)  # no super(): this frame holds no __class__
            self.save_hyperparameters()

    class Sub(Base):
        def __init__(self, width: int = 4) -> None:
            super().__init__(dim=width * 2, act="gelu")

    return dict(Sub(width=3).hparams)


def test_save_hyperparameters_past_a_base_without_super_reads_the_subclass_as_on_the_twin() -> None:
    """Lightning skips a base's frame that holds no ``__class__`` and reads the subclass's.
    Before: autoreg's wrapper frame between them offered the keyword arguments the subclass
    passed to the base (``dim``, ``act``), and ``load_from_checkpoint`` raised on them."""
    mixin = type("MixinBase", (autoreg.AutoRegisterMixin, pl.LightningModule), {})
    expected = {"width": 3}
    assert _hparams_past_a_base_without_super(mixin) == expected
    assert _hparams_past_a_base_without_super(pl.LightningModule) == expected


class _OnItsDevice(pl.LightningModule):
    """Makes a tensor on ``self.device``, as Lightning's docs recommend."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.ones(x.shape[-1], device=self.device, dtype=self.dtype)
        return self.head(x * scale)


def test_a_tensor_made_on_a_lightning_modules_device_is_no_forward_finding() -> None:
    """Lightning's own ``to()`` keeps ``self.device`` (``_device``) up to date. Before: "the
    device the model was built on, which .to() does not change". Under a plain parent, whose
    ``.to()`` never calls the child's, it stays where it was: a finding."""
    assert autoreg.audit_forward(_OnItsDevice(), torch.ones(2, 4)) == []
    wrapped = nn.Sequential(_OnItsDevice())
    findings = autoreg.audit_forward(wrapped, torch.ones(2, 4))
    assert [f.kind for f in findings] == ["device", "dtype"]  # self.dtype stays float32 too
    assert all(
        "_OnItsDevice._device is the device the model was built on" in f.fix for f in findings
    )
