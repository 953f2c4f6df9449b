"""The expansion pages (issue 33): the list, one job (its plan, steps and
verdict per group, refreshing while it runs), and its actions: the request
from a topic's plan, a second approver's approval, a refusal. Each action is
a POST that calls one service and redirects."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from groups.domain.expansion.job import STEP_LABELS, STEPS
from groups.models import ExpansionJob, Topic
from groups.selectors.expansion import expansion_group_pks, expansion_jobs_visible
from groups.services.dispatch import QueueUnavailable
from groups.services.expansion.job import (
    ExpansionJobNotFound,
    expansion_approve,
    expansion_refuse,
    expansion_request,
)
from groups.services.expansion.plan import ExpansionNotFound
from groups.services.lifecycle import Conflict
from groups.text import detail_rows
from groups.web.links import topic_url
from groups.web.views import PAGE_SIZE
from groups.selectors.clusters import topic_with_cluster

REFUSALS = (ValidationError, PermissionDenied, Conflict, QueueUnavailable, ExpansionJobNotFound, ExpansionNotFound)


def _words(error: Exception) -> str:
    return " ".join(error.messages) if isinstance(error, ValidationError) else str(error)


@login_required
@require_GET
def expansion_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(expansion_jobs_visible(user=request.user).order_by("-created_at", "-id"),
                     PAGE_SIZE).get_page(request.GET.get("page"))
    for job in page:
        # How each group ended: protected and copied told apart (issue 43).
        hows = Counter(verdict.get("how") or ("lost" if verdict.get("nothing_lost") is False else "covered")
                       for verdict in (job.verdicts or {}).values() if verdict.get("nothing_lost") is not None)
        job.outcomes = [(how, hows[how]) for how in ("protected", "covered", "copied", "lost") if hows[how]]
    return render(request, "groups/expansions.html", {"page": page})


def _expansion_context(request: HttpRequest, job_id: int) -> dict:
    job = get_object_or_404(expansion_jobs_visible(user=request.user), id=job_id)
    steps = [{"name": name, "label": STEP_LABELS[name], **_step_done(job.steps.get(name))} for name in STEPS]
    pks = expansion_group_pks(cluster_id=job.cluster_id, group_ids=job.decisions)
    groups = [{"group_id": group_id, "pk": pks.get(group_id), "decision": decision, "verdict": job.verdicts.get(group_id)}
              for group_id, decision in sorted(job.decisions.items())]
    return {
        "job": job, "steps": steps, "groups": groups, "active": job.status in ExpansionJob.ACTIVE,
        "awaiting_approval": job.status == ExpansionJob.Status.REQUESTED,
    }


@login_required
@require_GET
def expansion_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """One expansion; its steps, groups and verdicts refresh in place while it is active (live.js, as a
    job's page: no reload, so a reason being typed or the keyboard's place is never lost)."""
    return render(request, "groups/expansion_detail.html", _expansion_context(request, job_id))


@login_required
@require_GET
def expansion_live(request: HttpRequest, job_id: int) -> HttpResponse:
    """The expansion page without its frame, for its live refresh."""
    return render(request, "groups/_expansion.html", _expansion_context(request, job_id))


def _step_done(done: dict | None) -> dict:
    """A step's stored record for the page: when (a time, not its ISO text) and what it found (rows of
    words, groups.text.detail_rows), or nothing for a step not done."""
    if not done:
        return {"done": False}
    try:
        done_at = datetime.fromisoformat(done.get("done_at") or "")
    except (TypeError, ValueError):
        done_at = None
    detail = done.get("detail")
    return {"done": True, "done_at": done_at, "detail": detail_rows(detail) if detail else []}


def _repair_maximums(request: HttpRequest) -> dict[str, dict]:
    """The form's choice per group (protect, repair after, nothing) and its "most offsets ... replays by
    itself": a whole number, or None for an empty field. Anything else is passed on as typed, for the
    service to refuse in words."""
    maximums: dict[str, dict] = {}
    groups, actions = request.POST.getlist("repair_group"), request.POST.getlist("repair_action")
    for index, (group_id, text) in enumerate(zip(groups, request.POST.getlist("repair_max_records"), strict=False)):
        text = text.strip()
        value: object = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else (text or None)
        maximums[group_id] = {"max_records": value}
        if index < len(actions) and actions[index]:
            maximums[group_id]["action"] = actions[index]
    return maximums


@login_required
@require_POST
def expansion_request_view(request: HttpRequest, topic_id: int) -> HttpResponse:
    """The topic page's "Request this expansion": the plan shown (its fingerprint) becomes a job."""
    try:
        topic = topic_with_cluster(topic_id=topic_id)
    except Topic.DoesNotExist:
        raise Http404("no such topic") from None
    text = request.POST.get("partitions", "").strip()
    partitions: object = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else text
    try:
        job = expansion_request(user=request.user, cluster=topic.cluster.name, topic=topic.name,
                                partitions=partitions, fingerprint=request.POST.get("fingerprint", ""),
                                repairs=_repair_maximums(request))
    except REFUSALS as error:
        messages.error(request, f"Not requested: {_words(error)}")
        return redirect(f"{topic_url(topic)}?{urlencode({'partitions': text[:20]})}#expansion")
    messages.success(request, f"Expansion {job.id} requested: it waits for a second approver.")
    return redirect("expansion_detail", job_id=job.id)


@login_required
@require_POST
def expansion_approve_view(request: HttpRequest, job_id: int) -> HttpResponse:
    try:
        expansion_approve(user=request.user, job_id=job_id, fingerprint=request.POST.get("fingerprint", ""))
        messages.success(request, f"Expansion {job_id} approved: it runs now.")
    except REFUSALS as error:
        messages.error(request, f"Not approved: {_words(error)}")
    return redirect("expansion_detail", job_id=job_id)


@login_required
@require_POST
def expansion_refuse_view(request: HttpRequest, job_id: int) -> HttpResponse:
    try:
        expansion_refuse(user=request.user, job_id=job_id, reason=request.POST.get("reason", ""))
        messages.success(request, f"Expansion {job_id} refused: nothing was changed.")
    except REFUSALS as error:
        messages.error(request, f"Not refused: {_words(error)}")
    return redirect("expansion_detail", job_id=job_id)
