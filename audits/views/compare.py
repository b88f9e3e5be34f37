"""Several campaigns side by side (the study's Table 2), as a page and as CSV.

``?campaigns=slug1,slug2`` (or the form's repeated ``campaigns``) picks among the campaigns the user
may see (``campaigns_visible_to``); a slug that is not one of them is refused with a 404, the same
answer as for a slug that does not exist, so the page never reveals another researcher's campaign.
"""

import csv

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from annotation.selectors import campaigns_visible_to
from audits.selectors import figures


def requested_slugs(values) -> list[str]:
    """The slugs asked for, in order and once each: ``values`` are the query's ``campaigns``, each
    one slug or several joined by commas (the CSV link's form). The API reads them the same way."""
    slugs = []
    for value in values:
        slugs += [s.strip() for s in value.split(",") if s.strip()]
    return list(dict.fromkeys(slugs))


def _chosen(request, visible) -> list:
    slugs = requested_slugs(request.GET.getlist("campaigns"))
    found = {c.slug: c for c in visible.filter(slug__in=slugs)}
    if len(found) != len(slugs):
        raise Http404("No such campaign.")
    return [found[s] for s in slugs]


@login_required
def compare(request):
    visible = campaigns_visible_to(user=request.user).order_by("title", "pk")
    chosen = _chosen(request, visible)
    rows = figures.compare_rows(campaigns=chosen)
    if request.GET.get("format") == "csv":
        return compare_csv(rows)
    context = {
        "visible": visible,
        "chosen": {c.slug for c in chosen},
        "rows": rows,
        "columns": figures.TABLE_COLUMNS,
        "csv_query": ",".join(c.slug for c in chosen),
    }
    return render(request, "audits/compare.html", context)


#: The CSV's number columns: a contract, so a column added later goes at the end (the study's system
#: noise came after the mean accuracies), whatever its place on the page.
CSV_KEYS = [k for k, _ in figures.TABLE_COLUMNS if k != "system_noise_study"] + [
    "mean_others",
    "mean_gold",
    "system_noise_study",
]


def compare_csv(rows) -> HttpResponse:
    """``figures.compare_rows`` as the CSV download, for the page and the API alike."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="chorus-compare.csv"'
    writer = csv.writer(response)
    writer.writerow(["campaign", "title", "watermark", *CSV_KEYS])
    for r in rows:
        numbers = r["row"] or {}
        writer.writerow(
            [r["campaign"].slug, r["campaign"].title, r["watermark"] or ""]
            + ["" if numbers.get(k) is None else numbers[k] for k in CSV_KEYS]
        )
    return response
