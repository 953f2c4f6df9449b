"""The OpenAPI 3.0 description of the JSON API, served at /api/v1/schema.

Hand-written; tests/integration/test_api.py walks a real answer of every
path listed here against it, so a field added to a view without being
described here (or the reverse) fails a test.
"""

from __future__ import annotations

from django.conf import settings

from groups.models import Cluster, ConsumerGroup, Finding

API_VERSION = "1"


def _string(description: str = "", *, nullable: bool = False, **extra) -> dict:
    schema = {"type": "string", **extra}
    if description:
        schema["description"] = description
    if nullable:
        schema["nullable"] = True
    return schema


def _integer(description: str = "", *, nullable: bool = False, **extra) -> dict:
    schema = {"type": "integer", "format": "int64", **extra}
    if description:
        schema["description"] = description
    if nullable:
        schema["nullable"] = True
    return schema


def _boolean(description: str = "") -> dict:
    schema = {"type": "boolean"}
    if description:
        schema["description"] = description
    return schema


def _datetime(description: str = "", *, nullable: bool = False) -> dict:
    return _string(description, nullable=nullable, format="date-time")


def _object(properties: dict, description: str = "", *, optional: tuple[str, ...] = ()) -> dict:
    schema = {
        "type": "object",
        "required": [name for name in properties if name not in optional],
        "properties": properties,
        "additionalProperties": False,
    }
    if description:
        schema["description"] = description
    return schema


def _page_of(item_ref: str) -> dict:
    return _object(
        {
            "count": _integer("Items matching the filters, over all pages.", minimum=0),
            "page": _integer("This page, 1-based.", minimum=1),
            "page_size": _integer(minimum=1, maximum=500),
            "next": _string("URL of the next page.", nullable=True, format="uri"),
            "previous": _string("URL of the previous page.", nullable=True, format="uri"),
            "results": {"type": "array", "items": {"$ref": item_ref}},
        }
    )


FINDING = _object(
    {
        "id": _integer(),
        "cluster": _string("Cluster name."),
        "topic": _string("Topic name."),
        "partition": _integer(format="int32"),
        "group": _string("Consumer group id, verbatim."),
        "generation": _integer("Number of the partition generation that added the partition."),
        "state": _string(enum=list(Finding.State.values)),
        "found_at": _datetime("When the finding was opened."),
        "updated_at": _datetime(),
        "closed_at": _datetime("Null while the finding is open.", nullable=True),
        "closed_reason": _string(),
        "log_start_offset": _integer("Log start offset at the last poll."),
        "high_watermark": _integer("High watermark at the last poll."),
        "committed_offset": _integer("The group's committed offset; null if it has none.", nullable=True),
        "lag": _integer("High watermark minus the committed offset, or minus the log start without one."),
        "missed_definite": _integer("Messages the group certainly never read."),
        "missed_possible": _integer("Messages the group may not have read."),
        "expired": _integer("Missed offsets the log start has passed (retention)."),
        "backfill_start": _integer("Backfill range start, inclusive.", nullable=True),
        "backfill_end": _integer("Backfill range end, exclusive.", nullable=True),
        "policy_source": _string(
            "Where the group's auto.offset.reset came from; null while undecided.",
            nullable=True,
            enum=["declared", "evidenced", "guard", "assumed", None],
        ),
        "explanation": _string(),
        "owner_client_id": _string("Client id of the member that owns the partition; empty if none."),
        "owner_host": _string(),
    },
    "One partition a group may have missed messages on. Offsets are the next message to read; ranges are "
    "half-open [start, end).",
)

CLUSTER = _object(
    {
        "name": _string(),
        "bootstrap_servers": _string(),
        "security_protocol": _string(enum=list(Cluster.SecurityProtocol.values)),
        "sasl_mechanism": _string(enum=list(Cluster.SaslMechanism.values)),
        "sasl_username": _string(),
        "sasl_password_set": _boolean("Whether a SASL password is stored; the password is never returned."),
        "enabled": _boolean(),
        "status": _string(enum=list(Cluster.Status.values)),
        "last_poll_at": _datetime(nullable=True),
        "last_poll_duration_ms": _integer(nullable=True),
        "last_error": _string(),
        "polls_total": _integer(),
        "poll_failures_total": _integer(),
    }
)

TOPIC = _object(
    {
        "cluster": _string("Cluster name."),
        "name": _string(),
        "topic_id": _string("Kafka topic id of the current lineage."),
        "partition_count": _integer(),
        "deleted": _boolean(),
        "internal": _boolean(),
        "generation": _integer("Latest partition generation number; null before the first.", nullable=True),
        "first_seen_at": _datetime(),
    }
)

GROUP = _object(
    {
        "cluster": _string("Cluster name."),
        "group_id": _string("Consumer group id, verbatim."),
        "state": _string("Group state as the broker reports it."),
        "type": _string("classic or consumer (KIP-848)."),
        "assignor": _string(),
        "member_count": _integer(),
        "declared_policy": _string(enum=list(ConsumerGroup.Policy.values)),
        "present": _boolean("Whether the cluster still lists the group."),
        "topics": {
            "type": "array",
            "items": _object({"topic": _string(), "lag": _integer("Total lag of the group on the topic.")}),
        },
        "open_findings": _integer(),
    }
)

JOB = _object(
    {
        "id": _integer(),
        "kind": _string(enum=["reset", "backfill"]),
        "status": _string(enum=["requested", "approved", "queued", "waiting", "running", "succeeded", "failed",
                                "cancelled"]),
        "cluster": _string(),
        "group": _string("Consumer group id (arbitrary text)."),
        "findings": {"type": "array", "items": _integer()},
        "params": {"type": "object",
                   "description": "reset: target and value; backfill: sink, and replay_topic or handler."},
        "plan": {"type": "array", "items": {"type": "object"}, "description": "Per partition, stored before anything runs."},
        "result": {"type": "object"},
        "progress_done": _integer(nullable=True),
        "progress_total": _integer(nullable=True),
        "status_reason": _string(),
        "error": _string(),
        "requested_by": _string(nullable=True),
        "approved_by": _string(nullable=True),
        "retry_of": _integer(nullable=True),
        "created_at": _datetime(),
        "started_at": _datetime(nullable=True),
        "finished_at": _datetime(nullable=True),
    }
)

ERROR = _object(
    {
        "error": _string(),
        "parameter": _string("The query parameter at fault; absent on 401 and 405."),
    },
    optional=("parameter",),
)

PAGE_PARAMETERS = [
    {"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 1}},
    {
        "name": "page_size",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
    },
]
CLUSTER_PARAMETER = {
    "name": "cluster",
    "in": "query",
    "description": "Cluster name.",
    "schema": {"type": "string"},
}


def _responses(ok_schema: dict, *, bad_request: bool = True) -> dict:
    responses = {
        "200": {"description": "OK", "content": {"application/json": {"schema": ok_schema}}},
        "401": {
            "description": "Not logged in.",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        },
    }
    if bad_request:
        responses["400"] = {
            "description": "A bad query parameter, named in the answer.",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return responses


def openapi_document() -> dict:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Gapwatch API",
            "version": API_VERSION,
            "description": "Clusters, topics, consumer groups and the partitions groups missed; approve "
            "or dismiss remediations. An empty query parameter counts as absent.",
        },
        "servers": [{"url": "/"}],
        "security": [{"session": []}, {"token": []}],
        "paths": {
            "/api/v1/findings": {
                "get": {
                    "operationId": "findings_list",
                    "summary": "Findings, newest first.",
                    "parameters": [
                        CLUSTER_PARAMETER,
                        {"name": "topic", "in": "query", "description": "Topic name.", "schema": {"type": "string"}},
                        {
                            "name": "group",
                            "in": "query",
                            "description": "Consumer group id, exact match.",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "state",
                            "in": "query",
                            "schema": {"type": "string", "enum": list(Finding.State.values)},
                        },
                        {
                            "name": "include_closed",
                            "in": "query",
                            "description": "Also list closed findings.",
                            "schema": {"type": "boolean", "default": False},
                        },
                        *PAGE_PARAMETERS,
                    ],
                    "responses": _responses({"$ref": "#/components/schemas/FindingPage"}),
                }
            },
            "/api/v1/clusters": {
                "get": {
                    "operationId": "clusters_list",
                    "summary": "Clusters by name.",
                    "parameters": PAGE_PARAMETERS,
                    "responses": _responses({"$ref": "#/components/schemas/ClusterPage"}),
                }
            },
            "/api/v1/topics": {
                "get": {
                    "operationId": "topics_list",
                    "summary": "Topics by cluster and name.",
                    "parameters": [CLUSTER_PARAMETER, *PAGE_PARAMETERS],
                    "responses": _responses({"$ref": "#/components/schemas/TopicPage"}),
                }
            },
            "/api/v1/groups": {
                "get": {
                    "operationId": "groups_list",
                    "summary": "Consumer groups by cluster and group id.",
                    "parameters": [CLUSTER_PARAMETER, *PAGE_PARAMETERS],
                    "responses": _responses({"$ref": "#/components/schemas/GroupPage"}),
                }
            },
            "/api/v1/jobs": {
                "get": {
                    "operationId": "jobs_list",
                    "summary": "Remediation jobs, newest first.",
                    "parameters": [
                        {"name": "status", "in": "query", "schema": JOB["properties"]["status"]},
                        {"name": "kind", "in": "query", "schema": JOB["properties"]["kind"]},
                        *PAGE_PARAMETERS,
                    ],
                    "responses": _responses({"$ref": "#/components/schemas/JobPage"}),
                }
            },
            "/api/v1/findings/{id}/approve": {
                "post": {
                    "operationId": "finding_approve",
                    "summary": "Request (and, without four-eyes, approve) a reset or a backfill; needs the approver "
                    "role. Session requests need a CSRF token; token requests do not.",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": _integer()}],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _object({
                        "kind": _string(enum=["reset", "backfill"]),
                        "target": _string(enum=["earliest", "offset", "timestamp", "shift"]),
                        "value": _integer("offset, shift, or epoch milliseconds", nullable=True),
                        "sink": _string(enum=["parquet", "kafka", "handler"]),
                        "replay_topic": _string("kafka sink: the replay topic of this job (default: the "
                                                "group's, or <topic>.replay)"),
                        "handler": _string("handler sink: one of the server's BACKFILL_HANDLERS"),
                        "also": {"type": "array", "items": _integer(), "description": "More findings of the same group."},
                    }, optional=("target", "value", "sink", "replay_topic", "handler", "also"))}}},
                    "responses": {
                        "201": {"description": "Created", "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Job"}}}},
                        "400": {"description": "Bad input", "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Error"}}}},
                        "403": {"description": "Not an approver"},
                        "409": {"description": "An active job of this kind already covers the finding."},
                    },
                }
            },
            "/api/v1/findings/{id}/dismiss": {
                "post": {
                    "operationId": "finding_dismiss",
                    "summary": "Close a finding with a required reason; needs the approver role.",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": _integer()}],
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": _object({"reason": _string()})}}},
                    "responses": {
                        "200": {"description": "Dismissed"},
                        "400": {"description": "Bad input", "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Error"}}}},
                        "403": {"description": "Not an approver"},
                    },
                }
            },
            "/api/v1/schema": {
                "get": {
                    "operationId": "schema",
                    "summary": "This document.",
                    "responses": _responses({"type": "object"}, bad_request=False),
                }
            },
        },
        "components": {
            "securitySchemes": {
                "session": {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME},
                "token": {"type": "apiKey", "in": "header", "name": "Authorization",
                          "description": "`Token <key>`; create keys in the admin or with manage.py create_api_token."},
            },
            "schemas": {
                "Finding": FINDING,
                "Cluster": CLUSTER,
                "Topic": TOPIC,
                "Group": GROUP,
                "Error": ERROR,
                "FindingPage": _page_of("#/components/schemas/Finding"),
                "ClusterPage": _page_of("#/components/schemas/Cluster"),
                "TopicPage": _page_of("#/components/schemas/Topic"),
                "GroupPage": _page_of("#/components/schemas/Group"),
                "Job": JOB,
                "JobPage": _page_of("#/components/schemas/Job"),
            },
        },
    }
