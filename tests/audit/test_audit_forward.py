"""``autoreg.audit_forward``: the tensors a forward pass makes where ``.to()`` cannot reach them.

Judged by CUDA's rules on the meta device, without a GPU: a CPU tensor with a dimension next to the
model's device is a ``"device"`` finding (0-dim CPU tensors are scalars to CUDA's element-wise
kernels); in a second pass in bfloat16, a tensor made in forward in another dtype that promotes
or breaks an operation is a ``"dtype"`` finding. One finding per line that made the stray, however
often it is used.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import random
import re
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import autoreg
from autoreg import ForwardAuditError
from autoreg._walk import iter_tensors
from autoreg.testing import assert_no_strays
from benchmarks import zoo
from examples import net as net_example
from tests.audit import forward_zoo
from tests.audit.forward_zoo import DIM, PATTERNS

ZOO_FILE = inspect.getsourcefile(forward_zoo)
MARKER = re.compile(r"# stray: ([\w, ]+)$")


def found(findings: list[autoreg.ForwardFinding]) -> set[tuple[str, int, str]]:
    return {(Path(f.filename).name, f.lineno, f.kind) for f in findings}


def marked(cls: type) -> set[tuple[str, int, str]]:
    """The (file, line, kind) the ``# stray:`` markers in ``cls``'s source (or its helpers) name."""
    lines, start = inspect.getsourcelines(cls)
    if cls is forward_zoo.Closure:  # the stray is in the closure the class stores
        lines, start = inspect.getsourcelines(forward_zoo.shifted_relu)
    expected = set()
    for offset, line in enumerate(lines):
        match = MARKER.search(line.rstrip())
        if match:
            for kind in match.group(1).split(","):
                expected.add((Path(ZOO_FILE or "").name, start + offset, kind.strip()))
    return expected


def line_of(module: Any, text: str) -> int:
    """The number of the first line of ``module``'s source that contains ``text``."""
    lines = inspect.getsource(module).splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


# --- the motivating Net -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("branch", "text", "op"),
    [(0, "x = torch.rand(2, 3)", "add"), (1, "y = torch.rand(3, 2)", "mm")],
    ids=["rand-plus-parameter", "parameter-matmul-rand"],
)
def test_net_branches_0_and_1_point_at_their_torch_rand_lines(
    branch: int, text: str, op: str
) -> None:
    findings = autoreg.audit_forward(net_example.Net(), branch)
    line = line_of(net_example, text)
    assert found(findings) == {("net.py", line, "device"), ("net.py", line, "dtype")}
    device, dtype = findings
    assert (device.source, device.op, device.op_lineno) == (text, op, line + 1)
    assert device.tensor == f"float32[{text[-5]}, {text[-2]}] cpu"
    assert not device.entered
    assert device.fix.startswith("device=self.w")  # one fix for the site, both kinds
    assert dtype.fix == device.fix


@pytest.mark.parametrize("branch", [2, 3], ids=["rand-to-w1-plus", "matmul-rand-to-w1"])
def test_net_branches_2_and_3_are_clean(branch: int) -> None:
    assert autoreg.audit_forward(net_example.Net(), branch) == []


def test_the_matmul_branch_is_found_by_cudas_rules_not_by_meta() -> None:
    """meta @ cpu succeeds where cuda @ cpu raises: running on meta alone would miss branch 1."""
    assert (torch.ones(2, 3, device="meta") @ torch.ones(3, 2)).device.type == "meta"
    findings = autoreg.audit_forward(net_example.Net(), 1, low_precision=None)
    assert [(f.kind, f.op) for f in findings] == [("device", "mm")]


def test_each_finding_reads_as_a_line_and_a_fix() -> None:
    device = autoreg.audit_forward(net_example.Net(), 0, low_precision=None)[0]
    line = line_of(net_example, "x = torch.rand(2, 3)")
    assert str(device) == (
        f"{device.where}: device stray float32[2, 3] cpu, first mixed in by add (line {line + 1})"
        ": x = torch.rand(2, 3)\n"
        "    fix: device=self.w1.device (or torch.rand_like(self.w1) for self.w1's shape)"
    )
    assert (device.dtype, device.shape, device.device) == ("float32", (2, 3), "cpu")
    assert device.reason == "add meets it next to the model's tensors"
    assert device.where.endswith(f"net.py:{line}")
    assert device.as_dict()["lineno"] == line
    assert device.as_dict().keys() == {
        "kind",
        "filename",
        "lineno",
        "source",
        "op",
        "op_filename",
        "op_lineno",
        "tensor",
        "entered",
        "fix",
        "attribute",
        "class_name",
        "module_path",
        "mode",
        "dtype",
        "shape",
        "device",
        "reason",
        "stored",
        "modes",
    }
    assert (device.attribute, device.class_name, device.module_path) == ("", "Net", "")
    assert (device.mode, device.modes) == ("train", ("train",))


# --- the zoo of real patterns ---------------------------------------------------------------------

PATTERN_IDS = [name for name, *_ in PATTERNS]


@pytest.mark.parametrize(("name", "stray", "fixed", "inputs"), PATTERNS, ids=PATTERN_IDS)
def test_each_pattern_is_found_at_its_line_and_its_fix_is_clean(
    name: str,
    stray: type[nn.Module],
    fixed: type[nn.Module],
    inputs: Callable[[], tuple[torch.Tensor]],
) -> None:
    findings = autoreg.audit_forward(stray(), *inputs())
    assert found(findings) == marked(stray)
    assert autoreg.audit_forward(fixed(), *inputs()) == []


@pytest.mark.parametrize(
    ("stray", "entered", "fix"),
    [
        (forward_zoo.Positions, False, "device=ids.device"),  # the local of that code
        (forward_zoo.Window, False, "device=x.device"),  # torch.from_numpy in forward makes it
        (forward_zoo.Configured, True, "config.scale is"),
        (forward_zoo.Global, True, "made before forward"),
        (forward_zoo.Closure, True, "made before forward"),
        (forward_zoo.PlainAttribute, True, "offset is a plain attribute .to() leaves behind"),
    ],
    ids=["made-in-forward", "numpy", "config", "global", "closure", "plain-attribute"],
)
def test_a_tensor_made_before_forward_is_reported_where_it_entered(
    stray: type[nn.Module], entered: bool, fix: str
) -> None:
    inputs = forward_zoo.tokens() if stray is forward_zoo.Positions else forward_zoo.activations()
    device = autoreg.audit_forward(stray(), *inputs, low_precision=None)[0]
    assert device.entered is entered
    assert device.fix.startswith(fix)


def test_one_finding_per_line_however_many_operations_use_the_stray() -> None:
    findings = autoreg.audit_forward(forward_zoo.Several(), *forward_zoo.activations())
    assert len(findings) == 4  # two lines, two kinds
    assert [f.op for f in findings] == ["mul", "add", "mul", "add"]  # the first use of each


def test_what_cuda_takes_from_the_cpu_is_not_a_finding() -> None:
    """0-dim scalars, index tensors, copies from the CPU, CPU work that never meets the device."""
    assert autoreg.audit_forward(forward_zoo.NotStrays(), *forward_zoo.activations()) == []


def test_a_float32_constant_on_the_right_device_is_a_dtype_finding_only() -> None:
    findings = autoreg.audit_forward(forward_zoo.Constant(), *forward_zoo.activations())
    assert [(f.kind, f.tensor, f.device) for f in findings] == [("dtype", "float32[8]", "cpu")]
    assert findings[0].fix == "dtype=x.dtype (or .to(x))"
    assert findings[0].reason == "this float32 tensor turns mul on bfloat16 into float32"
    assert (
        autoreg.audit_forward(
            forward_zoo.Constant(), *forward_zoo.activations(), low_precision=None
        )
        == []
    )


def test_a_float64_numpy_array_in_a_float32_model_is_a_dtype_finding_without_bfloat16() -> None:
    class Hanning(forward_zoo._Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            window = torch.from_numpy(np.hanning(DIM))  # float64
            return self.linear(x) * window.to(x.device)

    findings = autoreg.audit_forward(Hanning(), *forward_zoo.activations(), low_precision=None)
    # Reported where the code moves it to the model's device: there it can take its dtype too.
    assert [(f.kind, f.tensor, f.lineno) for f in findings] == [
        (
            "dtype",
            "float64[8]",
            line_of(inspect.getmodule(Hanning), "return self.linear(x) * window.to(x.device)"),
        )
    ]
    assert findings[0].reason == "this float64 tensor turns mul on float32 into float64"
    assert findings[0].fix == ".to(x), which gives it the dtype of x too, not only its device"


def test_a_dtype_written_in_the_code_is_deliberate() -> None:
    class Accumulate(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            total = torch.zeros(x.shape[-1], device=x.device, dtype=torch.float32)
            steps = torch.arange(x.shape[-1], device=x.device).float()
            return (total + x.float() * steps).to(x.dtype)

    assert autoreg.audit_forward(Accumulate(), torch.ones(2, 4)) == []


# --- meta-built models, device contexts, backward, values read -----------------------------------


def test_a_model_built_on_meta_is_audited_and_factories_still_go_to_the_cpu() -> None:
    with torch.device("meta"):
        model = forward_zoo.Positions()
        findings = autoreg.audit_forward(model, *forward_zoo.tokens())
    assert found(findings) == marked(forward_zoo.Positions)
    assert next(model.parameters()).device.type == "meta"


class MovesItsAttribute(forward_zoo.PlainAttribute):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.offset.to(x)  # the legacy fix: it moves


def test_a_plain_attribute_of_a_meta_model_counts_as_left_on_the_cpu() -> None:
    """``to_empty(device="cuda")`` leaves it on meta: it never reaches the device, unless
    forward moves it. The audit puts it where a model built on the CPU would have it."""
    with torch.device("meta"):
        leaves, moves = forward_zoo.PlainAttribute(), MovesItsAttribute()
    findings = autoreg.audit_forward(leaves, *forward_zoo.activations())
    assert found(findings) == marked(forward_zoo.PlainAttribute)
    assert autoreg.audit_forward(moves, *forward_zoo.activations()) == []
    assert leaves.offset.device.type == "meta"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cls", "expected"),
    [(forward_zoo.Llama, False), (forward_zoo.LlamaStray, True)],
    ids=["clean", "stray-positions"],
)
def test_a_hand_written_llama_7b_built_on_meta_is_audited_without_memory(
    cls: type[nn.Module], expected: bool
) -> None:
    with torch.device("meta"):
        model = cls(forward_zoo.LlamaConfig())
    assert sum(p.numel() for p in model.parameters()) > 6.7e9
    findings = autoreg.audit_forward(model, torch.randint(0, 32000, (1, 128)))
    assert found(findings) == (marked(cls) if expected else set())


@pytest.mark.slow
def test_transformers_llama_7b_built_on_meta_is_audited_without_memory() -> None:
    transformers = pytest.importorskip("transformers", reason="pip install transformers")
    config = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        max_position_embeddings=4096,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) > 6.7e9
    assert autoreg.audit_forward(model, torch.randint(0, 32000, (1, 128))) == []


class _Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * torch.full(grad.shape, 2.0)  # a stray of the backward pass


class BackwardStray(forward_zoo._Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Doubled.apply(self.linear(x))


def test_backward_true_audits_the_backward_pass_too() -> None:
    inputs = forward_zoo.activations()
    assert autoreg.audit_forward(BackwardStray(), *inputs) == []
    findings = autoreg.audit_forward(BackwardStray(), *inputs, backward=True)
    line = line_of(inspect.getmodule(_Doubled), "return grad * torch.full(grad.shape, 2.0)")
    assert found(findings) == {
        ("test_audit_forward.py", line, "device"),
        ("test_audit_forward.py", line, "dtype"),
    }


def _weighted_product_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    y = model(x).sigmoid()
    parts = torch.stack([y[:, 0].mean(), y[:, 1].mean()])
    weights = torch.tensor([0.3, 0.7]).to(y.device)  # float32 in a bfloat16 model
    loss = 1 - torch.prod(parts**weights)
    loss.backward()
    return loss


def test_the_backward_of_a_stray_is_reported_at_the_stray_not_at_backward() -> None:
    """Before: prod's backward makes ones in its graph's dtype (float32, from the stray) and
    cats them: a second dtype row at the line of ``loss.backward()``, which writes no dtype."""
    model = nn.Linear(DIM, DIM)
    findings = autoreg.audit_forward(model, torch.ones(3, DIM), step=_weighted_product_step)
    line = line_of(inspect.getmodule(_Doubled), "weights = torch.tensor([0.3, 0.7]).to(y.device)")
    assert found(findings) == {("test_audit_forward.py", line, "dtype")}


def test_a_shape_that_depends_on_the_inputs_alone_is_computed_too() -> None:
    class Selects(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0] + torch.ones(3)

    x = torch.tensor([1.0, -1.0, 2.0, 3.0])
    findings = autoreg.audit_forward(Selects(), x, low_precision=None)
    assert [(f.kind, f.tensor) for f in findings] == [("device", "float32[3] cpu")]


def test_the_backward_pass_ends_at_a_stray_that_requires_grad() -> None:
    """Autograd wants the gradient of the cache on the CPU, where the audit no longer has it."""
    findings = autoreg.audit_forward(forward_zoo.Cache(), *forward_zoo.activations(), backward=True)
    assert found(findings) == marked(forward_zoo.Cache)


def test_values_read_in_forward_are_computed_from_the_inputs() -> None:
    """meta has no values: a value computed from the inputs alone is computed on the CPU."""

    class Lengths(forward_zoo._Linear):
        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            longest = int(lengths.max())
            steps = torch.arange(longest)
            return self.linear(x)[:, :longest] * steps[None, :, None]

    findings = autoreg.audit_forward(Lengths(), torch.ones(2, 5, 8), torch.tensor([3, 4]))
    assert [(f.kind, f.lineno, f.tensor) for f in findings] == [
        (
            "device",
            line_of(inspect.getmodule(Lengths), "steps = torch.arange(longest)"),
            "int64[1, 4, 1] cpu",
        )
    ]


class Packed(nn.Module):
    def __init__(self, initial_state: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(DIM, DIM, batch_first=True)
        self.initial_state = initial_state

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        state = None
        if self.initial_state:
            state = (torch.zeros(1, x.shape[0], DIM), torch.zeros(1, x.shape[0], DIM))
        out, _ = self.rnn(packed, state)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]


def test_packed_sequences_keep_their_lengths_on_the_cpu_as_cuda_wants() -> None:
    """pack_padded_sequence wants the lengths on the CPU, and the LSTM its batch sizes."""
    x, lengths = torch.randn(3, 6, DIM), torch.tensor([6, 4, 2])
    assert autoreg.audit_forward(Packed(), x, lengths, backward=True) == []
    findings = autoreg.audit_forward(Packed(initial_state=True), x, lengths)
    line = line_of(inspect.getmodule(Packed), "state = (torch.zeros(1, x.shape[0], DIM)")
    assert found(findings) == {
        ("test_audit_forward.py", line, "device"),
        ("test_audit_forward.py", line, "dtype"),
    }


# --- no false findings ----------------------------------------------------------------------------


def _catalogue() -> list[Any]:
    from torch.testing._internal.common_modules import module_db

    return [pytest.param(info, id=info.formatted_name) for info in module_db]


# ctc_loss has no bfloat16 kernel on CUDA: its dtype pass is skipped. (Its form that takes the
# lengths as tensors has no meta kernel: the audit runs it on the CPU, with its values.)
NO_BFLOAT16 = {"nn_CTCLoss"}


@pytest.mark.parametrize("info", _catalogue())
def test_no_finding_in_pytorchs_module_catalogue(info: Any) -> None:
    name = info.formatted_name
    audited = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own warnings while it builds inputs and modules
        inputs = info.module_inputs_func(
            info, device="cpu", dtype=torch.float32, requires_grad=False, training=True
        )
        for module_input in list(inputs)[:3]:
            if module_input.forward_input is None:
                continue
            args, kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
            constructor = module_input.constructor_input
            module = info.module_cls(*constructor.args, **constructor.kwargs)
            try:  # a few catalogue inputs make the original raise: nothing to audit
                copy.deepcopy(module)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            except Exception:  # noqa: BLE001
                continue
            low = None if name in NO_BFLOAT16 else torch.bfloat16
            assert autoreg.audit_forward(module, *args, low_precision=low, **kwargs) == []
            audited += 1
    if not audited:
        pytest.skip(f"every catalogue input of {name} makes the original module raise")


def _transformers_cases() -> list[Any]:
    names = ["llama", "gpt2", "bert", "t5", "vit"]
    return [pytest.param(name, id=name) for name in names]


def _tiny(name: str) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any]]:
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (pip install transformers)"
    )
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 8, dtype=torch.long)
    tokens = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    if name == "llama":
        config = transformers.LlamaConfig(
            vocab_size=100,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            **tokens,
        )
        return transformers.LlamaForCausalLM(config), (ids,), {"attention_mask": mask}
    if name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, **tokens
        )
        return transformers.GPT2LMHeadModel(config), (ids,), {"attention_mask": mask}
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=100,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            pad_token_id=0,
        )
        return transformers.BertForMaskedLM(config), (ids,), {"attention_mask": mask}
    if name == "t5":
        config = transformers.T5Config(
            vocab_size=100,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            decoder_start_token_id=0,
            **tokens,
        )
        kwargs = {"attention_mask": mask, "decoder_input_ids": ids[:, :4]}
        return transformers.T5ForConditionalGeneration(config), (ids,), kwargs
    config = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=3,
    )
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    return transformers.ViTForImageClassification(config), (pixels,), {}


@pytest.mark.parametrize("name", _transformers_cases())
def test_no_finding_in_tiny_transformers_models(name: str) -> None:
    model, args, kwargs = _tiny(name)
    model.eval()
    assert autoreg.audit_forward(model, *args, **kwargs) == []


@pytest.mark.parametrize("spec", zoo.MODELS, ids=[spec.name for spec in zoo.MODELS])
@pytest.mark.parametrize("variant", ["hand", "auto"])
def test_no_finding_in_the_benchmark_zoo_registered_models(spec: Any, variant: str) -> None:
    assert autoreg.audit_forward(spec.build(variant), *spec.make_inputs(2)) == []


# RecurrentCell's plain variant makes its state from the input on the first forward (x.new_zeros)
# and stores it in a plain attribute: on the device, but left behind by the next .to().
STORES_ITS_STATE = {"RecurrentCell": "state"}


@pytest.mark.parametrize("spec", zoo.MODELS, ids=[spec.name for spec in zoo.MODELS])
def test_the_benchmark_zoos_plain_models_are_findings_at_their_plain_attributes(spec: Any) -> None:
    findings = autoreg.audit_forward(spec.build("plain"), *spec.make_inputs(2), low_precision=None)
    if spec.name in STORES_ITS_STATE:
        assert [(f.kind, f.attribute) for f in findings] == [
            ("stored", STORES_ITS_STATE[spec.name])
        ]
    else:
        assert findings
        assert all(f.entered and "plain attribute .to() leaves behind" in f.fix for f in findings)


# --- the model and the inputs given are left as they were ----------------------------------------


def snapshot(model: nn.Module, inputs: tuple[Any, ...]) -> list[Any]:
    """Every tensor reachable from the model and the inputs, with what could change about it."""
    tensors: list[tuple[str, torch.Tensor]] = []
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if key in ("_parameters", "_buffers"):
                for name, tensor in value.items():
                    if tensor is not None:
                        tensors.append((f"{prefix}.{name}", tensor))
            else:
                tensors.extend(iter_tensors(value, f"{prefix}.{key}"))
        tensors.append((f"{prefix}.training", torch.tensor(module.training)))
    tensors.extend(iter_tensors(list(inputs), "inputs"))
    return [
        (
            path,
            id(t) if not path.endswith(".training") else None,
            t.device,
            t.dtype,
            t.requires_grad,
            t.grad,
            t.detach().clone() if t.device.type != "meta" else t.shape,
        )
        for path, t in tensors
    ]


def same(before: list[Any], after: list[Any]) -> bool:
    if len(before) != len(after):
        return False
    for old, new in zip(before, after, strict=True):
        if old[:6] != new[:6]:
            return False
        if isinstance(old[6], torch.Tensor) and not torch.equal(old[6], new[6]):
            return False
    return True


MODELS: list[tuple[str, Callable[[], nn.Module], Callable[[], tuple[Any, ...]]]] = [
    *[(name, stray, inputs) for name, stray, _, inputs in PATTERNS],
    *[(f"{name}-fixed", fixed, inputs) for name, _, fixed, inputs in PATTERNS],
    ("carrier", forward_zoo.Carrier, forward_zoo.activations),
    ("net", net_example.Net, lambda: (0,)),
]


@settings(max_examples=40, deadline=None)
@given(
    case=st.sampled_from(MODELS),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    backward=st.booleans(),
    low_precision=st.sampled_from([torch.bfloat16, None]),
    warm=st.booleans(),
    on_meta=st.booleans(),
)
def test_the_model_and_inputs_given_are_left_as_they_were(
    case: tuple[str, Callable[[], nn.Module], Callable[[], tuple[Any, ...]]],
    dtype: torch.dtype,
    backward: bool,
    low_precision: torch.dtype | None,
    warm: bool,
    on_meta: bool,
) -> None:
    _, build, make_inputs = case
    model = build().to(dtype)
    inputs = tuple(
        x.to(dtype).requires_grad_(backward)
        if isinstance(x, torch.Tensor) and x.is_floating_point()
        else x
        for x in make_inputs()
    )
    if warm:  # carried tensors (Carrier.state), replaced parameters (Net.w1) exist already
        with contextlib.suppress(RuntimeError):  # Cache's float32 stray fails a float64 model
            model(*inputs)
    if on_meta:
        model.to("meta")
    if backward:
        for parameter in model.parameters():
            parameter.grad = None
    before = snapshot(model, inputs)
    rng = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    autoreg.audit_forward(model, *inputs, backward=backward, low_precision=low_precision)
    assert same(before, snapshot(model, inputs))
    assert torch.equal(rng[0], torch.get_rng_state())
    assert rng[1] == random.getstate()
    assert np.array_equal(rng[2], np.random.get_state()[1])


COUNTS = torch.zeros(3)


class CountsCalls(forward_zoo._Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        COUNTS[0] += 1  # a global the forward writes to
        return self.linear(x)


def test_a_global_the_forward_writes_to_is_left_as_it_was() -> None:
    assert autoreg.audit_forward(CountsCalls(), *forward_zoo.activations()) == []
    assert COUNTS.tolist() == [0.0, 0.0, 0.0]


# --- errors and assert_no_strays -----------------------------------------------------------------


def test_anything_but_a_module_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^audit_forward\(\) takes an nn.Module instance, got "):
        autoreg.audit_forward(forward_zoo.Positions, torch.ones(1))  # type: ignore[arg-type]


def test_a_model_that_cannot_be_copied_is_refused_with_the_reason() -> None:
    class Locked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

    with pytest.raises(ForwardAuditError, match=r"^audit_forward\(\) cannot deep-copy Locked: "):
        autoreg.audit_forward(Locked(), torch.ones(2))


def test_a_model_that_fails_in_bfloat16_names_the_way_out() -> None:
    class Float32Only(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype == torch.bfloat16:
                raise NotImplementedError("no bfloat16 here")
            return x

    with pytest.raises(
        RuntimeError, match=r"skip the dtype pass: audit_forward\(\.\.\., low_precision=None\)"
    ) as caught:
        autoreg.audit_forward(Float32Only(), torch.ones(2))
    assert "It does without the audit too (checked)" in str(caught.value)
    assert autoreg.audit_forward(Float32Only(), torch.ones(2), low_precision=None) == []


def test_assert_no_strays_fails_with_both_reports() -> None:
    with pytest.raises(AssertionError) as caught:
        assert_no_strays(net_example.Net(), 0)
    report = str(caught.value)
    assert "1 tensor in Net would be left behind by .to()." in report  # w3
    assert "1 stray in the forward of Net" in report  # branch 0's torch.rand: device, dtype
    assert "examples/net.py:30  device, dtype  float32[2, 3] cpu" in report


def test_assert_no_strays_passes_a_clean_model() -> None:
    assert_no_strays(forward_zoo.PositionsFixed(), *forward_zoo.tokens())
    with pytest.raises(AssertionError, match=r"stray in the forward of Positions"):
        assert_no_strays(forward_zoo.Positions(), *forward_zoo.tokens())
