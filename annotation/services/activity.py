"""The activity log's one writer: who changed what in a campaign, and when (``Activity``).

Services call ``activity_record`` inside their own transaction, so a change and its record commit
together or not at all. The actor is the caller's when it names one; else the user of the request
being served (``ActorMiddleware``), read when the record is written, so that the user an API token
authenticated inside the view counts too; else nobody: Chorus itself (a Celery task, a rule acting,
a management command). A caller passes ``actor=None`` for what Chorus did on its own during a
request (a rule acting on the label just submitted).
"""

from contextvars import ContextVar

from annotation.models import Activity, Campaign

_request = ContextVar("chorus_request", default=None)


class ActorMiddleware:
    """Makes the request being served known to ``activity_record`` (a context variable: one per thread
    or task, so concurrent requests never see each other's)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def _current_actor():
    user = getattr(_request.get(), "user", None)
    return user if user is not None and user.is_authenticated else None


# activity_record's default actor: the request's user. None, given, means Chorus itself.
REQUEST_USER = object()


def activity_record(
    *,
    campaign: Campaign | None = None,
    campaign_id: int | None = None,
    verb: str,
    summary: str,
    detail: dict | None = None,
    actor=REQUEST_USER,
) -> Activity:
    return Activity.objects.create(
        campaign_id=campaign.pk if campaign is not None else campaign_id,
        actor=_current_actor() if actor is REQUEST_USER else actor,
        verb=verb,
        summary=summary[:300],
        detail=detail or {},
    )


def analysis_receive(sender, *, campaign_id: int, verb: str, summary: str, detail: dict, actor, **kwargs) -> None:
    """``audits.hook.analysis_recorded``'s receiver: the audit's analysis, in the activity log, inside the
    transaction that stored it (signals are sent synchronously)."""
    activity_record(campaign_id=campaign_id, verb=verb, summary=summary, detail=detail, actor=actor)
