"""Each user's own page: their personal API tokens (issue 23, item 5), the
time zone their pages show times in (issue 44, item 3) and their color
scheme (issue 44: light, dark or the system's).

A token is shown once, in the answer to the POST that made it (never stored,
never cached); the list shows its prefix, expiry, last use and whether it is
read-only or revoked. A user can revoke only their own tokens (someone
else's id is a 404)."""

from __future__ import annotations

from zoneinfo import available_timezones

from django import forms
from django.core.exceptions import ValidationError
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from groups.models import ApiToken, PersonSettings
from groups.services.accounts import person_color_scheme_set, person_time_zone_set
from groups.services.tokens import TokenRefused, api_token_create, api_token_revoke
from groups.selectors.access import api_tokens_of


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name (what the token is for)")
    read_only = forms.BooleanField(required=False, label="Read-only (may not approve, dismiss or cancel anything)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The limits are settings, read when the form is made (tests change them).
        self.fields["days"] = forms.IntegerField(
            min_value=1, max_value=settings.API_TOKEN_MAX_DAYS, initial=settings.API_TOKEN_DEFAULT_DAYS,
            label=f"Valid for (days, at most {settings.API_TOKEN_MAX_DAYS})")
        self.order_fields(["name", "days", "read_only"])


def _page(request: HttpRequest, form: TokenForm, *, new_key: str | None = None, status: int = 200,
          zone_error: str = "", scheme_error: str = "") -> HttpResponse:
    tokens = api_tokens_of(user=request.user)
    return render(request, "account/tokens.html", {
        "form": form, "tokens": tokens, "new_key": new_key, "now": timezone.now(),
        "time_zones": sorted(available_timezones()), "zone_error": zone_error,
        "color_schemes": PersonSettings.ColorScheme.choices, "scheme_error": scheme_error,
    }, status=status)


@never_cache
@login_required
@require_GET
def tokens(request: HttpRequest) -> HttpResponse:
    return _page(request, TokenForm())


@never_cache
@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        token, key = api_token_create(user=request.user, name=form.cleaned_data["name"],
                                      days=form.cleaned_data["days"], read_only=form.cleaned_data["read_only"],
                                      created_by=request.user)
    except TokenRefused as error:
        form.add_error(None, str(error))
        return _page(request, form, status=400)
    return _page(request, TokenForm(), new_key=key)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = api_token_revoke(token_id=token_id, owner=request.user, by=request.user)
    except ApiToken.DoesNotExist:
        raise Http404("no such token of yours") from None
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) is revoked.")
    return redirect("account_tokens")


@login_required
@require_POST
def time_zone_set(request: HttpRequest) -> HttpResponse:
    """The person's time zone for every page (empty: the browser's); a zone not offered is a 400 saying so."""
    try:
        zone = person_time_zone_set(user=request.user, time_zone=request.POST.get("time_zone", ""))
    except ValidationError as error:
        return _page(request, TokenForm(), status=400, zone_error=" ".join(error.messages))
    messages.success(request, f"Times are shown in {zone}." if zone else "Times are shown in your browser's time zone.")
    return redirect("account_tokens")


@login_required
@require_POST
def color_scheme_set(request: HttpRequest) -> HttpResponse:
    """The person's color scheme for every page (system, light or dark); anything else is a 400 saying so."""
    try:
        scheme = person_color_scheme_set(user=request.user, color_scheme=request.POST.get("color_scheme", ""))
    except ValidationError as error:
        return _page(request, TokenForm(), status=400, scheme_error=" ".join(error.messages))
    messages.success(request, "Pages follow your system's light or dark setting." if scheme == "system"
                     else f"Pages are {scheme} whatever your system's setting.")
    return redirect("account_tokens")
