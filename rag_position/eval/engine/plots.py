"""PNG plots for the report, drawn with matplotlib's Agg canvas (no pyplot, no global state)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_position.eval.engine.common import EvalConfigError

Point = tuple[float, float, float | None, float | None]
"""``(x, y, low, high)``; ``low``/``high`` ``None`` when there is no interval."""


def require_matplotlib() -> None:
    """Every task draws its plots: refuse to start a run that could not finish them."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise EvalConfigError(
            "the eval suite draws its plots with matplotlib, which is not installed: "
            "pip install 'rag-position[eval]'"
        ) from None


@dataclass
class Panel:
    """One axes: curves (with shaded intervals), horizontal reference lines, labels."""

    title: str
    xlabel: str
    ylabel: str
    curves: Mapping[str, Sequence[Point]]
    hlines: Mapping[str, Point] = field(default_factory=dict)
    percent: bool = True
    xticks: Sequence[float] | None = None


def plot_panels(path: Path, panels: Sequence[Panel], *, suptitle: str | None = None) -> Path:
    """Draw ``panels`` side by side into the PNG at ``path``; return ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * len(panels), 3.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        _draw(ax, panel)
    if suptitle:
        fig.suptitle(suptitle)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def plot_bars(
    path: Path,
    groups: Mapping[str, Mapping[str, Point]],
    *,
    title: str,
    ylabel: str = "accuracy (%)",
) -> Path:
    """Grouped bars with interval whiskers: ``groups[setting][strategy] = (_, y, lo, hi)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = list(dict.fromkeys(name for bars in groups.values() for name in bars))
    fig = Figure(figsize=(max(6.0, 0.55 * len(labels) * max(1, len(groups)) + 2), 4.2), dpi=110)
    fig.set_layout_engine("constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    width = 0.8 / max(1, len(groups))
    for g, (setting, bars) in enumerate(groups.items()):
        xs: list[float] = []
        ys: list[float] = []
        errs: list[list[float]] = [[], []]
        for i, name in enumerate(labels):
            if name not in bars:
                continue
            _, y, lo, hi = bars[name]
            xs.append(i + (g - (len(groups) - 1) / 2) * width)
            ys.append(100 * y)
            errs[0].append(100 * (y - lo) if lo is not None else 0.0)
            errs[1].append(100 * (hi - y) if hi is not None else 0.0)
        ax.bar(xs, ys, width=width, yerr=errs, capsize=3, label=setting)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    if len(groups) > 1:
        ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def _draw(ax: Any, panel: Panel) -> None:
    scale = 100.0 if panel.percent else 1.0
    for name, points in panel.curves.items():
        pts = sorted(points)
        xs = [p[0] for p in pts]
        ys = [scale * p[1] for p in pts]
        (line,) = ax.plot(xs, ys, marker="o", label=name)
        if all(p[2] is not None and p[3] is not None for p in pts):
            lows = [scale * float(p[2] if p[2] is not None else 0) for p in pts]
            highs = [scale * float(p[3] if p[3] is not None else 0) for p in pts]
            ax.fill_between(xs, lows, highs, alpha=0.15, color=line.get_color())
    for i, (name, (_, y, lo, hi)) in enumerate(panel.hlines.items()):
        style = ("--", ":", "-.")[i % 3]
        line = ax.axhline(scale * y, linestyle=style, color="gray", label=name)
        if lo is not None and hi is not None:
            ax.axhspan(scale * lo, scale * hi, alpha=0.07, color=line.get_color())
    if panel.xticks is not None:
        ax.set_xticks(list(panel.xticks))
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    if panel.percent:
        ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
