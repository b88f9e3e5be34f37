"""Every write of the channels app, by job. Views, the API, commands and tasks call these; nothing else
writes.

Web requests only write rows and enqueue work: publishing (``publishing``) and reconciliation
(``reconciliation``) talk to MTurk from Celery (``annotation.channels.tasks``) or the
``mturk_reconcile`` command, never inside a database transaction. Who labels what is never decided
here: the task pages call ``lease_acquire`` and ``label_submit``.

Refusals are in ``annotation.channels.errors``, MTurk's cost arithmetic in ``annotation.channels.pricing``,
the MTurk options check in ``annotation.channels.options`` and the reads in ``annotation.channels.selectors``.
"""

from annotation.channels.models import mturk_client_token  # a pure function beside its model

from .mturk_task import (
    mturk_assignment_labeled,
    mturk_assignment_open,
    mturk_block_lift,
    mturk_block_push,
    mturk_bonus_grant,
    mturk_nothing_left,
)
from .panels import panel_label_counted, panel_session_complete, panel_session_start
from .publications import publication_create_mturk, publication_create_panel, publication_withdraw
from .publishing import PublishOutcome, publication_publish
from .reconciliation import ReconcileReport, mturk_reconcile

__all__ = [
    "PublishOutcome",
    "ReconcileReport",
    "mturk_assignment_labeled",
    "mturk_assignment_open",
    "mturk_block_lift",
    "mturk_block_push",
    "mturk_bonus_grant",
    "mturk_client_token",
    "mturk_nothing_left",
    "mturk_reconcile",
    "panel_label_counted",
    "panel_session_complete",
    "panel_session_start",
    "publication_create_mturk",
    "publication_create_panel",
    "publication_publish",
    "publication_withdraw",
]
