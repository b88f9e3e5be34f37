import os
import threading

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()


def _warm_up() -> None:
    """Import the researchers' pages' heavy libraries (scipy.stats and pandas: seconds together on a
    busy machine) in the background, so a web process is ready at once and its first instrument card
    or leaderboard does not pay for them."""
    import pandas  # noqa: F401, PLC0415
    import scipy.stats  # noqa: F401, PLC0415


threading.Thread(target=_warm_up, name="chorus-warm-up", daemon=True).start()
