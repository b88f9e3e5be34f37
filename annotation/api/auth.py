"""Signing in from a program: username and password in, an API token out."""

from django.contrib.auth import authenticate
from django.http import JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, AuthenticationFailed
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from annotation import services
from annotation.api.authentication import WorkerTokenAuthentication
from annotation.api.exceptions import error_body


class BadCredentials(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "bad_credentials"
    default_detail = "Unable to sign in with this username and password."


class TokenObtainApi(APIView):
    """Failed attempts are also counted per username and address by the authentication backend
    (``annotation.throttling``), which covers the web sign-in too; this throttle caps all attempts."""

    authentication_classes = ()
    permission_classes = ()
    throttle_classes = (ScopedRateThrottle,)
    throttle_scope = "auth"

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=4096, trim_whitespace=False)

    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer}, auth=[])
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request=request, **data.validated_data)
        if user is None:
            raise BadCredentials()
        token = services.api_token_get_or_create(user=user)
        return Response(self.OutputSerializer({"token": token.key}).data)


class TokenDownloadMiddleware:
    """Lets a token client read what the pages offer (card.json, report.json, the label exports): a
    GET or HEAD outside ``/api/`` with ``Authorization: Token <key>`` is served as that token's user,
    under the page's own permission rules, instead of redirected to the sign-in page. Only reads: a
    page's forms keep needing a session and its CSRF token. A bad token answers 401, as the API does.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.authentication = WorkerTokenAuthentication()

    def __call__(self, request):
        # As DRF reads it: the keyword in any case, then the key.
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        is_token = scheme.lower() == "token" and key.strip()
        if request.method in ("GET", "HEAD") and is_token and not request.path_info.startswith("/api/"):
            try:
                user, _ = self.authentication.authenticate_credentials(key.strip())
            except AuthenticationFailed as exc:
                body = error_body("authentication_failed", str(exc.detail))
                return JsonResponse(body, status=401, headers={"WWW-Authenticate": "Token"})
            request.user = user
        return self.get_response(request)
