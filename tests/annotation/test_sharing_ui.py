"""Sharing a campaign from its detail page: the web UI's face of ``campaign_share``/``campaign_unshare``.

Who may share follows the API (``annotation.permissions.campaign_for_owner``): the owner and staff;
collaborators see the list but get 403; anybody else gets 404; anonymous users go to the sign-in page.
"""

import pytest
from django.test import Client
from django.urls import reverse

from annotation import services
from tests.helpers import PHONE, messages_of, sign_in

pytestmark = pytest.mark.django_db


def add_url(campaign) -> str:
    return reverse("collaborator_add", args=[campaign.slug])


def remove_url(campaign, username: str) -> str:
    return reverse("collaborator_remove", args=[campaign.slug, username])


def detail_url(campaign) -> str:
    return reverse("campaign_detail", args=[campaign.slug])


def usernames(campaign) -> list[str]:
    return sorted(campaign.collaborators.values_list("username", flat=True))


@pytest.fixture
def campaign(make_campaign):
    return make_campaign(2)


@pytest.fixture
def colleague(make_user):
    return make_user("colleague")


@pytest.fixture
def shared(campaign, colleague):
    """The campaign, shared with 'colleague' through the real service."""
    services.campaign_share(campaign=campaign, username=colleague.username)
    return campaign


# --- the owner shares and unshares --------------------------------------------------------------------


def test_owner_sees_the_section_with_its_forms(researcher_client, shared):
    response = researcher_client.get(detail_url(shared))
    assert response.status_code == 200
    assert response.context["may_share"] is True
    assert [(c.user.username, c.role) for c in response.context["collaborations"]] == [("colleague", "editor")]
    content = response.content.decode()
    assert 'id="collaborators"' in content
    assert f'action="{add_url(shared)}#collaborators"' in content
    assert f'action="{remove_url(shared, "colleague")}"' in content


def test_owner_adds_a_collaborator(researcher_client, campaign, colleague):
    response = researcher_client.post(add_url(campaign), {"username": "colleague"})
    assert response.status_code == 302 and response.url == detail_url(campaign)
    assert usernames(campaign) == ["colleague"]
    page = researcher_client.get(response.url)
    assert messages_of(page) == ["Shared with colleague as editor: they can now manage this campaign."]
    assert b"colleague" in page.content


def test_owner_removes_a_collaborator(researcher_client, shared):
    response = researcher_client.post(remove_url(shared, "colleague"), follow=True)
    assert response.redirect_chain == [(detail_url(shared), 302)]
    assert usernames(shared) == []
    assert messages_of(response) == ["colleague no longer has access to this campaign."]
    assert b"Not shared with anybody yet." in response.content


def test_staff_may_share_as_the_api_allows(client, campaign, colleague, make_user):
    client.force_login(make_user("staffer", is_staff=True))
    assert client.get(detail_url(campaign)).context["may_share"] is True
    assert client.post(add_url(campaign), {"username": "colleague"}).status_code == 302
    assert usernames(campaign) == ["colleague"]
    assert client.post(remove_url(campaign, "colleague")).status_code == 302
    assert usernames(campaign) == []


# --- refusals become form errors on the detail page -------------------------------------------------


@pytest.mark.parametrize(
    "username, error",
    [
        ("nobody", "There is no user 'nobody'."),  # the service's unknown_user
        ("researcher", "The owner already manages this campaign."),  # the service's is_owner: yourself
        ("colleague", "colleague is already a collaborator."),  # the form: the service accepts it silently
        ("", "This field is required."),
        ("a\x00b", "Null characters are not allowed."),
    ],
)
def test_refused_usernames_are_form_errors(researcher_client, shared, username, error):
    response = researcher_client.post(add_url(shared), {"username": username})
    assert response.status_code == 400
    assert response.context["share_form"].errors == {"username": [error]}
    assert error.replace("'", "&#x27;").encode() in response.content
    assert usernames(shared) == ["colleague"]


def test_an_inactive_user_is_unknown(researcher_client, campaign, make_user):
    make_user("gone", is_active=False)
    response = researcher_client.post(add_url(campaign), {"username": "gone"})
    assert response.status_code == 400
    assert response.context["share_form"].errors == {"username": ["There is no user 'gone'."]}
    assert usernames(campaign) == []


def test_removing_an_unknown_user_says_so(researcher_client, shared):
    response = researcher_client.post(remove_url(shared, "nobody"), follow=True)
    assert messages_of(response) == ["There is no user 'nobody'."]
    assert usernames(shared) == ["colleague"]


def test_a_malformed_username_in_the_remove_link_is_refused_not_a_crash(researcher_client, shared):
    response = researcher_client.post(f"/campaigns/{shared.slug}/collaborators/a%00b/remove/", follow=True)
    assert messages_of(response) == ["That is not a username."]
    assert usernames(shared) == ["colleague"]


# --- who may not change sharing -------------------------------------------------------------------


def test_a_collaborator_sees_the_list_but_no_forms(client, shared, colleague):
    client.force_login(colleague)
    response = client.get(detail_url(shared))
    assert response.status_code == 200
    assert response.context["may_share"] is False and response.context["share_form"] is None
    content = response.content.decode()
    assert "Collaborators" in content and "colleague" in content
    assert add_url(shared) not in content and remove_url(shared, "colleague") not in content


def test_a_collaborator_cannot_change_sharing(client, shared, colleague, make_user):
    make_user("third")
    client.force_login(colleague)
    assert client.post(add_url(shared), {"username": "third"}).status_code == 403
    assert client.post(remove_url(shared, "colleague")).status_code == 403
    assert usernames(shared) == ["colleague"]


def test_a_stranger_gets_404(client, shared, make_user):
    client.force_login(make_user("stranger"))
    assert client.post(add_url(shared), {"username": "stranger"}).status_code == 404
    assert client.post(remove_url(shared, "colleague")).status_code == 404
    assert usernames(shared) == ["colleague"]


def test_anonymous_users_are_sent_to_sign_in(client, shared):
    for url in (add_url(shared), remove_url(shared, "colleague")):
        response = client.post(url, {"username": "colleague"})
        assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert usernames(shared) == ["colleague"]


def test_sharing_views_are_post_only(researcher_client, shared):
    assert researcher_client.get(add_url(shared)).status_code == 405
    assert researcher_client.get(remove_url(shared, "colleague")).status_code == 405
    assert usernames(shared) == ["colleague"]


def test_sharing_needs_the_csrf_token(researcher, campaign, colleague):
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    assert client.post(add_url(campaign), {"username": "colleague"}).status_code == 403
    assert usernames(campaign) == []
    # The page's own form carries the token.
    token = client.get(detail_url(campaign)).context["csrf_token"]
    response = client.post(add_url(campaign), {"username": "colleague", "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert usernames(campaign) == ["colleague"]


# --- end to end ------------------------------------------------------------------------------------


def test_a_collaborator_added_in_the_ui_can_then_see_the_campaign(researcher, campaign, colleague):
    owner, other = Client(), Client()
    owner.force_login(researcher)
    other.force_login(colleague)
    assert other.get(detail_url(campaign)).status_code == 404
    assert owner.post(add_url(campaign), {"username": "colleague"}).status_code == 302
    assert other.get(detail_url(campaign)).status_code == 200
    assert [c for c, _ in other.get("/").context["campaigns"]] == [campaign]
    assert owner.post(remove_url(campaign, "colleague")).status_code == 302
    assert other.get(detail_url(campaign)).status_code == 404


# --- on a phone --------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sharing_on_a_phone_sized_screen(live_server, new_page, researcher, make_user):
    campaign = services.campaign_create(owner=researcher, title="Shared on a phone")
    long_name = "a.collaborator.with.a.rather.long.username@example.org"
    make_user(long_name)
    services.campaign_share(campaign=campaign, username=make_user("bo").username)
    page = new_page(**PHONE)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}{detail_url(campaign)}")

    def fits(selector):
        box = page.locator(selector).bounding_box()
        assert box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= 390, selector

    def no_horizontal_scroll() -> bool:
        # A mobile browser widens its layout viewport to fit wide content, so the page's own scroll
        # width can look fine while the section spills over; check the section too.
        return page.evaluate(
            "document.documentElement.scrollWidth <= window.innerWidth"
            " && document.querySelector('#collaborators').scrollWidth"
            " <= document.querySelector('#collaborators').clientWidth"
        )

    page.fill("#collaborators input[name=username]", "nobody")
    page.click("#collaborators button:has-text('Add')")
    page.wait_for_selector("#collaborators .errorlist")
    assert page.inner_text("#collaborators .errorlist") == "There is no user 'nobody'."
    assert no_horizontal_scroll()

    page.fill("#collaborators input[name=username]", long_name)
    page.click("#collaborators button:has-text('Add')")
    page.wait_for_selector(".message-success")
    assert no_horizontal_scroll()
    for selector in (
        "#collaborators input[name=username]",
        "#collaborators button:has-text('Add')",
        f"#collaborators button[aria-label='Remove {long_name}']",
    ):
        fits(selector)

    page.tap(f"#collaborators button[aria-label='Remove {long_name}']")
    page.wait_for_selector(f"text={long_name} no longer has access to this campaign.")
    assert usernames(campaign) == ["bo"]
    assert page.locator(f"#collaborators button[aria-label='Remove {long_name}']").count() == 0
