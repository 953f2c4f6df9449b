"""What every page's header shows: how current each cluster's stored state
is (``freshness``), and the clusters that need attention (``stale_clusters``:
unreachable, or polls running late). Read lazily: a page that does not show
the header (a table fragment, the admin) runs no query."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from groups.domain.scopes import VIEWER
from groups.selectors.access import scope_of
from groups.selectors.lists import clusters_freshness


def current_freshness():
    return clusters_freshness(now=timezone.now(), poll_interval=timedelta(seconds=settings.POLL_INTERVAL_SECONDS))


def freshness(request: HttpRequest) -> dict:
    # RoleRequiredMiddleware checked the role already; paths it leaves open show no clusters.
    if not getattr(request, "has_gapwatch_role", False):
        return {}
    def visible_freshness():
        scope = scope_of(request.user)
        return [c for c in current_freshness() if scope.may(VIEWER, cluster=c.name) is not None]

    clusters = SimpleLazyObject(visible_freshness)
    return {
        "freshness": clusters,
        "stale_clusters": SimpleLazyObject(lambda: [c for c in clusters if c.needs_attention]),
    }
