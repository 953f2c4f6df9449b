"""Pagination for long lists: Django's paginator, reading a page with
``rows_page`` (the page's keys first), so deep pages stay as fast as the
first (the findings list and history, the topics and groups lists)."""

from __future__ import annotations

from django.core.paginator import Page, Paginator

from groups.selectors.lists import rows_page


class KeysFirstPaginator(Paginator):
    """Django's paginator, reading a page with ``rows_page``: page 1,000 of
    100,000 findings, or page 50 of 3,000 groups with their counts, no longer
    computes the rows it skips."""

    def page(self, number) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        return self._get_page(rows_page(self.object_list, start=bottom, stop=top), number, self)
