"""The agents namespace: every public name exists and is documented; extras load on first use."""

from __future__ import annotations

import inspect

import pytest

import interlock.agents as agents
from _imports import run_fresh


def test_all_names_exist_are_unique_and_documented() -> None:
    assert len(agents.__all__) == len(set(agents.__all__))
    for name in agents.__all__:
        obj = getattr(agents, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = inspect.getdoc(obj)
            assert doc and doc.split("\n")[0].endswith("."), f"{name} needs a one-sentence summary"
    assert {"OpenAIChatModel", "AnthropicChatModel", "MCPServer"} <= set(dir(agents))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agents.Nope  # noqa: B018


def test_the_agents_layer_imports_without_its_extras() -> None:
    # As on a machine without the openai and mcp packages: importing them fails.
    code = (
        "import sys; sys.modules['openai'] = None; sys.modules['mcp'] = None\n"
        "sys.modules['anthropic'] = None\n"
        "import interlock.agents as a\n"
        "assert a.ToolAgent\n"
        "try:\n    a.MCPServer\nexcept ImportError as e:\n    print('mcp:', e)\n"
        "try:\n    a.OpenAIChatModel\nexcept ImportError as e:\n    print('openai:', e)\n"
        "try:\n    a.AnthropicChatModel\nexcept ImportError as e:\n    print('claude:', e)\n"
    )
    stdout = "\n".join(run_fresh(code))
    assert "interlock[mcp]" in stdout
    assert "openai" in stdout.split("openai:", 1)[1].split("claude:")[0]
    assert "interlock[anthropic]" in stdout.split("claude:", 1)[1]
