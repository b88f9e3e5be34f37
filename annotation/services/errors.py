class ServiceError(Exception):
    """A refusal meant for the user. ``code`` is stable (API clients switch on it); the message is for people."""

    code = "refused"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, fields: dict | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}  # input field -> message, for the API's ``fields``
        if code:
            self.code = code
        if status:
            self.status = status


class CampaignStateError(ServiceError):
    code = "campaign_state"
    status = 409


class LabelRefused(ServiceError):
    code = "label_refused"
    status = 409


class NotLeased(LabelRefused):
    """The lease is not the caller's, or does not exist. Callers that answer "not yours" like "no such
    thing" (annotation.permissions) catch this class: the services check the owner, so views need not
    read the lease first."""

    code = "not_leased"


class LeaseRefused(ServiceError):
    code = "lease_refused"
    status = 409
