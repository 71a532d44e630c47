"""The report: the machine, and the JSON and markdown files (stdout shows the markdown).

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils import collect_env
from torch.utils.benchmark import Compare
from torch.utils.benchmark.utils.common import select_unit

import autoreg

from .timing import Row, ratio_cell
from .zoo import SPECS

__all__ = ["build", "describe_machine", "format_markdown", "write_files"]

SCHEMA = 4  # 4: targets.within_noise, row.noise; not_met leaves within-noise rows out
_REPO = Path(__file__).resolve().parent.parent


def describe_machine(device: str) -> dict[str, Any]:
    """``collect_env``'s description, and what it leaves out: call it after the run's settings."""
    env = collect_env.get_env_info()._asdict()
    lines = (env.get("cpu_info") or "").splitlines()
    now, gpu = datetime.datetime.now(datetime.UTC), None
    if device == "cuda":  # its compute capability and memory too: collect_env names it only
        props = torch.cuda.get_device_properties(0)
        gpu = f"{props.name} (sm {props.major}.{props.minor}, {props.total_memory / 2**30:.0f} GiB)"
    return {
        "device": device,
        "cpu": next((ln.split(":")[1].strip() for ln in lines if ln.startswith("Model name")), "?"),
        "cpu_count": os.cpu_count(),
        "gpu": gpu,
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
    data, timed = [], []
    for row in rows:
        measured = {} if row.error or row.skipped else {s: row.measurement(s) for s in row.times}
        timed.extend(measured.values())
        item = dataclasses.asdict(row)
        item.update(
            status=row.status,
            ratio=row.ratio(row.other),
            control_ratio=row.ratio("control"),
            diff_s=row.diff(row.other),
            median_s={side: m.median for side, m in measured.items()},
            iqr_s={side: m.iqr for side, m in measured.items()},
        )
        data.append(item)
    judged = [item for item in data if item["limit"] is not None or item["failures"]]
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
            "within_noise": [_name(i) for i in judged if i["status"] == "within noise"],
            "not_met": [_name(i) for i in judged if i["status"] not in ("met", "within noise")],
        },
        "duration_s": round(duration_s, 1),
    }


def _name(item: dict[str, Any]) -> str:
    return f"{item['group']}: {item['name']}"


def _header(report: dict[str, Any]) -> str:
    m, env = report["machine"], report["machine"]["collect_env"]
    host = f"{m['cpu']}, {m['cpu_count']} cores"
    gpu = f"{m['gpu']}, driver {env.get('nvidia_driver_version')} (host {host})" if m["gpu"] else ""
    cuda = f", CUDA {env.get('cuda_compiled_version')}" if m["gpu"] else ""
    return (
        f"{gpu or host}; torch {env['torch_version']}{cuda}; Python "
        f"{env['python_version'].split()[0]}; {env.get('os')}; {m['datetime_utc']}; autoreg "
        f"{m['autoreg']} at commit {m['commit']}"
    )


def _signed_time(seconds: float) -> str:
    """``seconds`` with its sign, in the unit ``Compare`` would choose for it."""
    seconds = round(seconds, 9)  # whole nanoseconds
    unit, scale = select_unit(max(abs(seconds), 1e-9))
    return f"{seconds / scale:+.3g} {unit}"


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
        counters = [",".join(map(str, checks["counters"][s].values())) for s in sides]
        parts.append("frames,cg skips,cg recs " + "/".join(counters))
    return "; ".join(parts)


def _ratio_table(report: dict[str, Any]) -> list[str]:
    """The ratios, their noise floor and the targets, as markdown (the times are ``Compare``'s)."""
    items = report["rows"]
    headers = ["group", "row", "ratio median [IQR]", "A/A", "(c)-(b)", "target", "status", "notes"]
    lines = [_md_row(headers), _md_row(["---"] * len(headers))]
    for item in items:
        floor = None if item["control"] else item["control_ratio"] or item["noise"]
        lines.append(_md_row([
            item["group"], item["name"], ratio_cell(item["ratio"]),
            f"{floor[1]:.3f}" if floor else "",
            "" if item["diff_s"] is None else _signed_time(item["diff_s"]),
            "" if item["limit"] is None else f"<= {item['limit']:.2f}",
            item["status"], _notes(item, items),
        ]))  # fmt: skip
    return lines


def format_markdown(report: dict[str, Any]) -> str:
    """The markdown file and stdout: the method, the ratio table, the times, how to read them."""
    s, m = report["settings"], report["machine"]
    tf32 = ", ".join(f"`{name}` = {value}" for name, value in m["tf32"].items())
    names = {i["checks"].get("model") for i in report["rows"] if i["part"] == "forward"}
    specs = [spec for name, spec in SPECS.items() if name in names]
    lines = [
        f"# autoreg benchmarks ({report['kind']}): {m['device']}, {m['date']}",
        "", f"**Machine:** {_header(report)}", "",
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
        "## Ratios and targets", "", *_ratio_table(report), "",
        _targets_line(report["targets"]), "",
        "## Times per call (`torch.utils.benchmark.Compare`: median over rounds)", "",
        "```", report["times"], "```", "",
        "## Reading the numbers", "",
        "- **A/A**: a second, separately built (compiled: separately compiled) (b) timed "
        "against (b) the same way; its distance from 1.00 is the noise floor. Forward: one per "
        "configuration (its first model); micro: one per row.",
        "- **status**: `met` when the median ratio is at most the target; `within noise` when "
        "it is not, but the ratio's interquartile range holds the target or the median is no "
        "farther above the target than the row's A/A median is from 1.00 (the run cannot tell "
        "it from a met target); `MISSED` otherwise.",
        "- **FAILED**: a forward row fails when dynamo frames, CUDA-graph skips "
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


def _targets_line(targets: dict[str, Any]) -> str:
    noise, not_met = len(targets["within_noise"]), len(targets["not_met"])
    return (
        f"{targets['met']}/{targets['of']} targets met, {noise} within noise (A/A), "
        f"{not_met} not met."
    )


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def write_files(report: dict[str, Any], out: Path) -> list[Path]:
    """Write ``<device>-<date>[-suffix].{json,md}`` under ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    m = report["machine"]
    stem = out / f"{m['device']}-{m['date']}{report['settings']['file_suffix']}"
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(report, indent=1, default=str) + "\n")
    paths[1].write_text(format_markdown(report))
    return paths
