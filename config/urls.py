from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path

from annotation.api import urls as annotation_api
from annotation.throttling import ThrottledAuthenticationForm
from annotation.views.worker import signup
from audits.api import urls as audits_api

# Each app routes its own API; clients see one, under /api/ and one URL namespace ("api:audit" and
# "api:campaign" alike), so annotation's routes come first and the audit's after them, as one list.
api = ([*annotation_api.urlpatterns, *audits_api.urlpatterns], "api")

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/signup/", signup, name="signup"),
    path("accounts/login/", LoginView.as_view(authentication_form=ThrottledAuthenticationForm), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include(api)),
    path("channels/", include("annotation.channels.urls")),
    path("webhooks/", include("annotation.webhooks.urls")),
    path("audits/", include("audits.urls")),
    path("", include("annotation.urls")),
]

# Under /api/ a missing route or a crash still answers in the API's error shape.
handler404 = "annotation.api.exceptions.not_found"
handler500 = "annotation.api.exceptions.server_error"
