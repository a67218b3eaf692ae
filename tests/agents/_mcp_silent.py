"""An MCP server stuck at start-up: it reads requests on stdin and never answers one.

It records its pid first (``MCP_TEST_PIDS``, as `_mcp_server.py` does), imports nothing else,
and exits when its stdin closes, as a server blocked on its input would.
"""

import os
import sys

pids = os.environ.get("MCP_TEST_PIDS")
if pids:
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\n")
for _request in sys.stdin:
    pass  # never answered
