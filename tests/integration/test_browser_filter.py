"""Lists that filter as one types (issue 44, item 1), in a real headless
Chromium: the topics, groups and findings lists ask for the filtered page
after a pause in typing, keep the focus in the box, write the filters in
the address (so the pager keeps them) and still work without scripts; a
hostile group id typed or shown stays text. A cluster switcher in the header
when there are several clusters."""

from __future__ import annotations

import pytest

from tests.factories import HOSTILE_GROUP_ID, make_cluster, make_finding, make_generation, make_group, make_topic
from tests.harness.browser import OPERATOR_PASSWORD, approver_operator, log_in
from tests.harness.pages import client_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def listed_page(live_server, page):
    """Cluster prod: 60 topics beta-NN and 3 alpha-N; groups alpha-reader and a hostile one,
    each with a finding; cluster other: one topic. Logged in as an approver."""
    prod, other = make_cluster("prod"), make_cluster("other")
    topics = [make_topic(prod, f"beta{n:02d}") for n in range(60)] + [make_topic(prod, f"alpha{n}") for n in range(3)]
    make_topic(other, "othertopic")
    generation = make_generation(topics[-1], 2, (0, 1, 2, 3))
    make_finding(make_group(prod, "alphareader"), generation, 2)
    make_finding(make_group(prod, HOSTILE_GROUP_ID), generation, 3)
    log_in(page, live_server, approver_operator().username, OPERATOR_PASSWORD)
    return page


def _rows(page, selector: str) -> list[str]:
    return page.locator(selector).all_inner_texts()


def test_it_filters_the_topics_as_one_types_and_the_pager_keeps_it(listed_page, live_server):
    page = listed_page
    page.goto(f"{live_server.url}/topics/")
    box = page.locator("input[name=q]")
    box.press_sequentially("beta", delay=40)
    page.wait_for_function("() => new URLSearchParams(location.search).get('q') === 'beta'")
    page.wait_for_function("() => [...document.querySelectorAll('table.browse-topics tbody tr')]"
                           ".every(row => row.textContent.includes('beta'))")
    assert page.evaluate("document.activeElement.name") == "q", "the box keeps the focus"
    assert page.locator("nav.pager").inner_text().count("60 in all") == 1
    page.locator("nav.pager a", has_text="next").click()
    page.wait_for_url("**/topics/?q=beta&page=2")
    assert len(_rows(page, "table.browse-topics tbody tr")) == 10
    assert all("beta" in row for row in _rows(page, "table.browse-topics tbody tr"))


def test_it_filters_the_groups_and_the_findings_and_hostile_text_stays_text(listed_page, live_server):
    page = listed_page
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/groups/")
    page.locator("input[name=q]").press_sequentially("<script", delay=40)
    page.wait_for_function("() => new URLSearchParams(location.search).get('q') === '<script'")
    page.wait_for_function("() => document.querySelectorAll('table tbody tr').length === 1")
    assert "<script>alert(1)</script>" in page.locator("table tbody tr").inner_text()

    page.goto(f"{live_server.url}/?view=partitions")
    page.locator("input[name=group]").press_sequentially("alpha", delay=40)
    page.wait_for_function("() => new URLSearchParams(location.search).get('group') === 'alpha'")
    page.wait_for_function("() => document.querySelectorAll('#findings-table tbody tr').length === 1")
    # The live refresh asks for the same filters from now on.
    assert "group=alpha" in page.locator("#findings-table").get_attribute("data-refresh-url")
    assert dialogs == []


def test_the_filter_form_works_without_scripts(chromium, live_server, db):
    make_topic(make_cluster("prod"), "gamma")
    make_topic(make_cluster("prod2"), "delta")
    context = chromium.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_server, approver_operator().username, OPERATOR_PASSWORD)
        page.goto(f"{live_server.url}/topics/")
        page.fill("input[name=q]", "gam")
        page.locator("form.filters button[type=submit]").click()
        page.wait_for_url("**/topics/?*q=gam*")
        assert [row.split("\t")[0] for row in page.locator("table.browse-topics tbody tr").all_inner_texts()] == ["gamma"]
    finally:
        context.close()


def test_the_cluster_switcher_takes_the_list_to_one_cluster(listed_page, live_server):
    page = listed_page
    page.goto(f"{live_server.url}/topics/")
    page.locator("form.cluster-switcher select").select_option("other")
    page.wait_for_url("**/topics/?cluster=other")
    assert [row.split("\t")[0] for row in _rows(page, "table.browse-topics tbody tr")] == ["othertopic"]


def test_the_switcher_is_there_only_with_several_clusters(db, viewer):
    make_cluster("only")
    client = client_for(viewer)
    assert "cluster-switcher" not in client.get("/topics/").content.decode()
    make_cluster("second")
    assert 'class="cluster-switcher"' in client.get("/topics/").content.decode()
