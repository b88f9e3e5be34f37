"""config.csp.CSPMiddleware: the headers django-csp's own middleware would send, for every kind of response,
with the settings' policy built once and built again when a test changes the settings."""

import pytest
from csp import middleware as django_csp
from csp.constants import NONCE
from csp.decorators import csp, csp_exempt, csp_replace, csp_update
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from config.csp import CSPMiddleware

HEADERS = ("Content-Security-Policy", "Content-Security-Policy-Report-Only")


def plain(request):
    return HttpResponse("ok")


def with_nonce(request):
    return HttpResponse(f"<script nonce='{request.csp_nonce}'></script>")


VIEWS = {
    "plain": plain,
    "nonce": with_nonce,
    "updated": csp_update({"style-src": ["'unsafe-inline'"]})(plain),
    "replaced": csp_replace({"frame-ancestors": ["https://example.org"]})(plain),
    "own policy": csp({"default-src": ["'none'"]})(plain),
    "exempt": csp_exempt()(plain),
    "preset header": lambda request: HttpResponse(headers={"Content-Security-Policy": "default-src 'none'"}),
    "404": lambda request: HttpResponse(status=404),
}


def headers_of(middleware_class, view, path="/w/demo/next/"):
    request = RequestFactory().get(path)
    middleware = middleware_class(view)
    response = middleware(request)
    return {name: response.get(name) for name in HEADERS}, request


@pytest.mark.parametrize("view", VIEWS)
def test_the_headers_are_django_csps_own(view):
    ours, request = headers_of(CSPMiddleware, VIEWS[view])
    theirs, _ = headers_of(django_csp.CSPMiddleware, VIEWS[view])
    assert ours == theirs
    if view == "plain":
        assert "default-src 'self'" in ours["Content-Security-Policy"]
        # A nonce asked for after the header was written is refused, as django-csp refuses it.
        with pytest.raises(django_csp.CSPNonceError):
            str(request.csp_nonce)


@pytest.mark.parametrize(
    "policy",
    [
        {"CONTENT_SECURITY_POLICY": {"DIRECTIVES": {"default-src": ["'none'"]}}},
        {"CONTENT_SECURITY_POLICY_REPORT_ONLY": {"DIRECTIVES": {"img-src": ["'self'"]}}},
        {"CONTENT_SECURITY_POLICY": {"EXCLUDE_URL_PREFIXES": ["/w/"], "DIRECTIVES": {"default-src": ["'self'"]}}},
        {"DEBUG": True},
    ],
)
def test_a_changed_setting_is_followed(policy):
    before, _ = headers_of(CSPMiddleware, plain)
    with override_settings(**policy):
        for view in VIEWS.values():
            assert headers_of(CSPMiddleware, view)[0] == headers_of(django_csp.CSPMiddleware, view)[0]
        changed, _ = headers_of(CSPMiddleware, plain)
    assert headers_of(CSPMiddleware, plain)[0] == before
    if "DEBUG" not in policy:
        assert changed != before


def test_a_page_that_asks_for_a_nonce_gets_it_in_its_header():
    """With a policy that names the nonce, a page that used one gets it in its header (django-csp's own
    path), and the nonce stays readable after the response, as django-csp leaves it."""
    policy = {"DIRECTIVES": {"default-src": ["'self'"], "script-src": ["'self'", NONCE]}}
    with override_settings(CONTENT_SECURITY_POLICY=policy):
        ours, request = headers_of(CSPMiddleware, with_nonce)
        theirs, their_request = headers_of(django_csp.CSPMiddleware, with_nonce)
        nonce = str(request.csp_nonce)
        assert f"'nonce-{nonce}'" in ours["Content-Security-Policy"]
        assert ours["Content-Security-Policy"].replace(nonce, "N") == theirs["Content-Security-Policy"].replace(
            str(their_request.csp_nonce), "N"
        )
        # A page without a nonce: the header names none.
        assert "nonce-" not in headers_of(CSPMiddleware, plain)[0]["Content-Security-Policy"]
