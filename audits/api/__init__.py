"""The audits app's REST views, one module per resource; routed in ``annotation/api/urls.py`` under the
one API namespace."""
