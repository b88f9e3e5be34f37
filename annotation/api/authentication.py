"""How the API knows who calls: a token (programs), or the session (pages, the browsable API).

In a module of its own, with no views: DRF imports the classes named in its settings when its views
module is first imported."""

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from annotation.selectors import token_with_user


class WorkerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, reading the user's native worker in the same query: every request of
    the worker loop acts as that worker (``services.worker_for_user``), which then costs no query of its
    own. Refuses exactly as DRF's does, in its words."""

    def authenticate_credentials(self, key):
        token = token_with_user(key=key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return token.user, token
