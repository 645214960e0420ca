from __future__ import annotations

from django.contrib.auth import views as auth_views  # type: ignore[import-untyped]
from django.urls import include, path  # type: ignore[import-untyped]

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
