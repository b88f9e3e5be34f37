"""Refusals of the channels app, meant for the researcher or the worker who asked (``ServiceError``:
a stable ``code`` for API clients, a message for people). Failures of a channel backend's remote calls
are ``annotation.channels.base.ChannelError``, not these."""

from annotation.channels.models import MTurkBonus
from annotation.services import ServiceError


class PublicationRefused(ServiceError):
    code = "publication_refused"
    status = 400


class PanelRefused(ServiceError):
    code = "panel_refused"
    status = 400


class BonusAlreadyGranted(PublicationRefused):
    """The same bonus was already granted: ``bonus`` is the row that was (or will be) paid."""

    code = "bonus_already_granted"
    status = 409

    def __init__(self, message: str, *, bonus: MTurkBonus):
        super().__init__(message)
        self.bonus = bonus
