"""Who may see and do what, for both the HTML views and the API.

The visibility selectors live in ``annotation.selectors`` (``campaigns_visible_to``,
``campaign_for_user``, ``campaign_for_workers``, ``lease_for_worker``); this module adds the rules
those do not cover. tests/api/test_permission_matrix.py checks every URL against them.

Roles:

* anonymous: the sign-in and sign-up pages, a launched campaign's front page, the API schema and docs;
* worker (any signed-in user): asks for work in a launched campaign by its slug (a campaign never
  launched is its managers' alone: ``campaigns_for_workers``), sees only the prompt leased
  to them and their own labels, never other workers' labels, gold labels or audits;
* researcher: an account with the ``annotation.add_campaign`` permission (directly, or through the
  ``researchers`` group: ``manage.py researcher USERNAME``) creates campaigns; it owns them;
* collaborator: a user the owner shared a campaign with, as an editor (manages it like the owner,
  except sharing it and spending its money) or a viewer (reads every page, card, figure and export
  of it, and changes nothing: any request but GET, HEAD or OPTIONS answers 403, ``edit_check``);
* staff: everything on every campaign; creating campaigns still takes the permission (superusers
  hold every permission).

A campaign or lease somebody may not see answers 404, exactly like one that does not exist, so its
slug or id leaks nothing. A campaign they see but may not change in this way answers 403.
"""

from django.core.exceptions import PermissionDenied
from django.utils.functional import SimpleLazyObject

from annotation.models import Campaign, Collaboration
from annotation.selectors import campaign_for_user

# The methods that change nothing (RFC 9110's safe methods): all a viewer may use.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
VIEWER_REFUSAL = "You are a viewer of this campaign: you can see it, not change it."
INVITATIONS_NOT_FOR_VIEWERS = "Viewers do not see invitation links: each is one worker's own key to the campaign."
CREATE_REFUSAL = (
    "This account labels but cannot create campaigns: staff make an account a researcher in the admin "
    "or with 'manage.py researcher USERNAME'."
)


def may_create_campaigns(user) -> bool:
    return user.has_perm("annotation.add_campaign")


def campaign_role(*, user, campaign: Campaign) -> str | None:
    """``owner``, ``staff``, ``editor``, ``viewer``, or None for anybody else."""
    if campaign.owner_id == user.pk:
        return "owner"
    if user.is_staff:
        return "staff"
    return Collaboration.objects.filter(campaign=campaign, user_id=user.pk).values_list("role", flat=True).first()


def edit_check(*, request, campaign: Campaign) -> None:
    """Refuse (403) a viewer's request that is not a safe method: viewers read and never act. By the
    method, not view by view, so that no new action can forget to refuse them."""
    if request.method in SAFE_METHODS:
        return
    if campaign_role(user=request.user, campaign=campaign) == Collaboration.Role.VIEWER:
        raise PermissionDenied(VIEWER_REFUSAL)


def campaign_for_editor(*, user, slug: str, why: str) -> Campaign:
    """The campaign, for its owner, editors and staff only, whatever the method: for what a viewer may
    not even read (``why`` says so in the 403), such as invitation links, each a worker's own key."""
    campaign = campaign_for_user(user=user, slug=slug)
    if campaign_role(user=user, campaign=campaign) == Collaboration.Role.VIEWER:
        raise PermissionDenied(why)
    return campaign


def campaign_for_request(request, slug: str) -> Campaign:
    """The campaign of a researcher's page or API call: ``campaign_for_user``'s (404 for strangers),
    and ``edit_check``'s 403 for a viewer's request that would change something."""
    campaign = campaign_for_user(user=request.user, slug=slug)
    edit_check(request=request, campaign=campaign)
    return campaign


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


def may_edit_context(request) -> dict:
    """Template context processor: ``may_edit``, whether the signed-in user may change the campaign the
    URL names (its ``slug``, or a publication page's ``pk``), so that a viewer's pages offer no form
    that would answer 403. Computed only when a template asks for it (a query or two); True on a page
    about no campaign. The views check again: this only hides what they would refuse."""

    def may_edit() -> bool:
        match = getattr(request, "resolver_match", None)
        kwargs = getattr(match, "kwargs", {})
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return True
        campaigns = Campaign.objects.only("pk", "owner_id")
        if "slug" in kwargs:
            campaign = campaigns.filter(slug=kwargs["slug"]).first()
        elif "pk" in kwargs and match.namespace == "channels":
            campaign = campaigns.filter(publications__pk=kwargs["pk"]).first()
        else:
            return True
        return campaign is None or campaign_role(user=user, campaign=campaign) != Collaboration.Role.VIEWER

    return {"may_edit": SimpleLazyObject(may_edit)}
