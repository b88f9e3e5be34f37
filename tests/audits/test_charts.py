"""Inline SVG charts: well-formed, accessible, escaped, and numerically faithful (no database)."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from audits.charts import box_plot_svg, scatter_svg, tukey_box

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img"
    assert root.get("viewBox") == "0 0 640 400"
    assert root.find(f"{SVG}title").text
    return root


def test_scatter_is_valid_xml_with_one_circle_per_finite_point():
    points = [(0, 1), (1, 2.5), (2, math.nan), (3, 4), (None, 2)]
    root = parse(scatter_svg(points, x_label="mean", y_label="SD", title="Precision"))
    circles = root.findall(f".//{SVG}circle")
    assert len(circles) == 3
    assert root.find(f"{SVG}title").text == "Precision"
    # Higher y is drawn higher up (smaller SVG y).
    ys = [float(c.get("cy")) for c in circles]
    assert ys[0] > ys[1] > ys[2]


def test_scatter_draws_line_and_band():
    points = [(x, 2 * x + 1) for x in range(10)]
    line = [(0, 1), (9, 19)]
    band = [(9, 17, 21), (0, 0, 2)]
    root = parse(scatter_svg(points, x_label="x", y_label="y", line=line, band=band))
    polyline = root.find(f".//{SVG}polyline")
    assert len(polyline.get("points").split()) == 2
    polygon = root.find(f".//{SVG}polygon")
    assert len(polygon.get("points").split()) == 4  # hi curve out, lo curve back


def test_text_is_escaped():
    hostile = '<script>alert("x")</script> & "q"'
    svg = scatter_svg([(1, 2)], x_label=hostile, y_label=hostile, title=hostile)
    assert "<script>" not in svg
    root = parse(svg)
    assert root.find(f"{SVG}title").text == hostile
    box = box_plot_svg([(hostile, [1, 2, 3])], y_label="y", title=hostile)
    assert "<script>" not in box
    texts = [t.text for t in parse(box).iter(f"{SVG}text")]
    assert hostile in texts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_box_quartiles_match_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=37).tolist() + [8.0, -9.0]
    stats = tukey_box(values)
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    assert (stats["q1"], stats["median"], stats["q3"]) == pytest.approx((q1, med, q3))
    fence = 1.5 * (q3 - q1)
    inside = [v for v in values if q1 - fence <= v <= q3 + fence]
    assert stats["whisker_lo"] == min(inside) and stats["whisker_hi"] == max(inside)
    assert stats["outliers"] == sorted(v for v in values if v not in inside)
    assert 8.0 in stats["outliers"] and -9.0 in stats["outliers"]
    root = parse(box_plot_svg([("a", values)], y_label="y"))
    group = root.find(f".//{SVG}g[@data-label='a']")
    assert float(group.get("data-q1")) == pytest.approx(q1)
    assert float(group.get("data-median")) == pytest.approx(med)
    assert float(group.get("data-q3")) == pytest.approx(q3)
    assert len(group.findall(f"{SVG}circle")) == len(stats["outliers"])


def test_box_shows_n_under_each_box():
    root = parse(box_plot_svg([("one", [1, 2, 3]), ("two", [5] * 7), ("none", [])], y_label="y"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "n = 3" in texts and "n = 7" in texts and "n = 0" in texts


@pytest.mark.parametrize(
    "svg",
    [
        scatter_svg([], x_label="x", y_label="y", title="Empty"),
        scatter_svg([(math.nan, 1)], x_label="x", y_label="y"),
        box_plot_svg([], y_label="y"),
        box_plot_svg([("a", []), ("b", [math.inf])], y_label="y"),
    ],
)
def test_empty_input_gives_no_data_chart(svg):
    root = parse(svg)
    assert "No data" in [t.text for t in root.iter(f"{SVG}text")]
    assert root.find(f".//{SVG}circle") is None


def test_constant_values_do_not_divide_by_zero():
    root = parse(scatter_svg([(1, 1), (1, 1)], x_label="x", y_label="y"))
    for circle in root.iter(f"{SVG}circle"):
        assert math.isfinite(float(circle.get("cx"))) and math.isfinite(float(circle.get("cy")))
    parse(box_plot_svg([("a", [2, 2, 2])], y_label="y"))
