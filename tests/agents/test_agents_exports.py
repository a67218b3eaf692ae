"""The agents namespace: every public name exists and is documented; extras load on first use."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import interlock
import interlock.agents as agents


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
    src = str(Path(interlock.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "interlock[mcp]" in out.stdout
    assert "openai" in out.stdout.split("openai:", 1)[1].split("claude:")[0]
    assert "interlock[anthropic]" in out.stdout.split("claude:", 1)[1]
