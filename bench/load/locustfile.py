"""Load on the pages and the API, as operators and automation would make it.

Environment: GAPWATCH_LOAD_USERNAME / GAPWATCH_LOAD_PASSWORD (a viewer),
GAPWATCH_LOAD_TOKEN (an API token), GAPWATCH_LOAD_GROUP and GAPWATCH_LOAD_TOPIC
(ids of a stored group and topic). Run by tests/faults/test_load.py, or by hand:

    locust -f bench/load/locustfile.py --headless -u 50 -r 10 -t 60s --host http://127.0.0.1:8000
"""

from __future__ import annotations

import os

from locust import HttpUser, between, task


class Operator(HttpUser):
    """A person with the dashboard open: lists, filters, pages of one group and topic."""

    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.client.get("/accounts/login/", name="login")
        self.client.post(
            "/accounts/login/", name="login",
            data={"username": os.environ["GAPWATCH_LOAD_USERNAME"], "password": os.environ["GAPWATCH_LOAD_PASSWORD"],
                  "csrfmiddlewaretoken": self.client.cookies.get("csrftoken", "")},
            headers={"Referer": f"{self.host}/accounts/login/"},
        )

    @task(4)
    def home(self) -> None:
        self.client.get("/", name="/")

    @task(4)
    def findings_table(self) -> None:
        self.client.get("/findings/table?topic=orders&page=2", name="/findings/table")

    @task(2)
    def group(self) -> None:
        self.client.get(f"/groups/{os.environ['GAPWATCH_LOAD_GROUP']}/", name="/groups/<id>/")

    @task(2)
    def topic(self) -> None:
        self.client.get(f"/topics/{os.environ['GAPWATCH_LOAD_TOPIC']}/", name="/topics/<id>/")

    @task(1)
    def jobs(self) -> None:
        self.client.get("/jobs/", name="/jobs/")

    @task(1)
    def audit(self) -> None:
        self.client.get("/audit/", name="/audit/")


class Automation(HttpUser):
    """A script reading the JSON API with a token."""

    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.client.headers["Authorization"] = f"Token {os.environ['GAPWATCH_LOAD_TOKEN']}"

    @task(3)
    def findings(self) -> None:
        self.client.get("/api/v1/findings?page_size=50", name="/api/v1/findings")

    @task(1)
    def groups(self) -> None:
        self.client.get("/api/v1/groups", name="/api/v1/groups")
