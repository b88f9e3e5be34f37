from django.urls import path

from annotation.webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("", views.webhooks_page, name="page"),
    path("<int:pk>/<str:action>/", views.endpoint_act, name="act"),
]
