"""Tests for extensions/tools: the sandbox, the three tools, their shared schema helpers and tool_configs/."""
