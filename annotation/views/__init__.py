"""The browser UI: pages for researchers (researcher.py) and for workers (worker.py)."""
