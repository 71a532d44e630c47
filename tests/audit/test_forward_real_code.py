"""The forward audit on patterns of real public code (``real_patterns``, written here).

It runs wherever the forward runs on a CPU: ``torch.autograd.grad`` inside forward (energy
networks), ``torch.distributions`` that validate their arguments (policies), data-dependent
operations and loops on values (adaptive ODE solvers). Its dtype rules are precise: float32
computed on purpose and cast back (RMSNorm, softmax, a complex rotary table) is not a stray; a
dtype the code writes (``dtype=torch.double``, ``.type(torch.float)``) is, when it would mix with
the model's own.
"""

from __future__ import annotations

import inspect
import linecache
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from tests.audit import real_patterns as rp

MARKER = re.compile(r"# stray: ([\w, ]+)$")
FILE = Path(inspect.getsourcefile(rp) or "").name


def marked(*objects: Any) -> set[tuple[str, int, str]]:
    """The (file, line, kind) that the ``# stray:`` markers in the source of ``objects`` name."""
    expected = set()
    for obj in objects:
        lines, start = inspect.getsourcelines(obj)
        for offset, line in enumerate(lines):
            match = MARKER.search(line.rstrip())
            if match:
                for kind in match.group(1).split(","):
                    expected.add((FILE, start + offset, kind.strip()))
    return expected


def found(findings: list[autoreg.ForwardFinding]) -> set[tuple[str, int, str]]:
    return {(Path(f.filename).name, f.lineno, f.kind) for f in findings}


# --- it runs wherever the forward runs on a CPU ---------------------------------------------------

RUNS: list[Any] = [
    pytest.param(rp.Energy, rp.energy_inputs, (rp.Energy,), id="autograd-grad-in-forward"),
    pytest.param(rp.bounded_actor, rp.states, (rp.GaussianActor,), id="distributions-validate"),
    pytest.param(rp.ODEBlock, rp.ode_inputs, (rp.ODEBlock, rp.Dynamics), id="adaptive-ode"),
]


@pytest.mark.parametrize(("build", "inputs", "sources"), RUNS)
def test_the_forward_audit_runs_wherever_the_forward_runs_on_a_cpu(
    build: Callable[[], nn.Module],
    inputs: Callable[[], tuple[torch.Tensor, ...]],
    sources: tuple[Any, ...],
) -> None:
    model = build()
    args = inputs()
    model(*args)  # it runs on the CPU
    assert found(autoreg.audit_forward(model, *args)) == marked(*sources)


def test_autograd_grad_in_forward_needs_no_option() -> None:
    """The audit runs the forward with autograd on, as the caller would: no flag to ask for."""
    findings = autoreg.audit_forward(rp.Energy(), *rp.energy_inputs(), low_precision=None)
    assert [f.kind for f in findings] == ["device", "device"]


# --- precise dtype rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16], ids=["float32-model", "bfloat16-model"]
)
def test_float32_computed_on_purpose_and_cast_back_is_not_a_stray(dtype: torch.dtype) -> None:
    """RMSNorm and softmax in float32 with .type_as(x), a complex64 rotary table, logits returned
    in float32: the LLM runs in bfloat16, and only the state its forward stores is reported."""
    findings = autoreg.audit_forward(rp.Llama().to(dtype), *rp.tokens())
    assert found(findings) == marked(rp.Attention, rp.Llama)
    assert {f.kind for f in findings} == {"stored"}


def test_a_dtype_written_in_the_code_is_a_stray_when_it_mixes_with_the_models() -> None:
    """``dtype=torch.double`` in a float64 model: right for that model, wrong on the GPU (device)
    and in float32 or bfloat16 (dtype: the LSTM cells reject it)."""
    findings = autoreg.audit_forward(rp.sequence(), *rp.waves())
    assert found(findings) == marked(rp.Sequence)


def test_a_cast_to_float32_that_meets_a_bfloat16_layer_is_a_stray() -> None:
    """``.type(torch.float)`` on integer timesteps feeds a Linear that bfloat16 weights reject."""
    findings = autoreg.audit_forward(rp.TimeEmbedding(), *rp.diffusion_inputs())
    assert found(findings) == marked(rp.TimeEmbedding)


def test_a_dtype_that_comes_to_be_in_a_division_is_reported_where_it_does() -> None:
    """Integer timesteps divided by an int are float32 there, not where they were drawn."""
    x, t = torch.zeros(2, 4), torch.tensor([3, 7])
    [finding] = autoreg.audit_forward(rp.Schedule(), x, t)
    assert found([finding]) == marked(rp.Schedule)
    assert (finding.reason, finding.fix) == (
        "addmm rejects float32 next to bfloat16",
        "floating values computed from integers take the default dtype: keep them in it (bfloat16 "
        "holds integers exactly only up to 256) and convert what they give where it meets the "
        "model, at addmm, on this line: .to(x.dtype)",
    )


@pytest.mark.parametrize("cls", [rp.LazyTable, rp.SameDeviceTable, rp.UnmovedTable])
def test_a_device_comparison_is_answered_as_on_a_gpu(cls: type[rp.LazyTable]) -> None:
    """``self.table.device != x.device``: false on the CPU, true on a GPU for a table ``.to()``
    left behind. The audit answers it as a GPU would, so a table that forward moves itself when
    the devices differ meets the model's tensors on their device, and one it does not move does
    not."""
    findings = autoreg.audit_forward(cls(), torch.ones(3, 4))
    assert found(findings) == marked(cls)
    assert {(f.kind, f.attribute) for f in autoreg.find_unregistered(cls())} == {
        ("tensor", "table")
    }


def test_an_index_made_on_the_cpu_is_not_the_stray_of_what_it_picks() -> None:
    """``self.table[positions]``: the rows are the table's, wherever the positions were made."""
    findings = autoreg.audit_forward(rp.IndexedTable(), torch.ones(3, 4))
    assert found(findings) == marked(rp.IndexedTable)


def test_a_0_dim_cpu_tensor_is_a_stray_where_cuda_checks_every_device() -> None:
    """A 0-dim CPU tensor is a scalar to CUDA's element-wise kernels (``mul``), a stray to the
    others (``clamp.Tensor``'s bound, an embedding's index, ``stack``), which check the device of
    every tensor: before, every 0-dim tensor passed (scaled-cosine attention's clamp, a known
    crash on CUDA)."""
    findings = autoreg.audit_forward(rp.ScaledCosineAttention(), torch.ones(2, 4, 4))
    assert found(findings) == marked(rp.ScaledCosineAttention)
    assert {f.op for f in findings} == {"clamp", "embedding", "stack"}


def test_without_torchs_list_of_device_checks_a_0_dim_tensor_is_a_scalar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where torch's ``native_functions.yaml`` (installed with ``torchgen``) cannot be read, the
    audit cannot tell which kernels check devices: it takes every 0-dim tensor for a scalar, as
    before, and reports nothing it cannot establish."""
    rules = autoreg._forward_audit.rules
    assert not rules.takes_cpu_scalars(torch.ops.aten.clamp.Tensor)
    monkeypatch.setattr(rules, "_device_checks", lambda: (frozenset(), frozenset()))
    rules.takes_cpu_scalars.cache_clear()
    try:
        assert rules.takes_cpu_scalars(torch.ops.aten.clamp.Tensor)
        findings = autoreg.audit_forward(rp.ScaledCosineAttention(), torch.ones(2, 4, 4))
    finally:
        rules.takes_cpu_scalars.cache_clear()
    assert findings == []


@pytest.mark.parametrize("cls", [rp.ComplexDiagonal, rp.DoubleComplex])
def test_the_models_dtype_in_complex_form_is_its_own(cls: type[rp.ComplexDiagonal]) -> None:
    """``dtype=A.dtype`` of the model's complex values (complex64 in a float32 model) is the
    model's dtype, not a stray; complex128 is, and the pass goes on with it cast to complex64,
    never to a real dtype (which dropped its imaginary part, warned, and sent the forward
    elsewhere: ``linalg.solve`` then raised, and the audit called the forward one it cannot
    follow). The model cannot run in bfloat16 (``view_as_complex``): one pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # casting complex to real warns
        findings = autoreg.audit_forward(cls(), torch.ones(2, 4), low_precision=None)
    assert found(findings) == marked(cls)


def test_inputs_in_a_plain_object_are_the_callers_to_move() -> None:
    """A batch wrapper's tensors are inputs: moved with the model and cast in the bfloat16 pass,
    as a list or a dict of them is. Before: each was a stray "made before forward", and the
    bfloat16 pass stopped at the first Linear, blaming the model."""
    findings = autoreg.audit_forward(rp.BatchEncoder(), *rp.padded_batch())
    assert found(findings) == marked(rp.BatchEncoder)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_a_dtype_an_operation_chose_is_torchs_not_the_index_it_was_computed_with(mode: str) -> None:
    """sdpa's float32 log-sum-exp, taken by its backward beside bfloat16 tensors, was reported
    as a dtype stray made by the ``torch.arange`` of the positions (an integer index, whose
    dtype no float has), with a fix (``dtype=x.dtype``) that breaks the embedding. A dtype is
    the code's only where the code gave it (a minimal GPT's training step)."""
    model = rp.PositionalAttention()
    findings = autoreg.audit_forward(model, *rp.sequence_batch(), step=rp.attention_step, mode=mode)
    assert findings == []


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_a_float_draw_that_only_becomes_a_bool_mask_gives_no_float_its_dtype(mode: str) -> None:
    """A ``torch.rand(...) < p`` label dropout before sdpa: the draw's float32 was carried
    through the bool mask and the labels it picked to the embedding's output, and sdpa's
    float32 log-sum-exp, taken by its backward, was reported as a dtype stray made by the
    draw (DiT's training step). Only a floating result can have a floating dtype of the code."""
    model = rp.DroppedLabels()
    findings = autoreg.audit_forward(model, *rp.labelled_batch(), step=rp.labelled_step, mode=mode)
    assert findings == []


def test_noise_only_sorted_into_indices_is_not_the_stray_of_what_they_gather() -> None:
    """MAE's shuffle: the float32 noise, only argsorted (and its ``topk`` indices kept), was
    reported beside the float32 mask that the order gathers. Its dtype reaches no floating
    value; a bool mask drawn without ``device=`` is still a device stray."""
    findings = autoreg.audit_forward(rp.ShuffledTokens(), torch.randn(2, 8, 4))
    assert found(findings) == marked(rp.ShuffledTokens)


def test_every_cause_of_a_dtype_stray_is_listed_in_one_run() -> None:
    """The state made without ``dtype=`` promotes the update and is reported; the pass goes on
    as if it were fixed, so the float32 decay, which then makes the output projection raise, is
    reported in the same run. Before, it showed up only once the state was fixed."""
    findings = autoreg.audit_forward(rp.SelectiveScan(), torch.ones(2, 4))
    assert found(findings) == marked(rp.SelectiveScan)


def test_strays_that_only_meet_each_other_are_reported_where_they_leave_in_the_output() -> None:
    """A flow's log-determinants: made without ``device=`` in every step and summed, they never
    meet the model's tensors in forward, only its caller does, beside the model's in the output.
    main: neither was reported (docs/real-code.md, problem C), and fixing one made the other
    show. The 0-dim count, the integer order and the copy back to the CPU are not strays."""
    findings = autoreg.audit_forward(rp.Flow(), torch.randn(4, 3))
    assert found(findings) == marked(rp.Flow, rp.AffineStep)
    assert {f.op for f in findings} == {"return"}
    # In a float64 model, float32 beside float64 computes in the model's dtype: no dtype stray
    # (as for an operation that meets it), the devices still are.
    in_float64 = autoreg.audit_forward(
        rp.Flow().double(), torch.randn(4, 3).double(), low_precision=None
    )
    assert {f.kind for f in in_float64} == {"device"}
    assert {(f.kind, f.reason) for f in findings} == {
        (
            "device",
            "it is returned beside the model's tensors (on the model's device), and the caller "
            "meets them together",
        ),
        (
            "dtype",
            "it is returned beside the model's tensors (bfloat16), and the caller meets them "
            "together",
        ),
    }


def test_a_stray_in_a_returned_distribution_is_reported() -> None:
    """The output is read as the inputs are: tensors, containers, and the fields of a plain
    object among them. main: the std, lifted from numpy, was reported only by a step that
    sampled from the distribution."""
    findings = autoreg.audit_forward(rp.FixedStdPolicy(), torch.randn(4, 5))
    assert found(findings) == marked(rp.FixedStdPolicy)


def test_an_index_made_in_forward_is_never_cast_to_the_models_dtype() -> None:
    """main: to tell whether the float32 cache was why index_copy_ raised, the audit ran it again
    with every tensor of another dtype converted, the positions too: the retry raised on a
    bfloat16 index, and the model was reported as raising (not audited)."""
    findings = autoreg.audit_forward(rp.ConfiguredCache(), torch.randn(1, 2, 4))
    assert found(findings) == marked(rp.ConfiguredCache)


def test_a_model_that_raises_in_bfloat16_is_reported_with_its_own_error() -> None:
    """main: the audit's retry cast the index to bfloat16, and reported its own IndexError
    ("tensors used as indices must be long...") instead of the model's."""
    model = rp.RoundedIndex()
    with pytest.raises(autoreg.ForwardAuditError, match="index 300 is out of bounds"):
        autoreg.audit_forward(model, torch.randn(3))


def test_a_convolution_with_a_bias_reports_its_input_and_goes_on() -> None:
    """A convolution with a bias refuses an input in another dtype before any operation runs,
    where the pass sees nothing: the bfloat16 pass stopped there ("not audited", the model's
    own error) and listed nothing after it. Now the input's line is a dtype finding, and the
    pass goes on as with that line fixed, to the second convolution."""
    findings = autoreg.audit_forward(rp.NoisyConvolution(), torch.ones(2, 4, 3))
    assert found(findings) == marked(rp.NoisyConvolution)
    assert {f.op for f in findings} == {"convolution"}


def test_a_tensor_two_classes_share_is_a_finding_in_each() -> None:
    """One mask given to two classes: both references stay behind, so both classes are findings
    of the attribute audit, and the forward meets the mask first in the encoder."""
    findings = autoreg.audit_forward(rp.SharedMask(), torch.ones(3, 4))
    assert found(findings) == marked(rp.MaskedEncoder)
    assert [(f.path, f.class_name) for f in autoreg.find_unregistered(rp.SharedMask())] == [
        ("encoder.mask", "MaskedEncoder"),
        ("decoder.mask", "MaskedDecoder"),
    ]


def test_a_reference_to_another_modules_buffer_stays_behind() -> None:
    """After the encoder alone was fixed, the decoder's reference is to the encoder's buffer: on a
    GPU, ``.to()`` gives the buffer a new tensor and leaves the reference on the CPU, in its old
    dtype. Both audits say so; before, both took the reference for the buffer."""
    model = rp.HalfFixedMask()
    findings = autoreg.audit_forward(model, torch.ones(3, 4))
    assert found(findings) == marked(rp.HalfFixedDecoder)
    assert [(f.path, f.class_name) for f in autoreg.find_unregistered(model)] == [
        ("decoder.mask", "HalfFixedDecoder")
    ]


def test_a_cast_where_the_tensor_is_is_no_copy_back() -> None:
    """``t.type_as(self.inv_freq)``, both on the CPU: a cast there, not a copy back from the
    model's device (whose fix would tell to avoid a ``.cpu()`` the code does not have)."""
    findings = autoreg.audit_forward(rp.PlainFrequencies(), torch.ones(3, 4))
    assert found(findings) == marked(rp.PlainFrequencies)
    assert not any("round trip" in f.fix for f in findings)


def test_a_cast_to_a_device_kept_from_the_constructor_names_the_attribute() -> None:
    """``.to(self.device, torch.float32)`` of a tensor already there: the fix names
    ``self.device``, on the device row and the dtype row."""
    findings = autoreg.audit_forward(rp.KeptDevice(), torch.ones(3, 4))
    assert found(findings) == marked(rp.KeptDevice)
    assert {f.kind for f in findings if "KeptDevice.device is the device" in f.fix} == {
        "device",
        "dtype",
    }


def test_code_that_asks_for_cuda_takes_its_cpu_branch() -> None:
    """A limit the audits page states: ``x.is_cuda`` is answered as the CPU answers it, so what
    only the CUDA branch makes is missed (answering as a GPU would run CUDA-only code)."""
    assert autoreg.audit_forward(rp.CudaOnlyBranch(), torch.ones(3, 4)) == []


def test_a_cpu_0_the_code_writes_is_taken_for_the_models_device() -> None:
    """The other limit the audits page states: ``"cpu:0"`` is how the audit names the model's
    device on the CPU."""
    assert autoreg.audit_forward(rp.WritesCpuZero(), torch.ones(3, 4)) == []


def test_a_copy_of_the_models_device_is_the_models_device() -> None:
    """``torch.device(x.device)`` and ``str(x.device)`` name the model's device, as on a GPU;
    ``"cpu"`` written out is the default device."""
    findings = autoreg.audit_forward(rp.DeviceCopies(), torch.ones(3, 4))
    assert found(findings) == marked(rp.DeviceCopies)


# --- any step, not only forward ------------------------------------------------------------------


def test_a_training_step_is_audited_like_a_forward() -> None:
    model = rp.Classifier()
    findings = autoreg.audit_forward(model, *rp.batch(), step=rp.train_step)
    assert found(findings) == marked(rp.Classifier)
    assert all(f.attribute == "cfg.class_weights" for f in findings)
    assert autoreg.audit_forward(model, rp.batch()[0]) == []  # forward alone never meets it


def test_the_step_leaves_the_model_and_its_optimizer_state_as_they_were() -> None:
    model = rp.Classifier()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    autoreg.audit_forward(model, *rp.batch(), step=rp.train_step)
    assert all(torch.equal(before[name], p) for name, p in model.named_parameters())
    assert all(p.grad is None for p in model.parameters())


def test_assert_no_strays_audits_a_step_too() -> None:
    from autoreg.testing import assert_no_strays

    with pytest.raises(AssertionError, match=r"1 stray in the step train_step of Classifier"):
        assert_no_strays(rp.Classifier(), *rp.batch(), step=rp.train_step)


class _PositionScale(nn.Module):
    """xpos-style rotary scaling: a power computed by dividing integer positions (true division
    gives the default dtype) raises a buffer of the model's dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.full((4,), 0.9))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[1], device=x.device)
        power = (t - x.shape[1] // 2) / 8
        return x * self.scale ** power[:, None]


def test_floats_computed_from_integers_are_told_to_convert_not_to_take_a_dtype_argument() -> None:
    """No call on that line takes ``dtype=``: the fix converts what it computes. Before: "dtype=
    x.dtype (or .to(x))", as for a factory."""
    [finding] = autoreg.audit_forward(_PositionScale(), torch.ones(2, 6, 4))
    assert (finding.kind, finding.source) == ("dtype", "power = (t - x.shape[1] // 2) / 8")
    assert finding.fix == (
        "floating values computed from integers take the default dtype: keep them in it "
        "(bfloat16 holds integers exactly only up to 256) and convert what they give where it "
        f"meets the model, at pow (line {finding.op_lineno}): .to(x.dtype)"
    )
    assert "self.scale ** power" in linecache.getline(finding.op_filename, finding.op_lineno)


class _Aggregate(nn.Module):
    """Message passing by hand: messages summed into the rows an integer index names."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        msg = self.lin(x)
        return torch.zeros(3, 4).index_add_(0, dst, msg)


def test_a_fix_names_a_floating_tensor_for_a_floating_stray_not_the_index_beside_it() -> None:
    """Before: "device=dst.device, dtype=dst.dtype (or .to(dst))": followed, index_add_ raised
    (int64 next to float messages)."""
    findings = autoreg.audit_forward(_Aggregate(), torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1]))
    assert [(f.kind, f.fix) for f in findings] == [
        (kind, "device=msg.device, dtype=msg.dtype (or .to(msg))") for kind in ("device", "dtype")
    ]


class _KeptPlain(autoreg.Module):
    """A tensor declared ``autoreg.Plain`` (``fix`` declares shared ones so) that forward adds
    to its output: ``.to()`` leaves it where it is."""

    recent: autoreg.Plain

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.recent = torch.zeros(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.recent


def test_a_tensor_declared_plain_that_forward_mixes_in_is_a_forward_finding() -> None:
    """Plain means autoreg leaves it where it is: on a GPU, the addition raises. Before: the
    forward audit took every tensor the attribute audit does not report for one that moves."""
    findings = autoreg.audit_forward(_KeptPlain(), torch.ones(2, 4))
    assert [f.kind for f in findings] == ["device", "dtype"]  # float32 in a bfloat16 model too
    assert {f.source for f in findings} == {"return self.lin(x) + self.recent"}
    assert (
        "recent is a plain attribute .to() leaves behind: declared autoreg.Plain" in findings[0].fix
    )


def test_what_a_function_kept_as_an_attribute_reaches_of_the_model_is_the_models() -> None:
    """The audit runs a deep copy, and ``deepcopy`` shares functions: the copy's lambdas reached
    the original's modules, whose weights (not converted) were reported as "made before
    forward" (minGPT's ``Block.mlpf``). Their closures and defaults now reach the copy's.
    A tensor of no module that such a function reaches stays a finding."""
    x = torch.randn(2, 8)
    assert autoreg.audit_forward(rp.LambdaMLP(), x) == []
    model = rp.LambdaMLP(outside=True)
    assert found(autoreg.audit_forward(model, x)) == marked(rp.LambdaMLP)
    assert model.mlpf.__closure__[0].cell_contents is model.mlp  # the model is left as it was


def test_floats_computed_from_integers_where_no_model_tensor_is_in_reach_name_none() -> None:
    """A parameterless time embedding (a denoising U-Net's): the fix said "pass it one (t) and
    write dtype=t.dtype", where ``t`` is the code's own integer timestep; it now names no
    variable, and says to convert where the floats are computed."""
    findings = autoreg.audit_forward(
        rp.StepConditioned(), torch.randn(3, 8), torch.tensor([1, 4, 9])
    )
    assert found(findings) == marked(rp.SinusoidalSteps)
    [lineno] = {f.op_lineno for f in findings}
    assert {f.fix for f in findings} == {
        "floating values computed from integers take the default dtype: keep them in it (bfloat16 "
        "holds integers exactly only up to 256) and convert what they give where it meets the "
        f"model, at addmm (line {lineno}): .to(<a tensor of the model there>.dtype)"
    }
    assert "self.time(t)" in linecache.getline(findings[0].op_filename, lineno)


def test_a_cast_on_purpose_that_an_operation_refuses_offers_both_ways_out() -> None:
    """A norm computed in float32 (whisper's ``LayerNorm``): in bfloat16 its weights are
    bfloat16, and ``layer_norm`` refuses the mix. Before, the fix said only "cast it back before
    native_layer_norm", which gives up the float32 the code chose."""
    [finding] = autoreg.audit_forward(rp.NormedBlock(), torch.randn(2, 8))
    assert found([finding]) == marked(rp.Float32Norm)
    assert finding.fix == (
        "cast to float32 on purpose, it meets tensors of the model at native_layer_norm, which "
        "refuses the mix: cast those to float32 there too, or cast it back first, .type_as(x)"
    )


def test_a_fix_names_the_tensor_the_operation_meets_even_through_a_view() -> None:
    """``cdist`` meets a view of ``self.levels``; the fix named ``self.embed.weight``, a weight
    the line never touches (on edm's preconditioners, ``self.model.map_layer0.weight``)."""
    findings = autoreg.audit_forward(rp.RoundedNoise(), torch.tensor([0.3, 2.2]))
    assert found(findings) == marked(rp.RoundedNoise)
    assert "self.levels" in findings[0].fix
    assert "embed" not in findings[0].fix


def _sinusoidal(t: torch.Tensor, dim: int) -> torch.Tensor:
    """A timestep embedding computed in float32 on purpose (DiT's, improved-diffusion's)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    angles = t[:, None].float() * freqs[None].to(t.device)
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class _StepEmbed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(64, 16)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.mlp(_sinusoidal(t, 64))


def test_a_float32_embedding_of_timesteps_is_told_to_convert_where_it_meets_the_model() -> None:
    """Before: "dtype= that of the model ... pass it one and write dtype=<that tensor>.dtype"
    for the frequencies: made in bfloat16, the phases of timesteps to 999 are off by up to 1.9,
    where converting the embedding where it meets the Linear is off by 0.002."""
    t = torch.tensor([999, 517, 3])
    findings = autoreg.audit_forward(_StepEmbed(), t)
    assert {f.source for f in findings} == {
        "angles = t[:, None].float() * freqs[None].to(t.device)"
    }
    assert {f.fix for f in findings} == {
        "the code here holds none of the model's tensors: convert what it gives where it meets "
        f"the model, at addmm (line {findings[0].op_lineno}): "
        ".to(<a tensor of the model there>.dtype)"
    }
    exact = _sinusoidal(t, 64)
    at_the_model = exact.to(torch.bfloat16).float()
    half = 32
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.bfloat16) / half)
    angles = t[:, None].to(torch.bfloat16) * freqs[None]
    where_made = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).float()
    assert (at_the_model - exact).abs().max() < 0.01 < 1.0 < (where_made - exact).abs().max()


class _StepEmbedCastBack(nn.Module):
    """A timestep embedding computed in float32 and converted to the model's dtype before its
    MLP (minRF's ``TimestepEmbedder``): the timesteps come in the model's floating dtype, the
    float32 frequencies promote them, the embedding goes back in ``dtype`` or ``weight.dtype``."""

    def __init__(self, by_weight: bool) -> None:
        super().__init__()
        self.by_weight = by_weight
        self.mlp = nn.Sequential(nn.Linear(64, 16), nn.SiLU())

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-math.log(10000) * torch.arange(32) / 32).to(t.device)
        angles = t[:, None] * freqs[None]
        emb = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        emb = emb.to(self.mlp[0].weight.dtype) if self.by_weight else emb.to(t.dtype)
        return self.mlp(emb)


@pytest.mark.parametrize("by_weight", [True, False], ids=["weight-dtype", "input-dtype"])
def test_float32_converted_to_the_models_dtype_before_it_meets_the_model_is_no_stray(
    by_weight: bool,
) -> None:
    """Before: the frequencies' line was reported at ``mul`` with the fix ``.to(t)``, which
    computes the phases in bfloat16: for timesteps to 999 the embedding is then off by more
    than 1, where the code as written is off by 0.01 at most."""
    t = torch.tensor([3.0, 999.0])
    assert autoreg.audit_forward(_StepEmbedCastBack(by_weight), t) == []
    low = t.to(torch.bfloat16)  # the same timesteps in each: 999 is 1000 in bfloat16

    def embedding(angles: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.cos(angles), torch.sin(angles)], -1).double()

    exact = embedding(low.double()[:, None] * _freqs().double())
    written = embedding(low[:, None] * _freqs()).to(torch.bfloat16)  # promoted, then converted
    advised = embedding(low[:, None] * _freqs().to(low))
    assert (written.double() - exact).abs().max() < 0.01
    assert (advised - exact).abs().max() > 1.0


def _freqs() -> torch.Tensor:
    return torch.exp(-math.log(10000) * torch.arange(32) / 32)


def test_float32_that_meets_the_model_before_it_is_converted_is_still_a_stray() -> None:
    """The same promotion, but the float32 product meets a bfloat16 layer before any conversion:
    reported at the frequencies' line, at the operation that promoted it."""

    class Unconverted(_StepEmbedCastBack):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            freqs = torch.exp(-math.log(10000) * torch.arange(32) / 32).to(t.device)
            angles = t[:, None] * freqs[None]
            emb = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
            return self.mlp(emb).to(t.dtype)

    [finding] = autoreg.audit_forward(Unconverted(True), torch.tensor([3.0, 999.0]))
    assert (finding.kind, finding.source, finding.op) == (
        "dtype",
        "freqs = torch.exp(-math.log(10000) * torch.arange(32) / 32).to(t.device)",
        "mul",
    )


class _MixedOnPurpose(nn.Module):
    """Activations in bfloat16 on purpose in a float32 model (nanochat's GPU setting): a
    bfloat16 embedding, float32 master weights cast to the activations' dtype where used,
    float32 per-layer scalars, 0-dim once indexed, that leave the activations bfloat16."""

    def __init__(self, norm: bool = True) -> None:
        super().__init__()
        self.norm = norm
        self.emb = nn.Embedding(10, 8).to(torch.bfloat16)
        self.lam = nn.Parameter(torch.ones(2))
        self.w = nn.Parameter(torch.ones(8))
        self.out = nn.Parameter(torch.eye(8))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x0 = self.emb(idx)
        x = torch.nn.functional.rms_norm(x0, (8,)) if self.norm else x0
        x = x * self.w.to(x.dtype)
        x = self.lam[0] * x + self.lam[1] * x0
        return torch.nn.functional.linear(x, self.out.to(x.dtype))


@pytest.mark.parametrize("norm", [True, False], ids=["rms-norm", "no-norm"])
def test_activations_cast_on_purpose_times_a_0_dim_float32_scalar_are_no_stray(norm: bool) -> None:
    """The scalar leaves the product bfloat16: nothing is promoted. Before: with ``rms_norm``
    (whose own casts torch makes inside it) before the weight's cast, the line of the multiply
    was reported, "dtype=self.lam.dtype", against the model's design."""
    idx = torch.tensor([[1, 2, 3]])
    assert autoreg.audit_forward(_MixedOnPurpose(norm), idx) == []
    assert _MixedOnPurpose(norm)(idx).dtype == torch.bfloat16


class _AttentionOnPurpose(nn.Module):
    """Attention run in bfloat16 on purpose in a float32 model, its float32 master weights cast
    to the activations' dtype, its logits given back in float32 for the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Parameter(torch.randn(48, 16) * 0.1)
        self.out = nn.Parameter(torch.randn(5, 16) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.bfloat16)
        q, k, v = torch.nn.functional.linear(x, self.qkv.to(x.dtype)).view(2, 7, 3, 2, 8).unbind(2)
        y = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        y = y.transpose(1, 2).reshape(2, 7, 16)
        return torch.nn.functional.linear(y, self.out.to(y.dtype)).float()


def _loss_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, 5), y.reshape(-1))
    loss.backward()
    return loss


def test_attention_in_bfloat16_on_purpose_is_no_stray_of_its_backward() -> None:
    """sdpa's CPU backward meets the bfloat16 activations and the float32 log-sum-exp it made.
    Before: the activations were blamed on ``loss.backward()``, "dtype=x.dtype"."""
    x, y = torch.randn(2, 7, 16), torch.randint(0, 5, (2, 7))
    assert autoreg.audit_forward(_AttentionOnPurpose(), x, y, step=_loss_step) == []


class _FollowingLayer(nn.Module):
    """A fully connected layer that casts its weight and bias to its input's dtype (StyleGAN's
    ``FullyConnectedLayer``): they follow the input, and write no dtype of their own."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.to(x.dtype)
        b = self.bias.type_as(x)
        return torch.addmm(b.unsqueeze(0), x, w.t())


class _MappingNet(nn.Module):
    """StyleGAN's mapping network: its input cast to float32, a bfloat16 ``w_avg`` met by
    ``lerp``, which refuses the mix."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.fixed = fixed
        self.fc = _FollowingLayer(8)
        self.register_buffer("w_avg", torch.zeros(8))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = z.to(self.w_avg.dtype) if self.fixed else z.to(torch.float32)
        return self.w_avg.lerp(self.fc(x), 0.7)


def test_a_cast_to_the_dtype_of_the_input_is_not_a_cause_the_input_is() -> None:
    """Before: the layer's ``self.weight.to(x.dtype)`` and ``self.bias.type_as(x)`` were
    reported too, as casts "to float32 on purpose", ".type_as(self.weight)" for both; with
    the one cause fixed, they vanish."""
    findings = autoreg.audit_forward(_MappingNet(), torch.randn(2, 8))
    assert [(f.kind, f.source, f.op) for f in findings] == [
        (
            "dtype",
            "x = z.to(self.w_avg.dtype) if self.fixed else z.to(torch.float32)",
            "lerp",
        )
    ]
    assert autoreg.audit_forward(_MappingNet(fixed=True), torch.randn(2, 8)) == []


class _MaskedAttention(nn.Module):
    """A bool causal mask handed to ``nn.MultiheadAttention`` (EnCodec's streaming LM), after a
    float32 signal computed from integer positions is added to the activations: torch's own
    code converts the mask to the query's dtype (``F._canonical_mask``), float32 only because of
    that signal."""

    def __init__(self, layer: bool = False, fixed: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fixed = fixed
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True) if layer else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(x.shape[1], device=x.device).view(1, -1, 1)
        signal = torch.sin(steps / 10.0)
        x = self.norm(x) + (signal.to(x.dtype) if self.fixed else signal)
        i = torch.arange(x.shape[1], device=x.device)
        mask = i.view(-1, 1) < i.view(1, -1)
        if self.layer is not None:
            return self.layer(x, src_mask=mask)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


@pytest.mark.parametrize("layer", [False, True], ids=["multihead-attention", "encoder-layer"])
def test_a_bool_mask_torch_converts_to_the_querys_dtype_is_not_a_cause(layer: bool) -> None:
    """Before: the attention line was reported too ("floating values computed from integers"),
    with the fix ``.to(...dtype)``, which, applied to the bool mask, makes it an additive 0/1
    bias: the outputs change with no error. The signal is the one cause; fixed, nothing is."""
    x = torch.randn(2, 5, 8)
    findings = autoreg.audit_forward(_MaskedAttention(layer).eval(), x)
    assert [(f.kind, f.source) for f in findings] == [("dtype", "signal = torch.sin(steps / 10.0)")]
    assert autoreg.audit_forward(_MaskedAttention(layer, fixed=True).eval(), x) == []


class _SquareMask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


def test_a_tensor_torchs_code_makes_where_it_was_not_told_is_the_callers_stray() -> None:
    """What torch's own code decides from what it is handed is no cause (above); what it makes
    on the default device, in the default dtype, because the caller did not say (``device=``,
    ``dtype=``), is the caller's line's."""
    findings = autoreg.audit_forward(_SquareMask(), torch.randn(2, 5, 8))
    assert {(f.kind, f.source) for f in findings} == {
        ("device", "mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])"),
        ("dtype", "mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])"),
    }


def test_a_cast_the_forward_writes_decides_the_dtype_even_where_it_changes_nothing() -> None:
    """DDIM's sampler passes float32 timesteps, and its denoiser casts them with
    ``timesteps.float()``, a cast that changes nothing in float32: the audit blamed the sampler's
    ``torch.ones(n) * i`` with ``.to(x)``, which does not stop the float32 embedding from
    meeting the bfloat16 Linear and makes the step 999 a bfloat16 1000, one past the table it
    indexes. The line that writes the cast is the one reported, as when the timesteps come in
    the model's dtype."""
    x, table = torch.randn(2, 4), torch.rand(1000)
    in_the_models_dtype = autoreg.audit_forward(rp.FloatSteps(), x, torch.tensor([999.0, 3.0]))
    sampled = autoreg.audit_forward(rp.FloatSteps(), x, table, step=rp.float_steps_sample)
    assert found(in_the_models_dtype) == found(sampled) == marked(rp.step_phases)
    assert torch.tensor(999.0).to(torch.bfloat16).long() == len(table)


def test_what_a_cast_on_purpose_computes_with_is_told_to_convert_where_it_meets_the_model() -> None:
    """The frequencies, float32 beside the float32 cast of the timesteps, were told ``.to(t)``:
    the cast keeps the phases float32 whatever their dtype (the Linear still refuses them),
    and frequencies rounded to bfloat16 move the phase of the step 999 by more than half a
    radian.
    Both lines are reported, with the fix that works: convert where the embedding meets the
    Linear."""
    t = torch.tensor([999.0, 3.0])
    findings = autoreg.audit_forward(rp.SplitPhases(), t)
    assert found(findings) == marked(rp.SplitPhases)
    [freqs] = [f for f in findings if f.source.startswith("freqs = freqs.to(")]
    assert freqs.fix == (
        "computed with a cast to float32 on purpose, which gives the result float32 whatever its "
        f"own dtype: keep it float32, and convert the result where it meets the model, at addmm "
        f"(line {freqs.op_lineno}): .to(<a tensor of the model there>.dtype)"
    )
    freqs32 = torch.exp(torch.arange(8, dtype=torch.float32) * -(math.log(1e4) / 7))
    rounded = freqs32.to(torch.bfloat16).float()
    assert (999 * (freqs32 - rounded)).abs().max() > 0.5


class _MovedThenCast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.linspace(0.0, 1.0, 4).to(x.device).float()
        return self.lin(x) * scale


def test_a_cast_that_changes_nothing_is_no_precision_on_purpose() -> None:
    """A float32 table moved to the model's device, then ``.float()``, which returns it as it is:
    its line is still reported where it promotes the bfloat16 output (it is no cast of the
    model's own values), and the fix is to the cast, which ``.to(x)`` alone would not undo."""
    [finding] = autoreg.audit_forward(_MovedThenCast(), torch.randn(2, 4))
    assert finding.source == "scale = torch.linspace(0.0, 1.0, 4).to(x.device).float()"
    assert finding.fix == "cast to x.dtype, not to float32: .to(x.dtype)"
