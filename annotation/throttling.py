"""Sign-in throttling for every way in (web sign-in, admin, API token): an authentication backend.

Failed attempts are counted in the cache per (username, client address) and per address; past the
limit, further attempts are refused, right or wrong, until the window has passed. Counting per pair
stops password guessing against one account without letting a stranger lock its owner out from
elsewhere; the per-address count stops spraying many usernames from one place.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils.crypto import salted_hmac

from annotation.selectors import user_with_worker


def _keys(request, username: str) -> list[tuple[str, int]]:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    pair = salted_hmac("chorus.login", f"{username.casefold()}\0{address}").hexdigest()[:32]
    return [
        (f"login-failures:pair:{pair}", settings.CHORUS_LOGIN_FAILURES_PER_ACCOUNT),
        (f"login-failures:addr:{address}", settings.CHORUS_LOGIN_FAILURES_PER_ADDRESS),
    ]


THROTTLED = "Too many failed sign-in attempts from here; try again in a few minutes."


def _over(keys) -> bool:
    return any((cache.get(key) or 0) >= limit for key, limit in keys)


def sign_in_throttled(request, username: str) -> bool:
    """Whether sign-ins as ``username`` from this request's address are refused for now."""
    return _over(_keys(request, str(username)))


class ThrottledModelBackend(ModelBackend):
    """ModelBackend with a failure limit.

    It decides every username/password attempt itself: a wrong password raises PermissionDenied,
    which ends ``authenticate()``'s search, so backends listed after it (ModelBackend, kept only so
    sessions opened with ``login(..., backend=ModelBackend)`` stay valid) never get a free guess.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        username = username if username is not None else kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        keys = _keys(request, str(username))
        if _over(keys):
            raise PermissionDenied(THROTTLED)
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            for key, _ in keys:
                cache.add(key, 0, settings.CHORUS_LOGIN_FAILURE_WINDOW)
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr: this failure opens a new window
                    cache.add(key, 1, settings.CHORUS_LOGIN_FAILURE_WINDOW)
            raise PermissionDenied("Wrong username or password.")
        return user

    def get_user(self, user_id):
        """The session's user, with their native worker in the same query (``services.worker_for_user``:
        the worker pages act as it, and would otherwise read it on every request)."""
        user = user_with_worker(user_id=user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


class ThrottledAuthenticationForm(AuthenticationForm):
    """The sign-in form, saying "too many attempts" when that is why it refused (Django's form says
    "wrong password" for every refusal, so a throttled person would keep retrying a right password)."""

    def get_invalid_login_error(self):
        if sign_in_throttled(self.request, self.cleaned_data.get("username") or ""):
            return ValidationError(THROTTLED, code="throttled")
        return super().get_invalid_login_error()
