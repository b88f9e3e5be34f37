"""Every write of the annotation app. Views, the API, commands and tasks call these; nothing else writes."""

from .accounts import account_create, api_token_get_or_create
from .assignment import (
    LabelAck,
    NothingLeft,
    label_submit,
    label_void,
    lease_acquire,
    lease_acquire_after_label,
    lease_acquire_by_slug,
    lease_heartbeat,
    lease_release,
)
from .campaigns import campaign_copy, campaign_create, campaign_transition, campaign_update
from .errors import CampaignStateError, LabelRefused, LeaseRefused, NotLeased, ServiceError
from .invitations import Acceptance, InvitationTaken, invitation_accept, invitation_revoke, invitations_create
from .prompts import Retirement, import_remove, prompts_check, prompts_import, prompts_retired_set
from .sharing import campaign_share, campaign_unshare
from .workers import worker_for_user, worker_get_or_create

__all__ = [
    "Acceptance",
    "CampaignStateError",
    "InvitationTaken",
    "LabelAck",
    "LabelRefused",
    "LeaseRefused",
    "NothingLeft",
    "NotLeased",
    "Retirement",
    "ServiceError",
    "account_create",
    "api_token_get_or_create",
    "campaign_copy",
    "campaign_create",
    "campaign_share",
    "campaign_transition",
    "campaign_unshare",
    "campaign_update",
    "import_remove",
    "invitation_accept",
    "invitation_revoke",
    "invitations_create",
    "label_submit",
    "label_void",
    "lease_acquire",
    "lease_acquire_after_label",
    "lease_acquire_by_slug",
    "lease_heartbeat",
    "lease_release",
    "prompts_check",
    "prompts_import",
    "prompts_retired_set",
    "worker_for_user",
    "worker_get_or_create",
]
