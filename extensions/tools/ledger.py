"""The ``read_page`` tool: one page of the sample's ledger per call (the paged-ledger task).

Each trajectory's instance gets its pages from ``tools_kwargs.read_page.create_kwargs.pages`` (a list
of page texts, written by ``python -m extensions.data.ledger``). Pages are numbered from 1; a page
outside 1..P comes back as an error that says the valid range. The tool knows no answer: it only
shows the data, so it may be offered on held-out rows. Reward per call: none (the outcome decides).
Tool YAML: ``tool_configs/ledger.yaml``.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.tools.schema import bad_arguments, create_kwarg, missing_create_kwarg, schema_from_function


def read_page(page: int, pages: list[str]) -> str:
    """Read one page of the ledger.

    Args:
        page: The page number, from 1 to the number of pages the task names.
        pages: The ledger's pages; supplied by the tool, never by the model.
    """
    if not 1 <= page <= len(pages):
        return f"error: there is no page {page}; the ledger has pages 1 to {len(pages)}"
    return pages[page - 1]


class ReadPageTool(BaseTool):
    """verl tool around ``read_page``; keeps each trajectory's pages."""

    knows_answer = False

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        super().__init__(config, tool_schema or schema_from_function(read_page, hidden={"pages"}))
        self._pages: dict[str, list[str]] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Start a trajectory's instance; ``create_kwargs={"pages": [...]}`` (or ``pages=``)."""
        instance_id = instance_id or str(uuid4())
        pages = create_kwarg(kwargs, "pages")
        self._pages[instance_id] = [str(p) for p in pages] if pages is not None else []
        return instance_id, ToolResponse()

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """The page's text; a missing ledger, bad arguments or a page out of range come back as text."""
        pages = self._pages.get(instance_id)
        if not pages:
            text = missing_create_kwarg(self.name, "pages", "pages")
            return ToolResponse(text=text), 0.0, {"error": "missing_pages"}
        if (bad := bad_arguments(self.tool_schema, parameters)) is not None:
            return bad
        text = read_page(int(parameters["page"]), pages)
        return ToolResponse(text=text), 0.0, {"error": "no_such_page"} if text.startswith("error:") else {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._pages.pop(instance_id, None)
