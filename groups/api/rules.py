"""Standing rules as JSON (issue 43, item 4), so platform teams can keep
them in Git: list, create, change, delete. Reading needs the viewer role;
writing the same as the admin's and the rules page's (``require_manager``:
the approver role with no team scope), audited as ``repair_rule.*``."""

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja import Router, Status

from groups.api.schemas import Error, PathId, RuleChangeIn, RuleIn, RuleOut
from groups.models import RepairRule
from groups.selectors.access import scope_of
from groups.selectors.clusters import cluster_named
from groups.selectors.protection import rule_named, rule_with_id, rules_listed
from groups.services.lifecycle import Conflict
from groups.services.standing_rules import rule_delete, rule_save

router = Router()
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error}
# The API's names for the model's fields.
FIELDS = {"name": "name", "topics": "topic_pattern", "groups": "group_pattern", "action": "action", "sink": "sink",
          "replay_topic": "replay_topic", "handler": "handler", "max_records": "max_records", "enabled": "enabled"}


class RuleNotFound(LookupError):
    pass


def as_out(rule: RepairRule) -> dict:
    return {"id": rule.id, "cluster": rule.cluster.name, **{api: getattr(rule, field) for api, field in FIELDS.items()},
            "created_at": rule.created_at.isoformat(), "updated_at": rule.updated_at.isoformat()}


def _viewer(request: HttpRequest) -> None:
    if not scope_of(request.user).grants:
        raise PermissionDenied("reading standing rules needs the viewer role")


def _rule(rule_id: int) -> RepairRule:
    rule = rule_with_id(rule_id=rule_id)
    if rule is None:
        raise RuleNotFound(f"no standing rule {rule_id}")
    return rule


def _save(rule: RepairRule, request: HttpRequest) -> RepairRule:
    taken = rule_named(cluster_id=rule.cluster_id, name=rule.name, other_than=rule.id)
    if taken is not None:
        raise Conflict(f"cluster {rule.cluster.name!r} has a rule named {rule.name!r} already (rule {taken.id})")
    return rule_save(rule=rule, by=request.user)


@router.get("rules", response={200: list[RuleOut], 401: Error, 403: Error}, operation_id="rules",
            summary="The standing rules of every cluster, oldest first (the viewer role).")
def rules(request: HttpRequest):
    _viewer(request)
    return [as_out(rule) for rule in rules_listed()]


@router.get("rules/{rule_id}", response={200: RuleOut, 401: Error, 403: Error, 404: Error}, operation_id="rule",
            summary="One standing rule.")
def rule(request: HttpRequest, rule_id: PathId):
    _viewer(request)
    return as_out(_rule(rule_id))


@router.post("rules", response={201: RuleOut, **ERRORS}, operation_id="rule_create",
             summary="Create a standing rule (the approver role with no team scope; audited). action protect: "
             "Gapwatch keeps a member of its own in each live group the rule covers (python manage.py protect) and "
             "commits partitions added by anyone at their log start before the group takes them; repair: a "
             "backfill of what the group missed, up to max_records, once its finding is decided.")
def create(request: HttpRequest, payload: RuleIn):
    cluster = cluster_named(name=payload.cluster)
    if cluster is None:
        raise RuleNotFound(f"no cluster named {payload.cluster!r}")
    rule = RepairRule(cluster=cluster, **{field: getattr(payload, api) for api, field in FIELDS.items()})
    return Status(201, as_out(_save(rule, request)))


@router.patch("rules/{rule_id}", response={200: RuleOut, **ERRORS}, operation_id="rule_change",
              summary="Change a standing rule's fields (those sent); audited with the changes.")
def change(request: HttpRequest, rule_id: PathId, payload: RuleChangeIn):
    rule = _rule(rule_id)
    for api, field in FIELDS.items():
        value = getattr(payload, api)
        if value is not None:
            setattr(rule, field, value)
    return as_out(_save(rule, request))


@router.delete("rules/{rule_id}", response={204: None, **ERRORS}, operation_id="rule_delete",
               summary="Delete a standing rule (audited); the repairs and protections it made stay recorded.")
def delete(request: HttpRequest, rule_id: PathId):
    rule_delete(rule=_rule(rule_id), by=request.user)
    return Status(204, None)
