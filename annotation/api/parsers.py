"""Request parsers with limits: a body over the size limit is a 413, nesting too deep a 400, never a 500.

The limit is DATA_UPLOAD_MAX_MEMORY_SIZE (the import limit plus room for the envelope): Django
enforces it on ``request.body``, but DRF reads the stream itself, so it is checked here.
"""

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

from annotation.api.exceptions import PayloadTooLarge


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"The request body is over the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes.")


def _check_declared_length(parser_context) -> None:
    request = (parser_context or {}).get("request")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
    except ValueError as exc:
        raise ParseError("Bad Content-Length header.") from exc
    if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise _too_large()


def _not_json(name: str):
    raise ValueError(f"{name} is not valid JSON")


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        _check_declared_length(parser_context)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise _too_large()
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_not_json)
        except UnicodeDecodeError as exc:
            raise ParseError("JSON parse error - the body is not UTF-8.") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc


class BoundedMultiPartParser(MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        _check_declared_length(parser_context)
        return super().parse(stream, media_type, parser_context)


class BoundedFormParser(FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        _check_declared_length(parser_context)
        return super().parse(stream, media_type, parser_context)
