"""A campaign's groups side by side, and the study's figures (Figs. 4–6) as inline SVG
(``audits.charts``). Managers only (``campaign_for_user``: 404 for anyone else)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.safestring import mark_safe

from annotation.permissions import campaign_for_request
from audits import charts
from audits.selectors import figures
from audits.selectors.full import full_audit_skip_reason


@login_required
def groups(request, slug):
    campaign = campaign_for_request(request, slug)
    skip_reason = full_audit_skip_reason(campaign)  # free text: no label matrix to split by group
    table = None if skip_reason else figures.group_table(campaign=campaign)
    context = {"campaign": campaign, "table": table, "skip_reason": skip_reason, "columns": figures.TABLE_COLUMNS}
    return render(request, "audits/groups.html", context)


@login_required
def figures_page(request, slug):
    campaign = campaign_for_request(request, slug)
    data = figures.figures_data(campaign=campaign)
    return render(request, "audits/figures.html", {"campaign": campaign, "data": data, "svg": _svgs(data)})


def _svgs(data) -> dict | None:
    """The figures drawn by ``audits.charts`` (which escapes every text it is given)."""
    if data is None:
        return None
    boxes = [("others", data["boxes"])] + ([("gold", data["boxes_gold"])] if data["boxes_gold"] else [])
    return {
        "boxes": [
            mark_safe(
                charts.box_plot_svg(
                    [(f"≥ {t}", values) for t, values in series],
                    y_label=f"accuracy vs {ref}",
                    title=f"Accuracy against {ref} by minimum labels per worker",
                )
            )
            for ref, series in boxes
        ],
        "regressions": [{**r, "svg": _regression_svg(r)} for r in data["regressions"]],
        "gold_vs_others": mark_safe(
            charts.scatter_svg(
                data["gold_vs_others"],
                x_label="accuracy vs gold",
                y_label="accuracy vs others",
                title="Each worker: accuracy against gold and against the others",
                line=_diagonal(data["gold_vs_others"]),
            )
        )
        if data["gold_vs_others"]
        else None,
    }


def _regression_svg(r: dict) -> str:
    """One Fig. 6 panel: the workers' points, the least-squares line and its 95 % band."""
    against = "gold" if r["reference"] == "gold" else "others"
    return mark_safe(
        charts.scatter_svg(
            r["points"],
            x_label=f"{r['name']} on the worker's prompts",
            y_label=f"accuracy vs {against}",
            title=f"Accuracy vs {against} against {r['name'].lower()}",
            line=r["line"],
            band=r["band"],
        )
    )


def _diagonal(points) -> list | None:
    """The line y = x over the points' range: a worker on it agrees with the others as with gold."""
    values = [v for p in points for v in p]
    return [(min(values), min(values)), (max(values), max(values))] if values else None
