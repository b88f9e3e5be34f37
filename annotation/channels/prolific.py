"""A thin client of Prolific's REST API (``../shared/docs/prolific-api.md`` is the protocol as Chorus
reads it). One method per remote call; no decisions (those are in ``services/prolific.py``).

Failures are the channel contract's errors (``annotation.channels.base``): 429, 5xx, timeouts and lost
connections are ``ChannelTransientError`` (Celery retries them with back-off, only where repeating the
call is safe), every other refusal ``ChannelPermanentError`` carrying Prolific's own message. The token
never appears in an error, a log line or ``repr``.
"""

import hashlib
import hmac
import json
import logging
from base64 import b64encode
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import urljoin

import requests
from django.conf import settings

from annotation.channels.base import ChannelPermanentError, ChannelTransientError

logger = logging.getLogger(__name__)

TIMEOUT = (5, 30)  # connect, read (seconds)
PAGE = 100


def _error_text(response: requests.Response) -> str:
    """Prolific's message, whichever of its three error shapes it used (§1.1)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        detail = error.get("detail")
        if isinstance(detail, dict):
            detail = "; ".join(
                f"{field}: {' '.join(map(str, msgs)) if isinstance(msgs, list) else msgs}"
                for field, msgs in detail.items()
            )
        elif isinstance(detail, list):
            detail = "; ".join(map(str, detail))
        return str(detail or error.get("title") or response.reason)
    if isinstance(body, dict) and ("message" in body or "detail" in body):
        return " ".join(str(body[k]) for k in ("message", "detail") if body.get(k))
    return json.dumps(body)[:500]


class ProlificClient:
    def __init__(self, *, token: str, base_url: str | None = None):
        self._token = token
        self.base_url = base_url or settings.CHORUS_PROLIFIC_API_URL
        self._session = requests.Session()
        self._session.headers.update(
            {"Authorization": f"Token {token}", "Content-Type": "application/json", "Accept": "application/json"}
        )

    def __repr__(self) -> str:  # never the token
        return f"<ProlificClient {self.base_url}>"

    # ------------------------------------------------------------------ transport
    def _call(self, method: str, path: str, *, body=None, params=None, operation: str = "") -> requests.Response:
        url = urljoin(self.base_url, path)
        operation = operation or f"{method} {path.split('?')[0]}"
        try:
            response = self._session.request(method, url, json=body, params=params, timeout=TIMEOUT)
        except requests.RequestException as exc:
            # The call may or may not have happened: the caller decides whether repeating it is safe.
            raise ChannelTransientError(
                f"Prolific did not answer ({type(exc).__name__}).", operation=operation, code="no_answer"
            ) from None
        if response.status_code == 429 or response.status_code >= 500:
            raise ChannelTransientError(
                f"Prolific answered {response.status_code}: {_error_text(response)}",
                operation=operation,
                code=str(response.status_code),
            )
        if response.status_code >= 400:
            raise ChannelPermanentError(
                f"Prolific refused it ({response.status_code}): {_error_text(response)}",
                operation=operation,
                code=str(response.status_code),
            )
        return response

    def _json(self, method: str, path: str, **kwargs):
        response = self._call(method, path, **kwargs)
        return response.json() if response.content else None

    def _pages(self, path: str, params: dict | None = None) -> Iterator[dict]:
        """Every result of an offset-paginated list (§1.3), following ``_links.next`` or ``meta.count``."""
        offset = 0
        while True:
            page = self._json("GET", path, params={**(params or {}), "limit": PAGE, "offset": offset})
            results = page.get("results") or []
            yield from results
            offset += len(results)
            following = ((page.get("_links") or {}).get("next") or {}).get("href")
            count = (page.get("meta") or {}).get("count")
            if not results or (following is None and (count is None or offset >= count)):
                return

    # ------------------------------------------------------------------ account
    def workspaces(self) -> list[dict]:
        return list(self._pages("workspaces/"))

    def me(self) -> dict:
        return self._json("GET", "users/me/")

    # ------------------------------------------------------------------ studies
    def study_create(self, study: dict) -> dict:
        return self._json("POST", "studies/", body=study)

    def study_get(self, study_id: str) -> dict:
        return self._json("GET", f"studies/{study_id}/")

    def studies(self) -> Iterator[dict]:
        return self._pages("studies/")

    def study_update(self, study_id: str, fields: dict) -> dict:
        return self._json("PATCH", f"studies/{study_id}/", body=fields)

    def study_transition(self, study_id: str, action: str) -> dict:
        return self._json("POST", f"studies/{study_id}/transition/", body={"action": action})

    # ------------------------------------------------------------------ submissions
    def submissions(self, study_id: str) -> Iterator[dict]:
        return self._pages(f"studies/{study_id}/submissions/")

    def submission_get(self, submission_id: str) -> dict:
        return self._json("GET", f"submissions/{submission_id}/")

    def submission_transition(self, submission_id: str, action: str, **fields) -> dict:
        return self._json("POST", f"submissions/{submission_id}/transition/", body={"action": action, **fields})

    def bulk_approve(self, submission_ids: list[str]) -> None:
        self._call("POST", "submissions/bulk-approve/", body={"submission_ids": submission_ids})

    # ------------------------------------------------------------------ participant groups
    def group_create(self, *, name: str, workspace_id: str) -> dict:
        body = {"name": name, "workspace_id": workspace_id} if workspace_id else {"name": name}
        return self._json("POST", "participant-groups/", body=body)

    def group_add(self, group_id: str, participant_ids: list[str]) -> None:
        self._call("POST", f"participant-groups/{group_id}/participants/", body={"participant_ids": participant_ids})

    def group_remove(self, group_id: str, participant_ids: list[str]) -> None:
        self._call("DELETE", f"participant-groups/{group_id}/participants/", body={"participant_ids": participant_ids})

    # ------------------------------------------------------------------ bonuses (§6)
    def bonus_setup(self, *, study_id: str, participant_id: str, amount: Decimal) -> dict:
        # Amounts in the CSV are major units with two decimals (Prolific's CLI: "pid,4.25" is £4.25).
        csv = f"{participant_id},{amount.quantize(Decimal('0.01'))}"
        return self._json("POST", "submissions/bonus-payments/", body={"study_id": study_id, "csv_bonuses": csv})

    def bonus_pay(self, setup_id: str) -> None:
        self._call("POST", f"bulk-bonus-payments/{setup_id}/pay/")

    # ------------------------------------------------------------------ hooks (§8)
    def hook_secret_create(self, workspace_id: str) -> str:
        return self._json("POST", "hooks/secrets/", body={"workspace_id": workspace_id})["value"]

    def hook_subscriptions(self, workspace_id: str) -> list[dict]:
        return list(self._pages("hooks/subscriptions/", {"workspace_id": workspace_id}))

    def hook_subscribe(self, *, event_type: str, target_url: str, workspace_id: str) -> tuple[dict, str]:
        """Create a subscription; returns it and the ``X-Hook-Secret`` its confirmation needs."""
        response = self._call(
            "POST",
            "hooks/subscriptions/",
            body={"event_type": event_type, "target_url": target_url, "workspace_id": workspace_id},
        )
        body = response.json()
        # The reference wraps it in {"results": [...]}, the CLI reads one object: accept both (§10).
        subscription = (body.get("results") or [body])[0] if isinstance(body, dict) else body[0]
        return subscription, response.headers.get("X-Hook-Secret", "")

    def hook_confirm(self, subscription_id: str, secret: str) -> dict:
        return self._json("POST", f"hooks/subscriptions/{subscription_id}/", body={"secret": secret})


def expected_signatures(*, secret: str, timestamp: str, raw_body: bytes) -> list[str]:
    """The signatures a genuine delivery may carry: over the raw bytes, and over ``json.dumps`` of the
    parsed body (Prolific's documented example re-serialises it)."""
    text = raw_body.decode("utf-8", errors="replace")
    bodies = [text]
    try:
        reserialised = json.dumps(json.loads(text))
    except ValueError:
        reserialised = None
    if reserialised is not None and reserialised != text:
        bodies.append(reserialised)
    return [
        b64encode(hmac.new(secret.encode(), (timestamp + body).encode(), hashlib.sha256).digest()).decode()
        for body in bodies
    ]


def delivery_verified(*, secret: str, timestamp: str, signature: str, raw_body: bytes) -> bool:
    """Whether ``signature`` is one of :func:`expected_signatures`, compared in constant time."""
    if not secret or not signature:
        return False
    return any(
        hmac.compare_digest(signature.encode(), candidate.encode())
        for candidate in expected_signatures(secret=secret, timestamp=timestamp, raw_body=raw_body)
    )
