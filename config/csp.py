"""django-csp's middleware, with the settings' own policy built once per process.

django-csp builds the Content-Security-Policy header anew for every response, from the settings, a deep
copy of its parts (``dataclasses.asdict``) and the string joined again: about 90 µs a response here, three
times per label on the task pages. Most responses take the settings' policy unchanged: no view decorator
touched it (``csp``, ``csp_update``, ``csp_replace``, ``csp_exempt`` set ``_csp_*`` attributes on the
response) and no template asked for a nonce. Those get the header built once; every other response, and
every response while a test's ``override_settings`` changes the policy, takes django-csp's own path.
"""

from functools import cache

from csp import middleware
from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

# What a view decorator sets on a response to change or drop its policy (csp.decorators).
_CHANGED_BY_A_VIEW = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_exempt",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
    "_csp_exempt_ro",
)
# The settings the built headers come from (DEBUG is read on every response, not kept).
_POLICIES = ("CONTENT_SECURITY_POLICY", "CONTENT_SECURITY_POLICY_REPORT_ONLY")


@cache
def _settings_policy() -> tuple[str, str] | None:
    """The two headers the settings give (an empty string: that header is not sent), or None when the
    settings exclude URL prefixes, which the fast path does not handle."""
    for name in _POLICIES:
        if (getattr(settings, name, None) or {}).get("EXCLUDE_URL_PREFIXES"):
            return None
    return build_policy(), build_policy(report_only=True)


@receiver(setting_changed)
def _forget_policy(*, setting, **kwargs):
    if setting in _POLICIES:
        _settings_policy.cache_clear()


class CSPMiddleware(middleware.CSPMiddleware):
    def process_response(self, request, response):
        headers = _settings_policy()
        if (
            headers is None
            or getattr(request, "_csp_nonce", None) is not None
            or any(hasattr(response, name) for name in _CHANGED_BY_A_VIEW)
        ):
            return super().process_response(request, response)
        # django-csp's own order: a 404 or 500 in DEBUG keeps Django's debug page usable.
        if settings.DEBUG and response.status_code in (404, 500):
            return response
        policy, report_only = headers
        if policy and HEADER not in response:
            response[HEADER] = policy
        if report_only and HEADER_REPORT_ONLY not in response:
            response[HEADER_REPORT_ONLY] = report_only
        # As django-csp: a nonce asked for after the header is written would not be in it.
        request.csp_nonce = middleware.CheckableLazyObject(self._csp_nonce_post_response)
        return response
