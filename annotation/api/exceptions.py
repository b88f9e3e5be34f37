"""One error shape for every API failure: ``{"error": {"code", "message", "fields"?}}``.

Clients switch on ``code``; ``message`` is for people; ``fields`` (validation only) maps each bad
input field to its messages. Service refusals keep their own code and status, except those meaning
"not yours" (``NotLeased``): a 404 ``not_found``, like a resource that does not exist.
"""

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from annotation.importing import MAX_ERRORS_SHOWN, PromptFileError
from annotation.services import NotLeased, ServiceError


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is too large."


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    error = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def _first_message(detail) -> str:
    """The first human message of a (possibly nested) DRF error detail."""
    while isinstance(detail, (list, dict)) and detail:
        detail = next(iter(detail.values())) if isinstance(detail, dict) else detail[0]
    return str(detail) if detail else "Invalid input."


def _field_messages(detail) -> dict:
    if isinstance(detail, dict):
        return {
            name: _field_messages(value) if isinstance(value, dict) else [str(v) for v in _as_list(value)]
            for name, value in detail.items()
        }
    return {"non_field_errors": [str(v) for v in _as_list(detail)]}


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _django_messages(exc: DjangoValidationError):
    if not hasattr(exc, "error_dict"):
        return exc.messages
    return {
        ("non_field_errors" if name == NON_FIELD_ERRORS else name): messages
        for name, messages in exc.message_dict.items()
    }


def exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER. Anything it does not know (a bug) is left to Django: a 500."""
    if isinstance(exc, NotLeased):  # "not yours", answered like a resource that does not exist
        exc = exceptions.NotFound()
    elif isinstance(exc, ServiceError):
        set_rollback()
        fields = {name: [message] for name, message in exc.fields.items()}
        return Response(error_body(exc.code, exc.message, fields), status=exc.status)
    if isinstance(exc, PromptFileError):
        set_rollback()
        lines = {}
        for line, message in exc.errors[:MAX_ERRORS_SHOWN]:
            lines.setdefault(str(line), []).append(message)
        return Response(error_body("bad_prompt_file", str(exc), {"lines": lines}), status=400)
    if isinstance(exc, DjangoValidationError):  # a model's full_clean() inside a service
        exc = exceptions.ValidationError(_django_messages(exc))
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(str(exc))
    elif isinstance(exc, SuspiciousOperation):  # too many form fields, a bad multipart body, ...
        exc = exceptions.ParseError(str(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):  # its message says which rule refused (owner only, viewer)
        exc = exceptions.PermissionDenied(str(exc) or None)
    if not isinstance(exc, exceptions.APIException):
        return None

    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    set_rollback()
    if isinstance(exc, exceptions.ValidationError):
        body = error_body("invalid", _first_message(exc.detail), _field_messages(exc.detail))
    else:
        codes = exc.get_codes()
        body = error_body(codes if isinstance(codes, str) else exc.default_code, _first_message(exc.detail))
    return Response(body, status=exc.status_code, headers=headers)


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception):
    """``handler404``: a path no route matches keeps the API's error shape under ``/api/``."""
    if _is_api(request):
        return JsonResponse(
            error_body("not_found", "No such endpoint. The schema at /api/schema/ lists them all."), status=404
        )
    return defaults.page_not_found(request, exception)


def server_error(request):
    """``handler500``: a bug answers API clients in the error shape too (the details go to the log)."""
    if _is_api(request):
        return JsonResponse(
            error_body(
                "server_error",
                "Something went wrong on our side; nothing was saved. "
                "Try again, and tell the operators if it persists.",
            ),
            status=500,
        )
    return defaults.server_error(request)
