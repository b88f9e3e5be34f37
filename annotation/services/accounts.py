"""Writes on accounts: sign-up, API tokens and who is a researcher (guest accounts come with
invitations: invitations.py).

Callers validate first (``SignUpForm`` checks the username and the password rules; the token API
authenticates the user); these functions only write. The user model is ``get_user_model()``, so a
swapped AUTH_USER_MODEL keeps working.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group, Permission
from django.db import transaction
from rest_framework.authtoken.models import Token


def account_create(*, username: str, password: str) -> AbstractBaseUser:
    """A new user with this (already validated) username and password, stored hashed."""
    with transaction.atomic(durable=True):
        return get_user_model().objects.create_user(username=username, password=password)


def api_token_get_or_create(*, user: AbstractBaseUser) -> Token:
    """The user's API token, made on first use. Two first sign-ins racing get the same token:
    ``get_or_create`` re-reads the winner's row after the loser's IntegrityError."""
    with transaction.atomic(durable=True):
        token, _ = Token.objects.get_or_create(user=user)
    return token


RESEARCHERS_GROUP = "researchers"


def researcher_set(*, user: AbstractBaseUser, researcher: bool = True) -> None:
    """Make the account a researcher (it may create campaigns), or a labeler only again, through the
    ``researchers`` group, which holds ``annotation.add_campaign``. The group is made on first use, so
    that a database migrated before it existed, or built without migrations, works the same."""
    with transaction.atomic(durable=True):
        group, _ = Group.objects.get_or_create(name=RESEARCHERS_GROUP)
        group.permissions.add(Permission.objects.get(content_type__app_label="annotation", codename="add_campaign"))
        if researcher:
            user.groups.add(group)
        else:
            user.groups.remove(group)
