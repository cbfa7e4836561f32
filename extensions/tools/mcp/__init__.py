"""MCP (Model Context Protocol) servers' tools inside the agent loop, through the official ``mcp`` SDK.

- ``config.py``: the standard ``{"mcpServers": ...}`` JSON and the tool YAML's ``config:`` keys;
- ``client.py``: connections (stdio subprocesses, streamable HTTP) on one background loop per process;
- ``tool.py``: ``MCPTool``, a verl ``BaseTool`` per server tool, schema from the server's ``list_tools``;
- ``legacy.py``: verl <= 0.8's ``config.type: mcp`` tool YAML, expanded into ``MCPTool`` entries;
- ``example_server.py``: an offline example server (units converter, corpus search).

See README.md, section "MCP tools", and ``tool_configs/mcp_units_search.yaml``.
"""

from extensions.tools.mcp.tool import MCPTool

__all__ = ["MCPTool"]
