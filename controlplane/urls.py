from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from controlplane.health import healthz
from controlplane.metrics import metrics

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("api/v1/", include("groups.api.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("groups.web.urls")),
]
