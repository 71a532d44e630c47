"""The report: targets evaluated, a table on stdout, and JSON, markdown and PNG files.

Files are named ``<device>-<date>`` (``-quick`` appended for ``--quick`` runs and ``-gpu-plan``
for the GPU plan run on a CPU, so that a smoke run never overwrites a full one) and each names the
hardware, the GPU's driver, torch, CUDA and Python versions and the date.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .micro import MicroResult
from .move import MoveResult
from .speed import COUNTERS, EAGER_INSTANCE_SETS, ForwardResult

__all__ = [
    "FORWARD_BAND",
    "build_report",
    "check_plotting",
    "format_markdown",
    "format_text",
    "forward_status",
    "write_files",
]

SCHEMA = 2
FORWARD_BAND = (0.99, 1.01)
STRUCTURAL = {
    "RecurrentCell": "(b) keeps its state in a buffer: every read goes through "
    "nn.Module.__getattr__ and every write through nn.Module.__setattr__ (isinstance checks that "
    "run Python code in the Parameter and Buffer metaclasses); (c) carries it in __dict__: a plain "
    "attribute read and autoreg's short path for a carried tensor. Under torch.compile the write "
    "is replayed after the graph through the same __setattr__.",
    "AnchorPyramid": "(b) holds one buffer per list or dict entry and rebuilds the list and the "
    "dict through properties on every read; (c) reads its carried list and dict from __dict__.",
}
"""Models whose (b) reads or writes its tensors through different code than (c), by design."""

VARIANT_TITLES = {
    "plain": "(a) nn.Module, bare tensors",
    "hand": "(b) nn.Module, register_buffer",
    "auto": "(c) autoreg.Module, bare tensors",
}


# --- the report as data --------------------------------------------------------------------------


def build_report(
    *,
    kind: str,
    machine: dict[str, Any],
    settings: dict[str, Any],
    move: Sequence[MoveResult],
    forward: Sequence[ForwardResult],
    micro: Sequence[MicroResult],
    hand_notes: dict[str, str],
    duration_s: float,
) -> dict[str, Any]:
    """Everything the files and the stdout table show, as JSON-ready data."""
    forward_rows = []
    for result in forward:
        row = dataclasses.asdict(result)
        row["label"] = result.label
        row["in_band"] = result.error is None and _in_band(result.ratio_median)
        row["counters_differ"] = result.counters_differ
        row["status"] = forward_status(result)
        row["name"] = f"A/A control: {result.model} (b)/(b)" if result.control else result.model
        forward_rows.append(row)
    move_rows = []
    for move_result in move:
        row = dataclasses.asdict(move_result)
        row["expected"] = move_result.expected
        move_rows.append(row)
    return {
        "schema": SCHEMA,
        "kind": kind,
        "machine": machine,
        "settings": settings,
        "hand_notes": hand_notes,
        "move": move_rows,
        "forward": forward_rows,
        "micro": [{**dataclasses.asdict(result), "met": result.met} for result in micro],
        "targets": _targets(move, forward, micro, machine["device"]),
        "duration_s": round(duration_s, 1),
    }


def _in_band(ratio: float) -> bool:
    return FORWARD_BAND[0] <= ratio <= FORWARD_BAND[1]


def forward_status(result: ForwardResult) -> str:
    """A forward row's verdict: ``ok``, or what fails it (counters first: they void the timing)."""
    if result.skipped:
        return "skipped"
    if result.error:
        return "error"
    if result.counters_differ:
        return "counters differ: " + ", ".join(result.counters_differ)
    if not result.outputs_match:
        return "outputs differ"
    if result.control:
        return "(noise)"
    return "ok" if _in_band(result.ratio_median) else "out of band"


def _target(name: str, limit: str, value: str, met: bool, note: str = "") -> dict[str, Any]:
    return {"target": name, "limit": limit, "value": value, "met": met, "note": note}


def _targets(
    move: Sequence[MoveResult],
    forward: Sequence[ForwardResult],
    micro: Sequence[MicroResult],
    device: str,
) -> list[dict[str, Any]]:
    targets = []
    if move:
        good = [r for r in move if r.expected]
        bad = sorted({f"{r.model}@{r.target}" for r in move if not r.expected})
        targets.append(
            _target(
                "move: (b) and (c) leave nothing behind, run, and agree",
                "all models, all targets",
                f"{len(good)}/{len(move)}",
                len(good) == len(move),
                "not met: " + ", ".join(bad) if bad else "",
            )
        )
        device_moves = [r for r in move if r.target in ("cuda", "meta")]
        shown = [
            r
            for r in device_moves
            if r.variants["plain"].left_behind and not r.variants["plain"].forward_ok
        ]
        targets.append(
            _target(
                f"move: (a) leaves tensors behind on .to({device_moves[0].target!r}) and fails"
                if device_moves
                else "move: (a) leaves tensors behind and fails",
                "all models (the bug, shown)",
                f"{len(shown)}/{len(device_moves)}",
                len(shown) == len(device_moves),
            )
        )

    for label, group in _grouped(forward).items():
        rows = [r for r in group if not r.control and not r.skipped]
        skipped = [r for r in group if r.skipped]
        controls = [r for r in group if r.control and not r.error and not r.skipped]
        failed = [r for r in rows if forward_status(r) not in ("ok", "out of band")]
        outside = [r for r in rows if forward_status(r) == "out of band"]
        detail = [f"{r.model}: {forward_status(r)}" for r in failed] + [
            f"{r.model} {r.ratio_median:.3f} ({r.diff_us:+.2f} us, "
            f"{'faster' if r.ratio_median < 1 else 'slower'})"
            for r in outside
        ]
        detail += [
            f"A/A control (b)/(b) {c.model}: "
            f"{_ratio_cell(c.ratio_median, c.ratio_min, c.ratio_max)} ({c.diff_us:+.2f} us)"
            for c in controls
        ]
        if skipped:
            detail.append(f"skipped ({skipped[0].skipped}): {', '.join(r.model for r in skipped)}")
        targets.append(
            _target(
                f"forward {label}",
                f"median in [{FORWARD_BAND[0]}, {FORWARD_BAND[1]}], counters and outputs equal",
                f"{len(rows) - len(failed) - len(outside)}/{len(rows) + len(skipped)} models ok",
                not failed and not outside and not skipped and bool(rows),
                "; ".join(detail),
            )
        )
        compiled = [r for r in group if r.graph_breaks and not r.error]
        if compiled:
            extra_breaks = [
                r.model
                for r in compiled
                if any(
                    a > h
                    for a, h in zip(r.graph_breaks["auto"], r.graph_breaks["hand"], strict=True)
                )
            ]
            totals = {v: sum(sum(r.graph_breaks[v]) for r in compiled) for v in ("hand", "auto")}
            targets.append(
                _target(
                    f"graph breaks {label}",
                    "(c) no more than (b)",
                    f"(b) {totals['hand']}, (c) {totals['auto']}",
                    not extra_breaks,
                    "extra in: " + ", ".join(extra_breaks) if extra_breaks else "",
                )
            )
        counted = [r for r in group if r.counters and not r.error]
        if counted and any(r.mode != "eager" for r in counted):
            differ = [
                f"{r.model} ({', '.join(r.counters_differ)})" for r in counted if r.counters_differ
            ]
            sums = {
                v: "/".join(str(sum(r.counters[v][c] for r in counted)) for c in COUNTERS)
                for v in ("hand", "auto")
            }
            targets.append(
                _target(
                    f"compile counters {label}",
                    "(c) == (b): " + ", ".join(COUNTERS) + "; none while timed",
                    f"(b) {sums['hand']}, (c) {sums['auto']}",
                    not differ,
                    "differ in: " + "; ".join(differ) if differ else "",
                )
            )

    for result in micro:
        if result.limit is not None:
            targets.append(
                _target(
                    f"micro {result.label}",
                    f"<= {result.limit:.2f}",
                    f"{result.ratio_median:.3f}",
                    bool(result.met),
                    "A/A "
                    + _ratio_cell(result.control_median, result.control_min, result.control_max),
                )
            )
    return targets


def _grouped(forward: Iterable[ForwardResult]) -> dict[str, list[ForwardResult]]:
    groups: dict[str, list[ForwardResult]] = {}
    for result in forward:
        groups.setdefault(result.label, []).append(result)
    return groups


# --- short cells ---------------------------------------------------------------------------------


def _move_cell(variant: dict[str, Any]) -> str:
    left = len(variant["left_behind"])
    head = f"{left} of {variant['reachable']} left"
    if not variant["forward_ok"]:
        return f"{head}; fails: {_error_kind(variant['error'])}"
    versus = variant.get("versus_hand")
    if versus is None:
        return f"{head}; runs"
    if versus.startswith("identical"):
        return f"{head}; runs, = (b)"
    if versus.startswith("equal within"):
        return f"{head}; runs, = (b) within tolerance"
    if versus.startswith("silently wrong dtype"):
        return f"{head}; runs, wrong dtype {versus.split(':')[1].split(',')[0].strip()}"
    if versus.startswith("silently different values"):
        return f"{head}; runs, differs {versus.split('=')[1].strip()}"
    return f"{head}; runs, {versus}"


def _error_kind(error: str | None) -> str:
    text = (error or "").lower()
    if "device" in text:
        return "device error"
    if "dtype" in text or "type (" in text:
        return "dtype error"
    return (error or "error").split(":")[0]


def _ratio_cell(median: float, low: float, high: float) -> str:
    return f"{median:.3f} [{low:.3f}, {high:.3f}]"


def _time_cell(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def _ns_cell(ns: float) -> str:
    return _time_cell(ns / 1000) if ns >= 1000 else f"{ns:.0f} ns"


def _header(report: dict[str, Any]) -> str:
    m = report["machine"]
    cpu = f"{m['cpu']}, {m['cpu_count']} cores"
    hardware = f"{m['gpu']} (host {cpu})" if m["gpu"] else cpu
    if m.get("driver"):
        hardware = f"{m['gpu']}, driver {m['driver']} (host {cpu})"
    cuda = f", CUDA {m['cuda']}" if m["cuda"] else ""
    return (
        f"{hardware}; torch {m['torch']}{cuda}; Python {m['python']}; {m['datetime_utc']}; "
        f"autoreg {m['autoreg']} (source {m['autoreg_source_sha256']}, "
        f"HEAD {(m['git_commit'] or 'n/a')[:10]})"
    )


def _sections(report: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) for each table, shared by the text and markdown formats."""
    sections = []
    if report["move"]:
        rows = [
            [
                r["model"],
                r["target"],
                *(_move_cell(r["variants"][v]) for v in ("plain", "hand", "auto")),
                "yes" if r["expected"] else "NO",
            ]
            for r in report["move"]
        ]
        headers = ["model", ".to()", *VARIANT_TITLES.values(), "(b),(c) ok"]
        sections.append(("Move check: tensors left behind, and forward after .to()", headers, rows))
    if report["forward"]:
        rows = []
        for r in report["forward"]:
            if r["skipped"] or r["error"]:
                why = f"skipped: {r['skipped']}" if r["skipped"] else r["error"][:80]
                rows.append([r["label"], r["name"], "", "", "", "", why, "", "", "", ""])
                continue
            compiled = bool(r["graph_breaks"])
            rows.append(
                [
                    r["label"],
                    r["name"],
                    _time_cell(r["hand_us"]),
                    _time_cell(r["auto_us"]),
                    f"{r['diff_us']:+.2f} us",
                    _ratio_cell(r["ratio_median"], r["ratio_min"], r["ratio_max"]),
                    r["status"],
                    "= (b)" if r["outputs_match"] else r["outputs"][:40],
                    "" if r["control"] or compiled else str(r["autoreg_calls"]),
                    _pair(r["graph_breaks"], sum) if compiled else "",
                    _counters_cell(r["counters"]) if compiled else "",
                ]
            )
        headers = [
            "mode",
            "model",
            "(b) per call",
            "(c) per call",
            "(c)-(b)",
            "(c)/(b) median [min, max]",
            "status",
            "outputs",
            "autoreg calls/fwd",
            "graph breaks (b)/(c)",
            "frames,cg skips,cg recordings (b)/(c)",
        ]
        sections.append(("Forward: (c) autoreg.Module / (b) hand-registered", headers, rows))
    if report["micro"]:
        rows = [
            [
                r["label"],
                _ns_cell(r["plain_ns"]),
                _ns_cell(r["auto_ns"]),
                _ratio_cell(r["ratio_median"], r["ratio_min"], r["ratio_max"]),
                _ratio_cell(r["control_median"], r["control_min"], r["control_max"]),
                f"<= {r['limit']:.2f}" if r["limit"] is not None else "",
                "" if r["met"] is None else "met" if r["met"] else "MISSED",
            ]
            for r in report["micro"]
        ]
        headers = [
            "operation",
            "nn.Module",
            "autoreg",
            "autoreg/nn.Module [min, max]",
            "A/A nn.Module/nn.Module",
            "target",
            "status",
        ]
        sections.append(("Micro: autoreg.Module / nn.Module (CPU)", headers, rows))
    rows = [
        [t["target"], t["limit"], t["value"], "met" if t["met"] else "MISSED", t["note"]]
        for t in report["targets"]
    ]
    sections.append(("Targets", ["target", "limit", "value", "status", "note"], rows))
    return sections


def _counters_cell(counters: dict[str, dict[str, int]]) -> str:
    return " / ".join(",".join(str(counters[v][c]) for c in COUNTERS) for v in ("hand", "auto"))


def _pair(values: dict[str, Any], reduce: Any) -> str:
    def one(value: Any) -> str:
        return str(reduce(value) if reduce else value)

    return f"{one(values['hand'])} / {one(values['auto'])}"


# --- formats ---------------------------------------------------------------------------------


def format_text(report: dict[str, Any]) -> str:
    """The stdout table."""
    lines = [f"autoreg benchmarks ({report['kind']}): {_header(report)}", ""]
    for title, headers, rows in _sections(report):
        widths = [
            max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)
        ]
        lines.append(title)
        for row in [headers, ["-" * w for w in widths], *rows]:
            cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
            lines.append("  ".join(cells).rstrip())
        lines.append("")
    met = sum(t["met"] for t in report["targets"])
    lines.append(f"{met}/{len(report['targets'])} targets met; took {report['duration_s']} s")
    if report["settings"].get("interrupted"):
        lines.append(f"INCOMPLETE: {report['settings']['interrupted']}")
    return "\n".join(lines)


def format_markdown(report: dict[str, Any]) -> str:
    """The markdown file: the same tables, with the settings and the errors (a) ran into."""
    s = report["settings"]
    m = report["machine"]
    tf32 = ", ".join(f"`{name}` = {value}" for name, value in m["tf32"].items())
    lines = [
        f"# autoreg benchmarks ({report['kind']}): {m['device']}, {m['date']}",
        "",
        f"**Machine:** {_header(report)}",
        "",
        f"**Numerics:** torch threads {m['torch_threads']}; {tf32}.",
        "",
        f"**Method:** forward: {s['forward_rounds']} rounds; each round gives each variant "
        f"about {s['forward_round_s'] * 1000:.0f} ms of calls in blocks of at least "
        f"{s['forward_sub_block_s'] * 1000:.1f} ms, interleaved A B B A / B A A B, after a "
        "lock-step warm-up until the dynamo and CUDA-graph counters stop changing; clock: "
        f"{s['clocks']['forward']}. "
        + (
            f"Micro: {s['micro_rounds']} rounds ({s['micro_heavy_rounds']} for whole-model "
            "cases), plain / autoreg / A/A control in a palindrome; clock: "
            f"{s['clocks']['micro']}. "
            if report["micro"]
            else ""
        )
        + f"Ratios: median over rounds [min, max]. Command: `{s['command']}`; "
        f"took {report['duration_s']} s.",
        "",
    ]
    if s.get("interrupted"):
        lines += [f"**Incomplete:** {s['interrupted']}.", ""]
    for title, headers, rows in _sections(report):
        lines += [f"## {title}", "", _md_row(headers), _md_row(["---"] * len(headers))]
        lines += [_md_row(row) for row in rows]
        lines.append("")
    lines += [
        "## Reading the numbers",
        "",
        "- **A/A control**: (b) against a second, separately built instance of (b) of the "
        "configuration's first model (compiled modes: each instance compiled on its own, as (b) "
        "and (c) are), timed the same way; its distance from 1.00 is the noise floor of that "
        "configuration on this machine. Eager rounds of the small models are shared among "
        f"{EAGER_INSTANCE_SETS} freshly built pairs of instances. Micro cases have an A/A "
        "control each: a second plain setup against the first.",
        "- **(c)-(b)**: median over rounds of the difference per call, in microseconds.",
        "- **status**: `ok` when the median ratio is in the band, the counters are equal and "
        "the outputs of a steady-state call agree; `counters differ` when dynamo frames, "
        "CUDA-graph skips or CUDA-graph recordings differ between (b) and (c), or changed while "
        "timed (the timing then includes compilation or recording); `outputs differ` when (c)'s "
        "steady-state outputs are not (b)'s (bitwise; on CUDA within the dtype's tolerance).",
        "- **frames,cg skips,cg recordings**: dynamo frames converted (compilations), "
        "inductor's CUDA-graph skips (`counters['inductor']['cudagraph_skips']`; on a CPU every "
        "reduce-overhead graph is a skip) and CUDA-graph recordings, per variant, whole run.",
        "- **autoreg calls/fwd**: Python functions of the autoreg package entered during one "
        "steady-state eager forward of (c). 0 means no autoreg code runs in forward, so a ratio "
        "away from 1.00 there is noise, not overhead.",
    ]
    kept = sorted(
        {(r["model"], n) for r in report["forward"] for n in r["state_kept_outside_graph"]}
    )
    if kept:
        lines.append(
            "- **reduce-overhead and state written in forward** ("
            + ", ".join(f"{model}.{name}" for model, name in kept)
            + "): forward assigns a CUDA-graph output to the module, which the next replay "
            "overwrites. After every call the caller copies it into a tensor of its own, "
            "allocated once (a fixed address, so the graph's static input does not move and the "
            "graph is not re-recorded), and assigns that back: what a user of "
            '`mode="reduce-overhead"` must do. The copy is timed, for (b) and (c) alike.'
        )
    lines += [
        f"- **{model}** runs different code in (b) by design: {why}"
        for model, why in STRUCTURAL.items()
        if any(r["model"] == model for r in report["forward"])
    ]
    lines.append("")
    if report["hand_notes"]:
        lines += ["## How (b) holds its tensors where it is not plain register_buffer", ""]
        lines += [f"- **{name}**: {note}" for name, note in report["hand_notes"].items()]
        lines.append("")
    errors = sorted(
        {
            (r["model"], r["target"], r["variants"]["plain"]["error"])
            for r in report["move"]
            if r["variants"]["plain"]["error"]
        }
    )
    if errors:
        lines += ["## Errors raised by (a) after .to()", ""]
        lines += [f"- {model} `.to({target})`: `{error}`" for model, target, error in errors]
        lines.append("")
    return "\n".join(lines)


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def check_plotting() -> None:
    """Fail at start-up, not after the run, when the PNG cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise SystemExit(
            f"python -m benchmarks: matplotlib cannot be imported ({error}); it draws the PNG "
            "of the results. Install it (pip install matplotlib, or the [test] extra), or pass "
            "--no-png to write the JSON and markdown only (python -m benchmarks --plot FILE.json "
            "draws the PNG later)."
        ) from None


def plot(report: dict[str, Any], path: Path) -> None:
    """A PNG of the ratios: forward per model and mode, and micro per operation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    forward = [r for r in report["forward"] if not r["error"] and not r["skipped"]]
    micro = report["micro"]
    heights = [max(len(forward), 1), max(len(micro), 1)]
    fig, axes = plt.subplots(
        2, 1, figsize=(10, 2.5 + 0.24 * sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    for ax, rows, names, band, title in (
        (
            axes[0],
            forward,
            [f"{r['label']}  {r['name']}" for r in forward],
            FORWARD_BAND,
            "forward: (c) autoreg.Module / (b) hand-registered nn.Module (grey: A/A control)",
        ),
        (
            axes[1],
            micro,
            [r["label"] for r in micro],
            None,
            "micro: autoreg.Module / nn.Module (red: target, grey x: A/A control)",
        ),
    ):
        ys = list(range(len(rows)))[::-1]
        medians = [r["ratio_median"] for r in rows]
        low = [m - r["ratio_min"] for m, r in zip(medians, rows, strict=True)]
        high = [r["ratio_max"] - m for m, r in zip(medians, rows, strict=True)]
        colors = ["tab:gray" if r.get("control") else "tab:blue" for r in rows]
        for y, m, lo, hi, color in zip(ys, medians, low, high, colors, strict=True):
            ax.errorbar([m], [y], xerr=[[lo], [hi]], fmt="o", color=color, ecolor="0.75")
        for y, r in zip(ys, rows, strict=True):
            if "control_median" in r:  # micro: the case's A/A control
                ax.plot([r["control_median"]], [y], marker="x", color="tab:gray")
        ax.axvline(1.0, color="0.3", linewidth=0.8)
        if band:
            ax.axvspan(*band, color="tab:green", alpha=0.15)
        for y, r in zip(ys, rows, strict=True):
            if r.get("limit") is not None:
                ax.plot([r["limit"]], [y], marker="|", color="tab:red", markersize=14)
        ax.set_yticks(ys, names, fontsize=7)
        ax.set_title(title, fontsize=9)
        spread = [*medians, 1.0]
        ax.set_xlim(min(0.8, min(spread) - 0.05), max(1.2, max(spread) + 0.05))
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"autoreg benchmarks ({report['kind']})\n{_header(report)}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_files(report: dict[str, Any], out: Path, png: bool = True) -> dict[str, Path]:
    """Write ``<device>-<date>[-suffix].{json,md,png}`` under ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    m = report["machine"]
    stem = f"{m['device']}-{m['date']}{report['settings']['file_suffix']}"
    paths = {suffix: out / f"{stem}.{suffix}" for suffix in ("json", "md", "png")}
    paths["json"].write_text(json.dumps(report, indent=1, default=str) + "\n")
    paths["md"].write_text(format_markdown(report))
    if png:
        plot(report, paths["png"])
    else:
        del paths["png"]
    return paths
