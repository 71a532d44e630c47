"""The report: the machine, the tables, and the JSON, markdown and PNG files.

Times per side are printed by ``torch.utils.benchmark.Compare``; the ratios, their A/A noise floor
and the targets in one table of their own (``Compare`` prints times, not ratios). The machine is
described by ``torch.utils.collect_env``, plus what it does not know: the commit and the autoreg
source measured, the torch threads, the TF32 flags and the date.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import os
import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils import collect_env
from torch.utils.benchmark import Compare

import autoreg

from .timing import Row
from .zoo import LARGE, MODELS

__all__ = ["build", "check_plotting", "describe_machine", "format_text", "plot", "write_files"]

SCHEMA = 3
_REPO = Path(__file__).resolve().parent.parent


def describe_machine(device: str) -> dict[str, Any]:
    """``collect_env``'s description, and what it leaves out: call it after the run's settings."""
    env = collect_env.get_env_info()._asdict()
    lines = (env.get("cpu_info") or "").splitlines()
    now = datetime.datetime.now(datetime.UTC)
    return {
        "device": device,
        "cpu": next((ln.split(":")[1].strip() for ln in lines if ln.startswith("Model name")), "?"),
        "cpu_count": os.cpu_count(),
        "gpu": _gpu() if device == "cuda" else None,
        "torch_threads": torch.get_num_threads(),
        "tf32": {
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        },
        "autoreg": f"{autoreg.__version__} (source {_source_digest()})",
        "commit": _commit(),
        "date": now.date().isoformat(),
        "datetime_utc": now.isoformat(timespec="seconds"),
        "collect_env": env,
    }


def _gpu() -> str:
    """The GPU's name, compute capability and memory (``collect_env`` names it only)."""
    properties = torch.cuda.get_device_properties(0)
    memory = f"{properties.total_memory / 2**30:.0f} GiB"
    return f"{properties.name} (sm {properties.major}.{properties.minor}, {memory})"


def _source_digest() -> str:
    """SHA-256 over autoreg's source files: which core was measured, committed or not."""
    digest, package = hashlib.sha256(), Path(autoreg.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _commit() -> str:
    """HEAD, and whether autoreg/ or benchmarks/ differ from it (read-only git calls)."""
    run = functools.partial(subprocess.run, cwd=_REPO, capture_output=True, text=True)
    try:
        head = run(["git", "rev-parse", "HEAD"]).stdout.strip() or "no git checkout"
        changed = run(["git", "status", "--porcelain", "--", "autoreg", "benchmarks"]).stdout
    except OSError:
        return "no git"
    return f"{head} (+ uncommitted changes)" if changed.strip() else head


def build(
    kind: str, machine: dict[str, Any], settings: dict[str, Any], rows: Sequence[Row],
    notes: list[str], duration_s: float,
) -> dict[str, Any]:  # fmt: skip
    """Everything the files and stdout show, as JSON-ready data."""
    data = []
    for row in rows:
        item = dataclasses.asdict(row)
        timed = not (row.error or row.skipped) and row.times
        item.update(
            status=row.status,
            ratio=row.ratio("control" if row.control else "auto"),
            control_ratio=row.ratio("control"),
            diff_s=row.diff("control" if row.control else "auto"),
            median_s={s: row.measurement(s).median for s in row.times} if timed else {},
            iqr_s={s: row.measurement(s).iqr for s in row.times} if timed else {},
        )
        data.append(item)
    judged = [item for item in data if item["limit"] is not None or item["failures"]]
    timed = [
        row.measurement(s) for row in rows if not (row.error or row.skipped) for s in row.times
    ]
    return {
        "schema": SCHEMA,
        "kind": kind,
        "machine": machine,
        "settings": settings,
        "notes": notes,
        "rows": data,
        "times": str(Compare(timed)).rstrip() if timed else "",
        "targets": {
            "met": sum(item["status"] == "met" for item in judged),
            "of": len(judged),
            "not_met": [f"{i['group']}: {i['name']}" for i in judged if i["status"] != "met"],
        },
        "duration_s": round(duration_s, 1),
    }


def header(report: dict[str, Any]) -> str:
    m, env = report["machine"], report["machine"]["collect_env"]
    host = f"{m['cpu']}, {m['cpu_count']} cores"
    gpu = f"{m['gpu']}, driver {env.get('nvidia_driver_version')} (host {host})" if m["gpu"] else ""
    cuda = f", CUDA {env.get('cuda_compiled_version')}" if m["gpu"] else ""
    return (
        f"{gpu or host}; torch {env['torch_version']}{cuda}; Python "
        f"{env['python_version'].split()[0]}; {env.get('os')}; {m['datetime_utc']}; autoreg "
        f"{m['autoreg']} at commit {m['commit']}"
    )


def _ratio_cell(ratio: list[float] | None) -> str:
    return "" if ratio is None else f"{ratio[1]:.3f} [{ratio[0]:.3f}, {ratio[2]:.3f}]"


def _time_cell(seconds: float | None, signed: bool = False) -> str:
    if seconds is None:
        return ""
    sign = ("-" if seconds < 0 else "+") if signed else ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{sign}{abs(seconds) / scale:.3g} {unit}"
    return f"{sign}{abs(seconds) * 1e9:.0f} ns"


def _notes(item: dict[str, Any], items: list[dict[str, Any]]) -> str:
    """What else a row measured, in a few words."""
    checks = item["checks"]
    if item["error"] or item["skipped"]:
        return (item["error"] or item["skipped"])[:100]
    if item["part"] == "micro":
        case = checks.get("case", "")
        if not case.startswith("to_per_layer"):
            return ""
        note = f"{checks['autoreg_modules_alive']} autoreg modules alive"
        small = next((i for i in items if i["checks"].get("case") == "to_per_layer_100"), None)
        if case == "to_per_layer_2000" and small and small["median_s"]:
            grow = {s: item["median_s"][s] / small["median_s"][s] for s in ("hand", "auto")}
            note += f"; per call vs 100 alive: (b) x{grow['hand']:.2f}, (c) x{grow['auto']:.2f}"
        return note
    parts = [f"autoreg calls/fwd {checks['autoreg_calls']}"] if "autoreg_calls" in checks else []
    if "graph_breaks" in checks:
        sides = list(checks["counters"])
        parts.append("breaks " + "/".join(str(sum(checks["graph_breaks"][s])) for s in sides))
        counters = ["".join(f"{v}," for v in checks["counters"][s].values()) for s in sides]
        parts.append("frames,cg skips,cg recs " + "/".join(c.rstrip(",") for c in counters))
    return "; ".join(parts)


def ratio_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The ratios, their noise floor and the targets: headers and rows."""
    items = report["rows"]
    controls = {i["group"]: i["ratio"] for i in items if i["control"] and i["ratio"]}
    rows = []
    for item in items:
        floor = item["control_ratio"] or (None if item["control"] else controls.get(item["group"]))
        rows.append([
            item["group"], item["name"], _ratio_cell(item["ratio"]),
            f"{floor[1]:.3f}" if floor and not item["control"] else "",
            _time_cell(item["median_s"].get("hand")),
            _time_cell(item["median_s"].get("auto") or item["median_s"].get("control")),
            _time_cell(item["diff_s"], signed=True),
            "" if item["limit"] is None else f"<= {item['limit']:.2f}",
            item["status"], _notes(item, items),
        ])  # fmt: skip
    headers = ["group", "row", "ratio median [IQR]", "A/A", "(b)", "(c)", "(c)-(b)", "target"]
    headers.append("status")
    return [*headers, "notes"], rows


def format_text(report: dict[str, Any]) -> str:
    """The stdout report: times (``Compare``), then ratios and targets."""
    headers, table = ratio_table(report)
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *table, strict=True)
    ]
    lines = [f"autoreg benchmarks ({report['kind']}): {header(report)}", *report["notes"], ""]
    lines += [report["times"], "", "Ratios (c)/(b) and targets"]
    for cells in [headers, ["-" * w for w in widths], *table]:
        lines.append(
            "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        )
    targets = report["targets"]
    lines.append(f"\n{targets['met']}/{targets['of']} targets met; took {report['duration_s']} s")
    if report["settings"].get("interrupted"):
        lines.append(f"INCOMPLETE: {report['settings']['interrupted']}")
    return "\n".join(lines)


def format_markdown(report: dict[str, Any]) -> str:
    """The markdown file: the method, the ratio table, the times, and how to read them."""
    s, m = report["settings"], report["machine"]
    headers, table = ratio_table(report)
    tf32 = ", ".join(f"`{name}` = {value}" for name, value in m["tf32"].items())
    names = {i["checks"].get("model") for i in report["rows"] if i["part"] == "forward"}
    specs = [spec for spec in (*MODELS, LARGE) if spec.name in names]
    lines = [
        f"# autoreg benchmarks ({report['kind']}): {m['device']}, {m['date']}",
        "", f"**Machine:** {header(report)}", "",
        f"**Numerics:** torch threads {m['torch_threads']}; {tf32}.", "",
        f"**Method:** every row times (b), the hand-written `nn.Module`, against (c), the same "
        f"class body on autoreg, in one process, interleaved in rotating palindromes (A B B A, "
        f"B A A B; micro: with a second (b) as A/A control, A B C C B A, ...) of blocks sized "
        f"by `Timer.blocked_autorange`; forward: {s['forward'][0]} rounds of "
        f"{s['forward'][1] * 1000:g} ms blocks, after a lock-step warm-up until the dynamo "
        f"and CUDA-graph counters stop changing; micro: {s['micro'][0]} rounds of "
        f"{s['micro'][1] * 1000:g} ms blocks ({s['heavy'][0]} of {s['heavy'][1] * 1000:g} ms "
        f"for whole models), run first, before anything is compiled. Clock: {s['clock']}. "
        f"Ratio: median over rounds of (c)/(b) [interquartile range]. A target is met when the "
        f"median is at most its limit. Command: `{s['command']}`; took {report['duration_s']} s.",
        "", *(f"- {note}" for note in report["notes"]), "",
        "## Ratios and targets", "", _md_row(headers), _md_row(["---"] * len(headers)),
        *(_md_row(row) for row in table), "",
        f"{report['targets']['met']}/{report['targets']['of']} targets met.", "",
        "## Times per call (`torch.utils.benchmark.Compare`: median over rounds)", "",
        "```", report["times"], "```", "",
        "## Reading the numbers", "",
        "- **A/A**: a second, separately built (compiled: separately compiled) (b) timed "
        "against (b) the same way; its distance from 1.00 is the noise floor. Forward: one per "
        "configuration (its first model); micro: one per row.",
        "- **status**: forward rows also fail (`FAILED`) when dynamo frames, CUDA-graph skips "
        "or CUDA-graph recordings differ between (b) and (c) or change while timed, when (c) "
        "has more graph breaks, or when (c)'s steady-state outputs are not (b)'s (bitwise; on "
        "CUDA within tolerance where a kernel is nondeterministic).",
        "- **autoreg calls/fwd**: Python functions of autoreg entered during one steady-state "
        "eager forward of (c); 0 means no autoreg code runs in forward.",
        *(["", "## Models", ""] if specs else []),
        *(f"- **{spec.name}**: {spec.about} {spec.hand_note}." if spec.hand_note
          else f"- **{spec.name}**: {spec.about}" for spec in specs),
        "",
    ]  # fmt: skip
    if s.get("interrupted"):
        lines.insert(2, f"**Incomplete:** {s['interrupted']}.\n")
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
    """A PNG of the ratios: median and IQR per row, its A/A (grey x) and its target (red |)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [i for i in report["rows"] if i["ratio"] and not i["control"]]
    controls = {i["group"]: i["ratio"] for i in report["rows"] if i["control"] and i["ratio"]}
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.22 * len(items)))
    for y, item in enumerate(reversed(items)):
        q1, median, q3 = item["ratio"]
        ax.errorbar([median], [y], xerr=[[median - q1], [q3 - median]], fmt="o", color="tab:blue")
        ax.annotate(f"{median:.3f}", (q3, y), xytext=(4, -2), textcoords="offset points", size=6)
        floor = item["control_ratio"] or controls.get(item["group"])
        if floor:
            ax.plot([floor[1]], [y], marker="x", color="tab:gray")
        if item["limit"] is not None:
            ax.plot([item["limit"]], [y], marker="|", color="tab:red", markersize=12)
    ax.set_yticks(range(len(items)), [f"{i['group']}  {i['name']}" for i in reversed(items)])
    ax.tick_params(axis="y", labelsize=7)
    ax.axvline(1.0, color="0.3", linewidth=0.8)
    ax.set_xscale("log")
    title = textwrap.fill(
        f"autoreg / hand-written, median [IQR] ({report['kind']}): {header(report)}"
    )
    ax.set_title(title, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_files(report: dict[str, Any], out: Path, png: bool = True) -> list[Path]:
    """Write ``<device>-<date>[-suffix].{json,md,png}`` under ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    m = report["machine"]
    stem = out / f"{m['device']}-{m['date']}{report['settings']['file_suffix']}"
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(report, indent=1, default=str) + "\n")
    paths[1].write_text(format_markdown(report))
    if png:
        paths.append(stem.with_suffix(".png"))
        plot(report, paths[2])
    return paths
