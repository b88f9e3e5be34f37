"""Account writes: sign-up and API tokens go through annotation.services.accounts (guest accounts come
with invitations: tests/annotation/test_invitations.py)."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from annotation import services
from annotation.forms import SignUpForm

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-pass-phrase"


def sign_up_form(username: str) -> SignUpForm:
    return SignUpForm({"username": username, "password1": PASSWORD, "password2": PASSWORD})


def test_account_create_stores_the_password_hashed():
    user = services.account_create(username="newbie", password=PASSWORD)
    user.refresh_from_db()
    assert user.username == "newbie" and user.email == ""
    assert user.check_password(PASSWORD) is True and user.password != PASSWORD


def test_the_sign_up_form_validates_and_the_service_writes():
    form = sign_up_form("formed")
    assert form.is_valid() is True
    user = form.save()
    assert get_user_model().objects.get(username="formed") == user
    assert user.check_password(PASSWORD) is True


def test_the_sign_up_form_refuses_a_taken_username_before_any_write():
    services.account_create(username="taken", password=PASSWORD)
    form = sign_up_form("taken")
    assert form.is_valid() is False and "username" in form.errors
    assert get_user_model().objects.filter(username="taken").count() == 1


def test_the_sign_up_form_saving_without_commit_writes_nothing():
    form = sign_up_form("later")
    assert form.is_valid() is True
    user = form.save(commit=False)
    assert user.pk is None and not get_user_model().objects.filter(username="later").exists()


def test_api_token_is_made_on_first_use_and_then_reused(make_user):
    user = make_user("alice")
    token = services.api_token_get_or_create(user=user)
    assert services.api_token_get_or_create(user=user).key == token.key
    assert Token.objects.filter(user=user).count() == 1
    assert services.api_token_get_or_create(user=make_user("bob")).key != token.key
