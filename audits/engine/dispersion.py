"""Per-prompt dispersion for the instrument card (Welty, Paritosh & Aroyo 2019, "Metrology for AI",
arXiv:1911.01875, §3: precision as the spread of repeated measurements of one item).

- numeric scales: each prompt's SD of its raw ratings (:func:`audits.engine.instrument.item_precision`);
- categories (binary answers, or labels without numbers): ``1 − modal share``, the share of a prompt's
  labels that differ from its most frequent one (0 when unanimous, at most ``1 − 1/q`` with q
  categories), the categorical counterpart of an SD that needs no distance between categories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audits.engine._util import check_ddof, floats, py
from audits.engine.agreement import value_count_table
from audits.engine.instrument import item_precision

__all__ = ["ItemDispersion", "item_dispersion", "DISPERSIONS"]

DISPERSIONS = {
    "sd": "SD of the prompt's raw labels",
    "one_minus_modal_share": (
        "1 − modal share: the share of the prompt's labels that differ from its most frequent label"
    ),
}


@dataclass(frozen=True)
class ItemDispersion:
    """Each prompt's mean label and dispersion (NaN where undefined), and their summary.

    ``counts`` are the prompts' label counts; ``mean_dispersion`` / ``sd_dispersion`` summarise the
    defined dispersions (the SD with ``ddof``; None when too few). ``item_mean`` is the mean raw
    rating (SD) or the mean scaled label, the share of 1s for binary answers (modal share).
    """

    kind: str
    prompt_ids: np.ndarray
    counts: np.ndarray
    item_mean: np.ndarray
    dispersion: np.ndarray
    mean_dispersion: float | None
    sd_dispersion: float | None
    n_items: int
    n_defined: int
    ddof: int

    def to_dict(self, *, max_points: int = 5000) -> dict:
        """The summary, and up to ``max_points`` (mean, dispersion) pairs (evenly spaced if more)."""
        idx = np.arange(self.n_items)
        if self.n_items > max_points:
            idx = np.linspace(0, self.n_items - 1, max_points).round().astype(np.int64)
        return {
            "kind": self.kind,
            "definition": DISPERSIONS[self.kind],
            "sd": "sample" if self.ddof == 1 else "population",
            "n_items": self.n_items,
            "n_defined": self.n_defined,
            "mean": self.mean_dispersion,
            "sd_of_dispersion": self.sd_dispersion,
            "points": {
                "prompt": py(self.prompt_ids[idx]),
                "n": self.counts[idx].tolist(),
                "mean": floats(self.item_mean[idx]),
                "dispersion": floats(self.dispersion[idx]),
                "sampled": bool(self.n_items > max_points),
            },
        }


def item_dispersion(matrix, *, categorical: bool, ddof: int = 1) -> ItemDispersion:
    """Each prompt's dispersion: the SD of its raw labels (``categorical=False``) or ``1 − modal share``.

    Parameters
    ----------
    matrix : LabelMatrix
    categorical : bool
        True for binary answers and labels without numeric values (forced for the latter).
    ddof : {1, 0}
        For the item SDs and for the SD of the dispersions.

    Returns
    -------
    ItemDispersion

    Notes
    -----
    A prompt with at most ``ddof`` labels has no SD; every labeled prompt has a modal share. The
    summary's SD needs more than ``ddof`` defined dispersions, else it is None.

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(list("abcab"), [1, 1, 1, 2, 2], [1, 1, 0, 0, 0])
    >>> d = item_dispersion(m, categorical=True)
    >>> [round(x, 4) for x in d.dispersion.tolist()], round(d.mean_dispersion, 4)
    ([0.3333, 0.0], 0.1667)
    """
    ddof = check_ddof(ddof)
    if not categorical and matrix.raw_levels is None:
        p = item_precision(matrix, ddof=ddof)
        return ItemDispersion(
            "sd",
            p.prompt_ids,
            matrix.prompt_counts,
            p.item_mean,
            p.item_sd,
            p.mean_sd,
            p.sd_sd,
            p.n_items,
            p.n_items_with_sd,
            ddof,
        )
    table, _ = value_count_table(matrix, values="raw")
    counts = table.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dispersion = 1 - table.max(axis=1, initial=0) / counts
        mean = np.bincount(matrix.prompt, weights=matrix.value, minlength=matrix.n_prompts) / counts
    ok = counts > 0
    d = dispersion[ok]
    return ItemDispersion(
        "one_minus_modal_share",
        matrix.prompt_ids,
        counts,
        mean,
        dispersion,
        float(d.mean()) if d.size else None,
        float(np.std(d, ddof=ddof)) if d.size > ddof else None,
        matrix.n_prompts,
        int(ok.sum()),
        ddof,
    )
