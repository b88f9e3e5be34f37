"""The researcher forms' duration field: typed as people say it, cleaned to MTurk's seconds."""

import pytest
from django import forms

from annotation.channels.forms import DurationField, duration_text


@pytest.mark.parametrize(
    "typed, seconds",
    [
        ("90", 90),
        ("45 seconds", 45),
        ("10 min", 600),
        ("90 minutes", 5400),
        ("1 hour", 3600),
        ("1h30m", 5400),
        ("1 Day, 12 Hours", 129600),
        ("1 day and 2 hours", 93600),
        ("2 weeks", 1_209_600),
    ],
)
def test_durations_are_read_in_words_or_seconds(typed, seconds):
    assert DurationField().clean(typed) == seconds


@pytest.mark.parametrize(
    "typed, message",
    [
        ("soon", "is not a duration"),
        ("1.5 hours", "is not a duration"),
        ("3 fortnights", "is not a duration"),
        ("1 hour x", "is not a duration"),
        ("²", "is not a duration"),
        ("20 seconds", "Give at least 30 seconds."),
        ("1 hour " * 10, "at most 40 characters"),
    ],
)
def test_what_is_not_a_duration_is_refused(typed, message):
    with pytest.raises(forms.ValidationError, match=message):
        DurationField(min_seconds=30).clean(typed)


def test_an_empty_optional_duration_is_none():
    assert DurationField(required=False).clean("") is None


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (45, "45 seconds"),
        (3600, "1 hour"),
        (5400, "1 hour 30 minutes"),
        (7 * 24 * 3600, "7 days"),
        (129_601, "1 day 12 hours 1 second"),
    ],
)
def test_seconds_are_shown_in_words(seconds, text):
    assert duration_text(seconds) == text
    assert DurationField().clean(text) == seconds  # what is shown reads back the same
