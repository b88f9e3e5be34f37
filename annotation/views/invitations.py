"""Invitation links: a signed, expiring token naming a campaign. No table: the signature is the record."""
from django.conf import settings
from django.core import signing

from annotation.models import Campaign

_SALT = "chorus.invitation"


def invitation_token(campaign: Campaign) -> str:
    return signing.dumps({"campaign": campaign.pk}, salt=_SALT, compress=True)


def invitation_is_valid(token: str, campaign: Campaign) -> bool:
    """True when the token was signed by us for this campaign and is younger than
    CHORUS_INVITATION_MAX_AGE seconds."""
    try:
        payload = signing.loads(token, salt=_SALT, max_age=settings.CHORUS_INVITATION_MAX_AGE)
    except signing.BadSignature:  # also SignatureExpired, its subclass
        return False
    return payload.get("campaign") == campaign.pk
