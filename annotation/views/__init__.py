"""The browser UI: pages for researchers (researcher.py) and for workers (worker.py); the labeling page
every channel shares, native or not (task.py)."""
