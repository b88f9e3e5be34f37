"""Signing in from a program: username and password in, an API token out."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from annotation import services


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
