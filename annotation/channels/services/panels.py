"""The writes of a link-based panel's participants (Prolific and similar): their session of the panel
link, its label count against the quota, and its completion. Creating the link is a publication
(``publications.publication_create_panel``)."""

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.channels.errors import PanelRefused
from annotation.channels.models import PanelConfig, PanelSession, Publication
from annotation.rows import fetch, table
from annotation.services import worker_get_or_create

_PARTICIPANT_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")


def panel_session_start(
    *, panel: PanelConfig, participant_id: str, study_id: str = "", session_id: str = ""
) -> PanelSession:
    """The participant's session of this panel link, created on first arrival. Refuses (PanelRefused,
    nothing written) a missing or malformed participant id, a study id other than the expected one, and
    a link that is no longer published."""
    publication = panel.publication
    if publication.status != Publication.Status.PUBLISHED:
        raise PanelRefused("This study link is closed.", code="panel_closed")
    if not participant_id:
        raise PanelRefused(
            f"This link must be opened from {publication.channel}: the {panel.participant_param} parameter is missing.",
            code="no_participant",
        )
    for name, value in (("participant id", participant_id), ("study id", study_id), ("session id", session_id)):
        if value and not _PARTICIPANT_ID.fullmatch(value):
            raise PanelRefused(f"The {name} in this link is not valid.", code="bad_participant")
    if panel.expected_study_id and study_id != panel.expected_study_id:
        raise PanelRefused("This link belongs to another study.", code="wrong_study")
    worker = worker_get_or_create(channel=publication.worker_channel, external_id=participant_id)
    try:
        with transaction.atomic(durable=True):
            session, _ = PanelSession.objects.get_or_create(
                panel=panel, worker=worker, session_ref=session_id, defaults={"study_ref": study_id}
            )
    except IntegrityError:  # the same participant's second tab won the race
        session = PanelSession.objects.get(panel=panel, worker=worker, session_ref=session_id)
    return session


def panel_label_counted(*, session: PanelSession) -> PanelSession:
    """One more label in the participant's session (call only for a new label, not a resubmission)."""
    # One statement, its own transaction: it counts and reads the count back (every label of a participant).
    ((session.n_labels,),) = fetch(
        f"UPDATE {table(PanelSession)} SET n_labels = n_labels + 1 WHERE id = %s RETURNING n_labels", [session.pk]
    )
    return session


def panel_session_complete(*, session: PanelSession) -> PanelSession:
    """Mark the participant's session complete (the first time only)."""
    with transaction.atomic(durable=True):
        PanelSession.objects.filter(pk=session.pk, completed_at__isnull=True).update(completed_at=timezone.now())
    session.refresh_from_db()
    return session
