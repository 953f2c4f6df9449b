"""The expansion endpoint: the plan of adding partitions to a topic (issue
33, item 1). Planned only: ``dry_run`` must be true, and nothing changes."""

from django.http import HttpRequest
from ninja import Router

from groups.api.schemas import Error, ExpansionIn, ExpansionPlanOut
from groups.services import expansions

router = Router()


@router.post("expansions", response={200: ExpansionPlanOut, 400: Error, 401: Error, 403: Error, 404: Error},
             operation_id="expansion_plan",
             summary="The plan of raising a topic's partition count, per group that reads it: its policy and where "
             "it comes from, what the expansion does to it (covered, protected before, repaired after, at risk) "
             "and why, the offsets it is expected to miss (an estimate), and the broker's verdict "
             "(CreatePartitions with validate_only). Needs the viewer role on the topic. Only a dry run so far: "
             "dry_run false or missing is a 400 and changes nothing. Session requests need a CSRF token.")
def plan(request: HttpRequest, payload: ExpansionIn):
    planned = expansions.expansion_plan(user=request.user, cluster=payload.cluster, topic=payload.topic,
                                        partitions=payload.partitions, dry_run=payload.dry_run)
    return expansions.expansion_plan_as_dict(planned)
