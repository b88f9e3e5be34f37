"""Pages of the channels app, by audience: ``mturk`` (MTurk's iframe task page), ``panel`` (a
link-based panel's participants) and ``researcher`` (publishing and following publications)."""
