"""The audits app's REST views, one module per resource; routed in ``audits/api/urls.py``, which
``config/urls.py`` includes beside annotation's API in one namespace."""
