"""A campaign's slug never takes a name that one of Chorus's own pages uses under the same prefix."""

import pytest

from annotation import services
from annotation.services.campaigns import RESERVED_SLUGS

pytestmark = pytest.mark.django_db


def test_a_campaign_titled_guide_does_not_hide_behind_the_audit_guide(researcher, client):
    campaign = services.campaign_create(owner=researcher, title="Guide", k=1)
    assert campaign.slug.startswith("guide-") and campaign.slug not in RESERVED_SLUGS
    client.force_login(researcher)
    assert client.get(f"/audits/{campaign.slug}/").status_code == 200
