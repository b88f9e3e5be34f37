"""The audits app's pages, one module per page family; ``audits/urls.py`` routes them."""
