from django.contrib import admin
from django.urls import include, path

from controlplane.health import health_page, healthz
from controlplane.metrics import metrics
from groups.web import sso

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("health/", health_page, name="health"),
    path("metrics", metrics, name="metrics"),
    path("api/v1/", include("groups.api.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", sso.Login.as_view(), name="login"),
    path("accounts/logout/", sso.Logout.as_view(), name="logout"),
    path("oidc/authenticate/", sso.LoginStart.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.LoginCallback.as_view(), name="oidc_callback"),
    path("", include("groups.web.urls")),
]

# Django's own 400, 403 and 404 pages draw templates/400.html, 403.html and 404.html with the request.
handler500 = "groups.web.errors.server_error"
