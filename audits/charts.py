"""Server-side inline SVG charts for printable pages (the instrument card and its exports).

Why SVG strings rather than the vendored Chart.js: the card is exported as a self-contained HTML file
for a paper's appendix, must print, and is served under a CSP with no inline scripts, so charts have
to be static markup. Every chart:

- is one ``<svg>`` element with ``role="img"``, a ``<title>`` (its accessible name) and a ``viewBox``
  with ``width="100%"``, so it scales down on phones and keeps its proportions (no ``style``
  attribute: the CSP allows no inline styles; pages cap the width in their own CSS);
- uses no external assets, fonts or CSS classes (presentation attributes only), dark strokes and
  light fills, so it reads the same on screen, on paper and in grayscale;
- escapes every piece of text it is given;
- draws a framed "no data" chart when there is nothing finite to plot, never raises for empty input.

Quartiles in :func:`box_plot_svg` are numpy's default (linear interpolation) percentiles, so they
match ``numpy.percentile(values, [25, 50, 75])``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

import numpy as np

WIDTH = 640
HEIGHT = 400
# Room for tick labels on the left and axis titles below/left.
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 36, 56
INK = "#222"
MUTED = "#666"
ACCENT = "#2856c8"
BAND_FILL = "#9db4e8"
FONT = 'font-family="system-ui, sans-serif"'


def _text(value) -> str:
    return escape(str(value), quote=True)


def _fmt(value: float) -> str:
    """Short tick label: integers without decimals, otherwise 3 significant digits."""
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}"


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (Heckbert's "nice numbers" for graph labels, 1990)."""
    if hi == lo:
        lo, hi = lo - 1.0, hi + 1.0
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 10))
    return ticks


class _Frame:
    """Maps data coordinates to the plot area and draws axes, ticks and titles."""

    def __init__(self, xs: Sequence[float] | None, ys: Sequence[float]):
        self.y_ticks = _nice_ticks(min(ys), max(ys))
        self.y_lo, self.y_hi = self.y_ticks[0], self.y_ticks[-1]
        self.x_ticks = _nice_ticks(min(xs), max(xs)) if xs else None
        if self.x_ticks:
            self.x_lo, self.x_hi = self.x_ticks[0], self.x_ticks[-1]
        self.left, self.right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
        self.top, self.bottom = MARGIN_TOP, HEIGHT - MARGIN_BOTTOM

    def x(self, value: float) -> float:
        span = self.x_hi - self.x_lo
        return round(self.left + (value - self.x_lo) / span * (self.right - self.left), 2)

    def y(self, value: float) -> float:
        span = self.y_hi - self.y_lo
        return round(self.bottom - (value - self.y_lo) / span * (self.bottom - self.top), 2)

    def axes(self, *, x_label: str, y_label: str) -> list[str]:
        parts = [
            f'<rect x="{self.left}" y="{self.top}" width="{self.right - self.left}" '
            f'height="{self.bottom - self.top}" fill="none" stroke="{MUTED}" stroke-width="1"/>'
        ]
        for tick in self.y_ticks:
            y = self.y(tick)
            parts.append(
                f'<line x1="{self.left - 4}" y1="{y}" x2="{self.right}" y2="{y}" '
                f'stroke="#ddd" stroke-width="1"/>'
                f'<text x="{self.left - 6}" y="{y + 4}" text-anchor="end" font-size="12" '
                f'fill="{INK}" {FONT}>{_text(_fmt(tick))}</text>'
            )
        for tick in self.x_ticks or ():
            x = self.x(tick)
            parts.append(
                f'<line x1="{x}" y1="{self.bottom}" x2="{x}" y2="{self.bottom + 4}" '
                f'stroke="{MUTED}" stroke-width="1"/>'
                f'<text x="{x}" y="{self.bottom + 18}" text-anchor="middle" font-size="12" '
                f'fill="{INK}" {FONT}>{_text(_fmt(tick))}</text>'
            )
        mid_x = (self.left + self.right) / 2
        mid_y = (self.top + self.bottom) / 2
        parts.append(
            f'<text x="{mid_x}" y="{HEIGHT - 10}" text-anchor="middle" font-size="13" '
            f'fill="{INK}" {FONT}>{_text(x_label)}</text>'
            f'<text x="16" y="{mid_y}" text-anchor="middle" font-size="13" fill="{INK}" {FONT} '
            f'transform="rotate(-90 16 {mid_y})">{_text(y_label)}</text>'
        )
        return parts


def _svg(title: str, body: Iterable[str], *, description: str) -> str:
    heading = (
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold" '
        f'fill="{INK}" {FONT}>{_text(title)}</text>'
        if title
        else ""
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="100%" preserveAspectRatio="xMidYMid meet">'
        f"<title>{_text(title or description)}</title>"
        f"<desc>{_text(description)}</desc>"
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>'
        f"{heading}{''.join(body)}</svg>"
    )


def _no_data(title: str, description: str) -> str:
    body = [
        f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{WIDTH - MARGIN_LEFT - MARGIN_RIGHT}" '
        f'height="{HEIGHT - MARGIN_TOP - MARGIN_BOTTOM}" fill="none" stroke="{MUTED}" '
        f'stroke-dasharray="4 4"/>'
        f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="16" '
        f'fill="{MUTED}" {FONT}>No data</text>'
    ]
    return _svg(title, body, description=f"{description}: no data")


def _finite_pairs(rows, width: int) -> list[tuple[float, ...]]:
    """Rows of ``width`` numbers with every value finite (None/NaN/inf rows are dropped)."""
    kept = []
    for row in rows or ():
        try:
            values = tuple(float(v) for v in row)
        except (TypeError, ValueError):
            continue
        if len(values) == width and all(math.isfinite(v) for v in values):
            kept.append(values)
    return kept


def scatter_svg(
    points: Sequence[tuple[float, float]],
    *,
    x_label: str,
    y_label: str,
    title: str = "",
    line: Sequence[tuple[float, float]] | None = None,
    band: Sequence[tuple[float, float, float]] | None = None,
) -> str:
    """A scatter plot of ``points`` with an optional fitted ``line`` and a shaded confidence ``band``.

    ``line`` is drawn as a polyline through its (x, y) points in the order given; ``band`` is a
    sequence of (x, lo, hi) drawn as a filled area between the lo and hi curves, sorted by x.
    Non-finite points are left out; with no finite point the chart says "No data".
    """
    pts = _finite_pairs(points, 2)
    curve = _finite_pairs(line, 2)
    area = sorted(_finite_pairs(band, 3))
    description = f"Scatter plot of {y_label} against {x_label}, {len(pts)} points"
    if not pts:
        return _no_data(title, description)
    xs = [p[0] for p in pts] + [p[0] for p in curve] + [b[0] for b in area]
    ys = [p[1] for p in pts] + [p[1] for p in curve] + [v for b in area for v in b[1:]]
    frame = _Frame(xs, ys)
    body = frame.axes(x_label=x_label, y_label=y_label)
    if area:
        outline = [f"{frame.x(x)},{frame.y(hi)}" for x, _, hi in area]
        outline += [f"{frame.x(x)},{frame.y(lo)}" for x, lo, _ in reversed(area)]
        body.append(f'<polygon points="{" ".join(outline)}" fill="{BAND_FILL}" fill-opacity="0.45" stroke="none"/>')
    radius = 3 if len(pts) <= 500 else 1.8
    body.append(f'<g fill="{ACCENT}" fill-opacity="0.6" stroke="{INK}" stroke-width="0.4">')
    body.extend(f'<circle cx="{frame.x(x)}" cy="{frame.y(y)}" r="{radius}"/>' for x, y in pts)
    body.append("</g>")
    if curve:
        body.append(
            f'<polyline points="{" ".join(f"{frame.x(x)},{frame.y(y)}" for x, y in curve)}" '
            f'fill="none" stroke="{INK}" stroke-width="2"/>'
        )
    return _svg(title, body, description=description)


def tukey_box(values: Sequence[float]) -> dict:
    """Tukey's box-plot numbers: quartiles (numpy's linear percentiles), whiskers to the furthest
    point within 1.5 IQR of the box, and the points beyond them as outliers."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    data = data[np.isfinite(data)]
    if data.size == 0:
        return {"n": 0}
    q1, median, q3 = (float(v) for v in np.percentile(data, [25, 50, 75]))
    fence = 1.5 * (q3 - q1)
    inside = data[(data >= q1 - fence) & (data <= q3 + fence)]
    return {
        "n": int(data.size),
        "q1": q1,
        "median": median,
        "q3": q3,
        "whisker_lo": float(inside.min()),
        "whisker_hi": float(inside.max()),
        "outliers": sorted(float(v) for v in data[(data < q1 - fence) | (data > q3 + fence)]),
    }


def box_plot_svg(groups: Sequence[tuple[str, Sequence[float]]], *, y_label: str, title: str = "") -> str:
    """Side-by-side Tukey box plots, one per (label, values) group, with n under each box.

    Boxes span the quartiles with a line at the median; whiskers reach the furthest value within
    1.5 IQR of the box; values beyond are drawn as dots. Groups with no finite value keep their slot
    and show n = 0; with no finite value at all the chart says "No data".
    """
    boxes = [(str(label), tukey_box(values)) for label, values in groups or ()]
    description = f"Box plots of {y_label} for {len(boxes)} groups"
    drawn = [box for _, box in boxes if box["n"]]
    if not drawn:
        return _no_data(title, description)
    ys = [v for box in drawn for v in (box["whisker_lo"], box["whisker_hi"], *box["outliers"])]
    frame = _Frame(None, ys)
    body = frame.axes(x_label="", y_label=y_label)
    slot = (frame.right - frame.left) / len(boxes)
    half = min(slot * 0.3, 40)
    for index, (label, box) in enumerate(boxes):
        cx = round(frame.left + slot * (index + 0.5), 2)
        body.append(
            f'<text x="{cx}" y="{frame.bottom + 18}" text-anchor="middle" font-size="12" '
            f'fill="{INK}" {FONT}>{_text(label)}</text>'
            f'<text x="{cx}" y="{frame.bottom + 34}" text-anchor="middle" font-size="11" '
            f'fill="{MUTED}" {FONT}>n = {box["n"]}</text>'
        )
        if not box["n"]:
            continue
        q1, q3, med = frame.y(box["q1"]), frame.y(box["q3"]), frame.y(box["median"])
        lo, hi = frame.y(box["whisker_lo"]), frame.y(box["whisker_hi"])
        body.append(
            f'<g data-label="{_text(label)}" data-q1="{box["q1"]!r}" data-median="{box["median"]!r}" '
            f'data-q3="{box["q3"]!r}" stroke="{INK}" stroke-width="1.5">'
            f'<line x1="{cx}" y1="{lo}" x2="{cx}" y2="{q1}"/>'
            f'<line x1="{cx}" y1="{q3}" x2="{cx}" y2="{hi}"/>'
            f'<line x1="{cx - half / 2}" y1="{lo}" x2="{cx + half / 2}" y2="{lo}"/>'
            f'<line x1="{cx - half / 2}" y1="{hi}" x2="{cx + half / 2}" y2="{hi}"/>'
            f'<rect x="{cx - half}" y="{q3}" width="{2 * half}" height="{max(q1 - q3, 0.5)}" '
            f'fill="{BAND_FILL}" fill-opacity="0.6"/>'
            f'<line x1="{cx - half}" y1="{med}" x2="{cx + half}" y2="{med}" stroke-width="2.5"/>'
        )
        body.extend(f'<circle cx="{cx}" cy="{frame.y(v)}" r="2.5" fill="none"/>' for v in box["outliers"])
        body.append("</g>")
    return _svg(title, body, description=description)
