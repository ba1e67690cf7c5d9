"""The recorded run as a PNG: who ran where, who was preempted, and what the heat did.

Three panels over one emulated time axis (seconds from the first event):

1. The execution channels of every NPU hardware device, one row each, with a bar
   per job segment coloured by app (the legend names each by its package), and a red
   triangle where a job was preempted; below them, a row for the work the apps ran
   on the CPU (``nnapi-reference``, in their own processes).
2. The die's temperature, with the thermal severity bands shaded behind it.
3. Weight memory in use per hardware device.

matplotlib runs on its Agg backend (no display needed); the figure is closed after
saving, so a long-lived process (the demo) does not accumulate figures.
"""

from __future__ import annotations

import os

from ._trace import Timeline

__all__ = ["plot_timeline"]

#: The sample apps' colours, by the last part of their package (com.example.npuemu.camera).
_APP_COLOURS = {
    "camera": "#1f77b4",
    "assistant": "#9467bd",
    "photos": "#2ca02c",
    "legacy": "#8c564b",
    "rogue": "#d62728",
    "shell": "#7f7f7f",
    "system": "#bcbd22",
}
#: The row of the apps' work on the CPU, after every NPU channel.
_CPU_TRACK = ("~cpu", 0)
_FALLBACK = ["#17becf", "#ff7f0e", "#e377c2", "#aec7e8", "#98df8a", "#c5b0d5"]
_BAND_COLOURS = ["#ffffff", "#fff7d6", "#ffe9b0", "#ffd28a", "#ffb27a", "#ff8f70", "#ff6b6b"]
_BAND_NAMES = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")


def _colour(name: str, assigned: dict[str, str]) -> str:
    if name not in assigned:
        assigned[name] = _APP_COLOURS.get(name.rsplit(".", 1)[-1]) or _FALLBACK[len(assigned) % len(_FALLBACK)]
    return assigned[name]


def plot_timeline(tl: Timeline, out: str | os.PathLike[str], *, title: str | None = None,
                  thresholds_c: list[float] | None = None) -> list[str]:
    """Draw ``tl`` into the PNG ``out``; returns the channel panel's legend, top down."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    o = tl.origin_us
    thresholds_c = thresholds_c if thresholds_c is not None else tl.thresholds_c

    def sec(us: float) -> float:
        return (us - o) / 1e6

    tracks: list[tuple[str, int]] = sorted({s.track for s in tl.segments})
    if tl.cpu:
        tracks.append(_CPU_TRACK)
    row_of = {t: i for i, t in enumerate(tracks)}
    fig, (ax_ch, ax_temp, ax_mem) = plt.subplots(
        3, 1, figsize=(13, 3.2 + 0.45 * max(len(tracks), 1) + 4), sharex=True,
        gridspec_kw={"height_ratios": [max(len(tracks), 1) * 0.6 + 0.8, 2.2, 1.8]},
    )
    assigned: dict[str, str] = {}
    # A job of a millisecond is invisible on a 30 s axis: every bar gets at least a
    # third of a pixel, and apps with short jobs are drawn last, over the long ones.
    min_width = max((tl.end_us - o) / 1e6 / 3000, 1e-6)
    by_track_app: dict[tuple[tuple[str, int], str], list[tuple[float, float]]] = {}
    for seg in tl.segments:
        key = (seg.track, tl.who(seg.uid))
        by_track_app.setdefault(key, []).append((sec(seg.start_us), (seg.end_us - seg.start_us) / 1e6))
    for c in tl.cpu:
        by_track_app.setdefault((_CPU_TRACK, tl.who(c.uid)), []).append((sec(c.start_us), (c.end_us - c.start_us) / 1e6))
    for who in sorted({w for _, w in by_track_app}):
        _colour(who, assigned)  # legend and colours in name order
    order = sorted(by_track_app.items(), key=lambda kv: -sum(d for _, d in kv[1]) / len(kv[1]))
    for (track, who), bars in order:
        bars = [(x, max(d, min_width)) for x, d in bars]
        ax_ch.broken_barh(bars, (row_of[track] - 0.38, 0.76), facecolors=_colour(who, assigned), linewidth=0)
    pauses = [(sec(s.end_us), row_of[s.track] + 0.45) for s in tl.segments if s.end_reason == 2]
    if pauses:
        xs, ys = zip(*pauses)
        ax_ch.scatter(xs, ys, marker="v", s=22, color="#d62728", zorder=3, label="preempted")
    ax_ch.set_yticks(range(len(tracks)))
    labels = []
    for key, ch in tracks:
        if (key, ch) == _CPU_TRACK:
            labels.append("CPU (nnapi-reference)")
            continue
        devices = "/".join(tl.hw_names.get(key, [])) or key
        kind = "ch" if any(s.track == (key, ch) and s.channel >= 0 for s in tl.segments) else "lane"
        labels.append(f"{devices} {kind}{ch}")
    ax_ch.set_yticklabels(labels, fontsize=8)
    ax_ch.set_ylim(-0.7, max(len(tracks), 1) - 0.3 + 0.4)
    ax_ch.invert_yaxis()
    ax_ch.set_ylabel("execution channel")
    handles = [Patch(color=c, label=name) for name, c in assigned.items()]
    if pauses:
        handles.append(ax_ch.scatter([], [], marker="v", color="#d62728", label=f"preempted ({len(pauses)})"))
    ax_ch.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax_ch.set_title(title or "npuemu: NPU channels, heat and weight memory (emulated time)", fontsize=11)
    ax_ch.grid(axis="x", alpha=0.3)

    if tl.temperature:
        ts = [sec(t) for t, _, _ in tl.temperature if t >= o]
        temps = [temp for t, temp, _ in tl.temperature if t >= o]
        top = max(temps + [50.0]) + 5
        if thresholds_c:
            edges = [0.0, *thresholds_c, 200.0]
            for i in range(len(edges) - 1):
                lo, hi = edges[i], min(edges[i + 1], top)
                if lo < top:
                    ax_temp.axhspan(lo, hi, color=_BAND_COLOURS[min(i, 6)], alpha=0.7, zorder=0, linewidth=0)
                    if i > 0:
                        ax_temp.text(1.005, lo, _BAND_NAMES[min(i, 6)], transform=ax_temp.get_yaxis_transform(),
                                     fontsize=7, va="bottom", color="#8a4b00")
        ax_temp.plot(ts, temps, color="#d62728", linewidth=1.4, drawstyle="steps-post", zorder=2)
        ax_temp.set_ylim(min(temps + [25.0]) - 3, top)
    else:
        ax_temp.text(0.5, 0.5, "no temperature samples", transform=ax_temp.transAxes, ha="center", color="grey")
    ax_temp.set_ylabel("die (°C)")
    ax_temp.grid(alpha=0.3)

    mem_colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    for i, (hw, series) in enumerate(sorted(tl.memory.items())):
        key = f"hw{hw}"
        names = "/".join(tl.hw_names.get(key, [])) or key
        xs = [sec(t) for t, _, _ in series]
        ys = [used / 2**30 for _, used, _ in series]
        total = series[-1][2] / 2**30 if series else 0
        end = sec(tl.end_us)
        if xs and end > xs[-1]:
            xs.append(end)
            ys.append(ys[-1])
        ax_mem.plot(xs, ys, drawstyle="steps-post", color=mem_colours[i % 4], linewidth=1.4,
                    label=f"{names} (of {total:.1f} GiB)")
    if tl.memory:
        ax_mem.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    for t, label in tl.marks:
        x = sec(max(t, o))
        for ax in (ax_ch, ax_temp, ax_mem):
            ax.axvline(x, color="#555555", linestyle="--", linewidth=0.8, alpha=0.7, zorder=1)
        ax_ch.annotate(label, (x, 0), xycoords=("data", "axes fraction"), xytext=(3, 3), textcoords="offset points",
                       fontsize=7.5, color="#333333", rotation=0)
    ax_mem.set_ylabel("weights (GiB)")
    ax_mem.set_xlabel("emulated time (s)")
    ax_mem.grid(alpha=0.3)
    ax_mem.set_xlim(left=0)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [h.get_label() for h in handles]

