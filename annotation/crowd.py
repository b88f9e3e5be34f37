"""A simulated crowd: threads that sign up and label through the real worker pages, over HTTP.

Each simulated worker is a ``requests.Session`` doing what a person's browser does: sign in (or sign
up), GET ``/w/<slug>/next/``, read the labeling form (CSRF token, client token, the answer buttons or
per-option radios), pause, POST an answer, and so on until the campaign says there is nothing left,
its volume is reached (then it presses "Stop for now") or the crowd is stopped. Used by
``manage.py demo``, and by tests and benchmarks that need labels to arrive the way real ones do.

Answers follow a personality: careful and noisy workers answer the known truth with some
probability (else a wrong answer), "same answer" workers always press the first button.
"""

import random
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin

import requests

REQUEST_TIMEOUT = 15
MAX_CONSECUTIVE_ERRORS = 5
WRONG_ANSWER = "no idea"  # what a careless simulated worker types on a free-text prompt


@dataclass(frozen=True)
class Personality:
    name: str
    accuracy: float  # probability of answering the truth, when it is known
    volume: int | None  # labels before stopping; None: until nothing is left
    pause: tuple[float, float]  # seconds spent on a prompt (uniform), before the crowd's pause_scale
    same_answer: bool = False


PERSONALITIES = (
    Personality("careful", accuracy=0.96, volume=None, pause=(3.0, 7.0)),
    Personality("steady", accuracy=0.88, volume=None, pause=(2.0, 5.0)),
    Personality("noisy", accuracy=0.65, volume=40, pause=(1.0, 3.0)),
    Personality("hasty", accuracy=0.75, volume=25, pause=(0.5, 1.5)),
    Personality("same-answer", accuracy=0.0, volume=20, pause=(0.5, 2.0), same_answer=True),
    Personality("drive-by", accuracy=0.85, volume=6, pause=(2.0, 4.0)),
)


@dataclass
class WorkerResult:
    username: str
    personality: str
    labels: int = 0
    stopped_by: str = ""  # nothing_left (with the page's code), volume, stop, error
    errors: list[str] = field(default_factory=list)


class _Form:
    def __init__(self, attrs: dict):
        self.action = attrs.get("action") or ""
        self.classes = (attrs.get("class") or "").split()
        self.hidden: dict[str, str] = {}
        self.buttons: list[tuple[str, str]] = []
        self.radios: dict[str, list[str]] = {}
        self.texts: list[str] = []  # free text: the names of the text inputs


class _Page(HTMLParser):
    """The parts of a Chorus page a worker acts on: forms, prompt text, the nothing-left marker."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.forms: list[_Form] = []
        self.prompt_parts: list[str] = []
        self.nothing_left_code: str | None = None
        self._form: _Form | None = None
        self._prompt_depth = 0
        self.feed(html)
        self.close()

    @property
    def prompt_text(self) -> str:
        return " ".join("".join(self.prompt_parts).split())

    def form(self, css_class: str) -> _Form | None:
        return next((f for f in self.forms if css_class in f.classes), None)

    def handle_starttag(self, tag, attr_list):
        attrs = dict(attr_list)
        classes = (attrs.get("class") or "").split()
        if self._prompt_depth and tag == "div":
            self._prompt_depth += 1
        elif tag == "div" and "prompt-text" in classes:
            self._prompt_depth = 1
        if "nothing-left" in classes:
            self.nothing_left_code = attrs.get("data-code", "")
        if tag == "form":
            self._form = _Form(attrs)
            self.forms.append(self._form)
        elif self._form is not None and tag in ("input", "button"):
            kind = attrs.get("type", "submit" if tag == "button" else "text")
            name, value = attrs.get("name"), attrs.get("value", "")
            if not name:
                return
            if kind == "hidden":
                self._form.hidden[name] = value
            elif kind == "radio":
                self._form.radios.setdefault(name, []).append(value)
            elif kind == "submit":
                self._form.buttons.append((name, value))
            elif kind == "text":
                self._form.texts.append(name)

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "div" and self._prompt_depth:
            self._prompt_depth -= 1

    def handle_data(self, data):
        if self._prompt_depth:
            self.prompt_parts.append(data)


class SimulatedWorker(threading.Thread):
    def __init__(
        self,
        *,
        base_url: str,
        slug: str,
        username: str,
        password: str,
        personality: Personality,
        truth: dict,
        stop: threading.Event,
        pause_scale: float,
        rng: random.Random,
    ):
        super().__init__(name=f"crowd-{username}", daemon=True)
        self.base_url = base_url.rstrip("/") + "/"
        self.slug = slug
        self.password = password
        self.personality = personality
        self.truth = truth
        self.stop_event = stop
        self.pause_scale = pause_scale
        self.rng = rng
        self.result = WorkerResult(username=username, personality=personality.name)
        self.session = requests.Session()

    # --- HTTP -------------------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return urljoin(self.base_url, path.lstrip("/"))

    def _get(self, path: str) -> requests.Response:
        response = self.session.get(self._url(path), timeout=REQUEST_TIMEOUT)
        response.raise_for_status()
        return response

    def _post(self, url: str, data: dict) -> requests.Response:
        # Django checks the Referer of HTTPS requests only; sending it keeps HTTPS deployments working too.
        response = self.session.post(url, data=data, timeout=REQUEST_TIMEOUT, headers={"Referer": url})
        if response.status_code >= 500:
            response.raise_for_status()
        return response

    def _submit(self, page: requests.Response, form: _Form, fields: dict) -> requests.Response:
        return self._post(urljoin(page.url, form.action or page.url), {**form.hidden, **fields})

    def _account_form(self, path: str, fields: dict) -> None:
        page = self._get(path)
        form = _Page(page.text).form("form")
        if form is None:
            raise RuntimeError(f"no form at {page.url}")
        self._submit(page, form, fields)

    def _sign_in(self) -> None:
        """Sign up; on a rerun the account exists already, so sign in. Sign-up comes first because a
        failed sign-in counts against the sign-in throttle of the crowd's address, which every newcomer
        would push towards locking out everybody there, the demo's researcher included."""
        username = self.result.username
        self._account_form(
            "accounts/signup/", {"username": username, "password1": self.password, "password2": self.password}
        )
        if "sessionid" not in self.session.cookies:
            self._account_form("accounts/login/", {"username": username, "password": self.password})
        if "sessionid" not in self.session.cookies:
            raise RuntimeError(f"could not sign in or sign up as {username}")

    # --- answers ----------------------------------------------------------------------------------
    def _answer(self, choices: list[str], truth) -> str:
        if self.personality.same_answer:
            return choices[0]
        known = truth is not None and str(truth) in choices
        if known and self.rng.random() < self.personality.accuracy:
            return str(truth)
        wrong = [c for c in choices if not known or c != str(truth)]
        return self.rng.choice(wrong or choices)

    def _fields(self, form: _Form, prompt_text: str) -> dict:
        truth = self.truth.get(prompt_text)
        if form.radios:  # per-option rating: one radio group per option, value_0, value_1, …
            names = sorted(form.radios, key=lambda name: int(name.rsplit("_", 1)[1]))
            per_option = truth if isinstance(truth, list) and len(truth) == len(names) else [None] * len(names)
            return {name: self._answer(form.radios[name], t) for name, t in zip(names, per_option)}
        if "value" in form.texts:  # free text: the truth is the accepted answers; a wrong one is a shrug
            accepted = [truth] if isinstance(truth, str) else list(truth or [])
            return {"value": self._answer([*accepted, WRONG_ANSWER], accepted[0] if accepted else None)}
        choices = [value for name, value in form.buttons if name == "value"]
        return {"value": self._answer(choices, truth)}

    def _pause(self) -> bool:
        """Think about the prompt; False when the crowd was stopped meanwhile."""
        low, high = self.personality.pause
        return not self.stop_event.wait(self.rng.uniform(low, high) * self.pause_scale)

    # --- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        errors_in_a_row = 0
        try:
            self._sign_in()
            page = self._get(f"w/{self.slug}/next/")
        except (requests.RequestException, RuntimeError) as exc:
            self.result.errors.append(str(exc))
            self.result.stopped_by = "error"
            return
        while True:
            parsed = _Page(page.text)
            if parsed.nothing_left_code is not None:
                self.result.stopped_by = f"nothing_left:{parsed.nothing_left_code}"
                return
            form, stop_form = parsed.form("label-form"), parsed.form("stop-form")
            try:
                if form is None:
                    raise RuntimeError(f"no labeling form at {page.url} (HTTP {page.status_code})")
                volume = self.personality.volume
                if self.stop_event.is_set() or (volume is not None and self.result.labels >= volume):
                    self.result.stopped_by = "stop" if self.stop_event.is_set() else "volume"
                    if stop_form is not None:
                        self._submit(page, stop_form, {})
                    return
                fields = self._fields(form, parsed.prompt_text)
                if not self._pause():
                    continue  # the stop branch above releases the lease
                page = self._submit(page, form, fields)
                if "Saved." in page.text:
                    self.result.labels += 1
                errors_in_a_row = 0
            except (requests.RequestException, RuntimeError) as exc:
                errors_in_a_row += 1
                self.result.errors.append(str(exc))
                if errors_in_a_row >= MAX_CONSECUTIVE_ERRORS or self.stop_event.wait(1.0):
                    self.result.stopped_by = "error"
                    return
                try:
                    page = self._get(f"w/{self.slug}/next/")
                except requests.RequestException as again:
                    self.result.errors.append(str(again))


class Crowd:
    """``size`` simulated workers on one campaign; personalities cycle through ``PERSONALITIES``.

    ``truth`` maps a prompt's text to its true value (what careful workers answer); ``pause_scale``
    multiplies every pause (0 for tests). Usernames are ``<prefix>01``, ``<prefix>02``, …: a rerun
    signs the same workers in again. ``replenish`` replaces the workers who left with newcomers, so a
    crowd that is replenished keeps its size and mix, as a real campaign's stream of arrivals does.
    """

    def __init__(
        self,
        *,
        base_url: str,
        slug: str,
        size: int,
        truth: dict | None = None,
        pause_scale: float = 1.0,
        seed: int | None = None,
        prefix: str = "crowd-",
        personalities=PERSONALITIES,
    ):
        self.stop_event = threading.Event()
        self.size = size
        self._recruit_args = dict(base_url=base_url, slug=slug, truth=truth or {}, pause_scale=pause_scale)
        self._prefix, self._personalities = prefix, personalities
        self._rng = random.Random(seed)
        self._recruited = 0
        self.former: list[WorkerResult] = []
        self.workers = [self._recruit() for _ in range(size)]

    def _recruit(self, personality: Personality | None = None) -> SimulatedWorker:
        n = self._recruited
        self._recruited += 1
        username = f"{self._prefix}{n + 1:02d}"
        personality = personality or self._personalities[n % len(self._personalities)]
        return SimulatedWorker(
            username=username,
            password=f"{username}-labels-things",
            personality=personality,
            stop=self.stop_event,
            rng=random.Random(self._rng.random()),
            **self._recruit_args,
        )

    def start(self, *, stagger: float = 0.0) -> None:
        """Start every worker, ``stagger`` seconds apart, so arrivals spread out like a real crowd's."""
        for worker in self.workers:
            worker.start()
            if stagger and self.stop_event.wait(stagger):
                return

    def replenish(self) -> list[tuple[WorkerResult, str]]:
        """Replace every worker who has left (nothing left for them, volume reached, errors) by a newcomer
        of the same personality, started at once, so the crowd's mix stays as it was; the (leaver's
        result, newcomer's username) pairs."""
        changes = []
        if self.stop_event.is_set():
            return changes
        for i, worker in enumerate(self.workers):
            if worker.ident is not None and not worker.is_alive():
                newcomer = self._recruit(worker.personality)
                newcomer.start()
                self.workers[i] = newcomer
                self.former.append(worker.result)
                changes.append((worker.result, newcomer.result.username))
        return changes

    def stop(self, timeout: float = REQUEST_TIMEOUT + 5) -> None:
        self.stop_event.set()
        self.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self.workers:
            if worker.is_alive():
                worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    @property
    def active(self) -> int:
        return sum(worker.is_alive() for worker in self.workers)

    @property
    def results(self) -> list[WorkerResult]:
        """Every worker's result, those who left and were replaced included."""
        return self.former + [worker.result for worker in self.workers]
