"""A hook delivery signed as Prolific signs it (§8.2 of the protocol), for the Prolific tests. The
stand-in with Chorus pointed at it is the ``prolific_settings`` fixture (tests/conftest.py)."""

import base64
import hashlib
import hmac
import time


def signed_headers(secret: str, body: str, *, event_id: str, timestamp: int | None = None) -> dict:
    """The headers of a hook delivery of ``body``: base64 HMAC-SHA256 over timestamp + body."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), (stamp + body).encode(), hashlib.sha256).digest()
    return {
        "X-Prolific-Request-Signature": base64.b64encode(digest).decode(),
        "X-Prolific-Request-Timestamp": stamp,
        "X-Event-ID": event_id,
        "X-Timestamp": stamp,
    }
