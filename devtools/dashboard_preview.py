"""A picture of the Grafana dashboard for the docs: its panels laid out from `dashboard.json` (titles, types,
units, grid positions exactly as Grafana places them), each drawn with an illustrative series. Not Grafana, and
not measured data: the shapes show what each panel is for (a freeze at night, a restore in the morning).

    python -m devtools.dashboard_preview out.html     # then any browser's screenshot, e.g. headless chromium
"""

from __future__ import annotations

import html
import json
import math
import sys
from pathlib import Path

from devtools.metrics_component import DASHBOARD

ROW_PX, COL_PCT = 30, 100 / 24
#: a day in 15-minute steps: held from 19:00 to 07:00, as a night-and-weekend policy does
STEPS = 96


def _held(step: int) -> bool:
    hour = step / 4
    return hour >= 19 or hour < 7


def _series(title: str, step: int) -> float:
    held = _held(step)
    if "Time since" in title:
        return 60 + (step % 40) * 15
    if "Exit code" in title or "GitOps" in title:
        return 1.0 if 60 <= step < 64 else 0.0
    if "Pods still" in title:
        return 4.0 if step in (76, 77) else 0.0
    if "Woken" in title:
        return 1.0 if held and 84 <= step < 92 else 0.0
    if "restoring" in title:
        return 2.0 if step in (28, 29) else 0.0
    # a developer opens a held namespace's URL twice in the evening: two wakes, each ready in about 4 s
    if "request to ready" in title:
        return 4.0 + 0.3 * math.sin(step) if step in (80, 81, 88, 89) else 0.0
    if "Wakes by the waker" in title:
        return 1.0 if step in (80, 88) else 0.0
    base = {"Held namespaces": 3, "Freed CPU requests": 4.25, "Freed memory requests": 2.86,
            "Freed GPUs and other extended resources": 1, "Freed Pods": 10}.get(title, 1.0)
    return base * (1 + 0.05 * math.sin(step / 5)) if held else 0.0


def _svg(title: str) -> str:
    values = [_series(title, s) for s in range(STEPS)]
    top = max(values) or 1.0
    points = " ".join(f"{i * 300 / (STEPS - 1):.1f},{110 - v / top * 100:.1f}" for i, v in enumerate(values))
    return (f'<svg viewBox="0 0 300 115" preserveAspectRatio="none"><polyline points="{points}" fill="none" '
            f'stroke="#73bf69" stroke-width="2"/><line x1="0" y1="110" x2="300" y2="110" stroke="#444"/></svg>')


def _body(panel: dict) -> str:
    title = panel["title"]
    if panel["type"] == "stat":
        value = "3060" if "Core-hours" in title else "$103.10"
        return f'<div class="stat">{value}</div>'
    if panel["type"] == "table":
        rows = "".join(f"<tr><td>{p}</td><td>{r}</td><td>{v}</td></tr>" for p, r, v in
                       (("shop-release", "Reconciled", 1), ("nightly", "PartialFailure", 0), ("demo", "Suspended", 0)))
        return f"<table><tr><th>policy</th><th>reason</th><th>Ready</th></tr>{rows}</table>"
    return _svg(title)


def page(dashboard: dict) -> str:
    panels = []
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        style = (f"left:{grid['x'] * COL_PCT:.3f}%;width:calc({grid['w'] * COL_PCT:.3f}% - 8px);"
                 f"top:{grid['y'] * ROW_PX}px;height:{grid['h'] * ROW_PX - 8}px")
        if panel["type"] == "row":
            panels.append(f'<div class="row" style="{style}">{html.escape(panel["title"])}</div>')
            continue
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        panels.append(f'<div class="panel" style="{style}"><div class="title">{html.escape(panel["title"])}'
                      f'<span class="unit">{html.escape(unit)}</span></div>{_body(panel)}</div>')
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * ROW_PX
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ background:#111217; color:#ccccdc; font:13px sans-serif; margin:0; padding:12px; }}
h1 {{ font-size:16px; margin:0 0 10px; }} .note {{ color:#8e8e9e; font-size:11px; }}
.board {{ position:relative; height:{height}px; }}
.panel, .row {{ position:absolute; box-sizing:border-box; }}
.panel {{ background:#181b1f; border:1px solid #2c3235; border-radius:3px; padding:6px; display:flex;
          flex-direction:column; }}
.row {{ font-weight:bold; border-bottom:1px solid #2c3235; }}
.title {{ font-weight:600; margin-bottom:4px; }} .unit {{ float:right; color:#8e8e9e; font-weight:normal; }}
svg {{ flex:1; width:100%; }} .stat {{ flex:1; display:flex; align-items:center; justify-content:center;
          font-size:44px; color:#73bf69; font-weight:bold; }}
table {{ width:100%; border-collapse:collapse; }} td, th {{ border-bottom:1px solid #2c3235; padding:3px;
          text-align:left; }}
</style></head><body><h1>{html.escape(dashboard["title"])}
<span class="note">layout from dashboard.json; illustrative series, not measured</span></h1>
<div class="board">{"".join(panels)}</div></body></html>"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    Path(args[0]).write_text(page(json.loads(DASHBOARD.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
