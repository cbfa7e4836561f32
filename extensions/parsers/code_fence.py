"""``format: code_fence``: a trailing fenced ```` ```python ```` block is one call (``extensions/code_fence.py``)."""

from __future__ import annotations

from extensions.code_fence import CodeFenceSettings, trailing_call
from extensions.parsers.base import Attempt, DetailedToolParser, ParseResult


class CodeFenceToolParser(DetailedToolParser):
    """verl ``ToolParser`` for ``format: code_fence``: a trailing ```` ```python ```` block is one call.

    Only the block that ends the text counts (the loop runs the others as they are written);
    ``configure`` sets the languages, tool and argument of a loop's ``code_fence`` settings.
    """

    settings = CodeFenceSettings()

    def configure(self, settings: CodeFenceSettings) -> CodeFenceToolParser:
        self.settings = settings
        return self

    def scan(self, visible: str) -> list[Attempt]:
        block = trailing_call(visible, self.settings.languages)
        if block is None:
            return []
        example = f"```{self.settings.languages[0]}\\n<code>\\n```"
        arguments = {self.settings.argument: block.code}
        return [Attempt(block.start, block.end, example, name=self.settings.tool, arguments=arguments)]

    def parse(self, text: str) -> ParseResult:
        result = super().parse(text)
        result.content = text.strip()  # the block stays in the message: it is what the model wrote
        return result
