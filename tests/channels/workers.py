"""Simulated workers for the end-to-end tests: MTurk workers who find HITs on the fake MTurk, open
Chorus's real task page (Django test client, a fresh cookie-less client per request, as inside
MTurk's iframe) and post the finished assignment to the fake's externalSubmit endpoint."""

import html
import re
from urllib.parse import urlsplit

import requests
from django.test import Client

_FORM = re.compile(r'<form method="post" action="([^"]+)" class="label-form"')
_SUBMIT = re.compile(r'<form method="post" action="([^"]+)" class="mturk-submit-form">(.*?)</form>', re.S)
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_PROMPT = re.compile(r'<div class="prompt-text">(.*?)</div>', re.S)

#: The MTurk publishing options of the page tests: three assignments per HIT.
OPTIONS = {"title": "Is it true?", "description": "Label statements.", "reward": "0.10", "assignments_per_hit": 3}


def fresh_client() -> Client:
    return Client()  # no cookie survives from one page to the next, like a third-party iframe


def label_form_action(response) -> str:
    match = _FORM.search(response.content.decode())
    assert match, response.content.decode()[:2000]
    return html.unescape(match.group(1))


def open_task(fake, assignment_id: str):
    return fresh_client().get(fake.task_path(assignment_id))


def submit_to_mturk(response) -> requests.Response:
    """Post the submit page's form to MTurk (the fake), as the page's script does."""
    page = response.content.decode()
    match = _SUBMIT.search(page)
    assert match, page[:2000]
    action = html.unescape(match.group(1))
    fields = {name: html.unescape(value) for name, value in _HIDDEN.findall(match.group(2))}
    return requests.post(action, data=fields, timeout=10)


def mturk_worker_turn(fake, worker_id: str, value=1, *, returns: bool = False) -> str:
    """One HIT for this worker: "no_hits", "nothing_left", "returned" or "labeled"."""
    visible = fake.visible_hits(worker_id)
    if not visible:
        return "no_hits"
    assignment_id = fake.accept(visible[0], worker_id)
    page = open_task(fake, assignment_id)
    assert page.status_code == 200, page.content[:500]
    if b"Nothing left for you" in page.content:
        fake.return_assignment(assignment_id)
        return "nothing_left"
    if returns:
        fake.return_assignment(assignment_id)
        return "returned"
    action = label_form_action(page)
    done = fresh_client().post(action, {"value": str(value), "client_token": "ignored"})
    assert done.status_code == 200 and b"mturk-submit-form" in done.content, done.content[:800]
    posted = submit_to_mturk(done)
    assert posted.status_code == 200, posted.text
    return "labeled"


def action_path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + ("?" + parts.query if parts.query else "")
