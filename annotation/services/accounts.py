"""Writes on accounts: sign-up and API tokens (guest accounts come with invitations: invitations.py).

Callers validate first (``SignUpForm`` checks the username and the password rules; the token API
authenticates the user); these functions only write. The user model is ``get_user_model()``, so a
swapped AUTH_USER_MODEL keeps working.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
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
