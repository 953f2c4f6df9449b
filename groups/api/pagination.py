"""The one pagination of every list: ``page`` (1-based) and ``page_size``
(default 50, at most 500); the answer is ``{"count", "page", "page_size",
"next", "previous", "results"}``."""


from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Field, Schema
from ninja.pagination import PaginationBase
from pydantic import ConfigDict

from groups.api.schemas import BlankIsAbsent
from groups.selectors.lists import rows_page

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def _page_url(request: HttpRequest, page: int) -> str:
    # QueryDict.urlencode re-encodes every value, so hostile group ids survive.
    params = request.GET.copy()
    params["page"] = str(page)
    return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


class PageQuery(BlankIsAbsent):
    page: int = Field(1, ge=1, description="This page, 1-based.")
    page_size: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)


class PageNumbers(PaginationBase):
    Input = PageQuery

    class Output(Schema):
        model_config = ConfigDict(json_schema_extra={"additionalProperties": False})
        count: int = Field(ge=0, description="Items matching the filters, over all pages.")
        page: int = Field(ge=1, description="This page, 1-based.")
        page_size: int = Field(ge=1, le=MAX_PAGE_SIZE)
        next: str | None = Field(json_schema_extra={"format": "uri"}, description="URL of the next page.")
        previous: str | None = Field(json_schema_extra={"format": "uri"}, description="URL of the previous page.")
        results: list[Any]

    items_attribute = "results"

    def paginate_queryset(self, queryset: QuerySet, pagination: PageQuery, request: HttpRequest, **params: Any) -> dict:
        """One count and one query for the page (plus the queryset's prefetches),
        which picks the page's keys before reading its rows (``rows_page``).

        A page past the end is an empty page, not an error: a client walking
        ``next`` while findings close can land there; ``previous`` then points
        at the last page.
        """
        page, page_size = pagination.page, pagination.page_size
        count = queryset.count()
        last_page = max(1, -(-count // page_size))
        start = (page - 1) * page_size
        return {
            "count": count,
            "page": page,
            "page_size": page_size,
            "next": _page_url(request, page + 1) if page < last_page else None,
            "previous": _page_url(request, min(page - 1, last_page)) if page > 1 else None,
            "results": list(rows_page(queryset, start=start, stop=start + page_size)) if start < count else [],
        }
