"""Who may see and do what, for both the HTML views and the API.

The visibility selectors live in ``annotation.selectors`` (``campaigns_visible_to``,
``campaign_for_user``, ``campaign_for_workers``, ``lease_for_worker``); this module adds the rules
those do not cover. tests/api/test_permission_matrix.py checks every URL against them.

Roles:

* anonymous: the sign-in and sign-up pages, a launched campaign's front page, the API schema and docs;
* worker (any signed-in user): asks for work in a launched campaign by its slug (a campaign never
  launched is its managers' alone: ``campaigns_for_workers``), sees only the prompt leased
  to them and their own labels, never other workers' labels, gold labels or audits;
* researcher: any signed-in user who creates a campaign owns it, and manages those they own or that
  are shared with them (collaborators); only the owner (or staff) changes who it is shared with;
* staff: everything.

A campaign or lease somebody may not see answers 404, exactly like one that does not exist, so its
slug or id leaks nothing. A campaign they see but may not change in this way answers 403.
"""

from django.core.exceptions import PermissionDenied

from annotation.models import Campaign
from annotation.selectors import campaign_for_user


def is_campaign_owner(*, user, campaign: Campaign) -> bool:
    """Owner's rights (share the campaign, spend its money): its owner and staff, not collaborators."""
    return user.is_staff or campaign.owner_id == user.pk


def campaign_for_owner(*, user, slug: str) -> Campaign:
    """The campaign, for whoever may change its collaborators (owner, staff); 403 for collaborators,
    404 for everybody else."""
    campaign = campaign_for_user(user=user, slug=slug)
    if not is_campaign_owner(user=user, campaign=campaign):
        raise PermissionDenied("Only the campaign's owner can share it.")
    return campaign
