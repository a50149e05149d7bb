"""An MCP server of the tests' own (official Python SDK, MCPServer), started by rojos as
`[mcp.servers.pytools]`: tools that answer, refuse, raise, crash the process and hang, each
logging its calls on stderr so the tests can tell what reached the server.

`tool_server.py` serves over stdio; `tool_server.py --http PORT` serves the same tools over
Streamable HTTP at `http://127.0.0.1:PORT/mcp` (started by the tests, reached by rojos's
`url`)."""

import os
import subprocess
import sys

import anyio

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("pytools")


def log(line: str) -> None:
    print(f"tool_server {os.getpid()}: {line}", file=sys.stderr, flush=True)


@server.tool()
def echo(text: str) -> str:
    """Echoes the text back."""
    log(f"called echo {text}")
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    log("called add")
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Raises an error with the reason (a `ToolError`, whose message the SDK passes on)."""
    log("called fail")
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    log("called crash")
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answers."""
    log("called hang")
    await anyio.sleep(3600)
    return "never"


@server.tool()
def spawn_helper() -> str:
    """Starts a long-running helper process (as servers started by npx have) and returns its
    pid."""
    helper = subprocess.Popen(
        ["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    log(f"called spawn_helper {helper.pid}")
    return str(helper.pid)


@server.tool()
def pid(tag: str = "") -> str:
    """The server process's id."""
    log(f"called pid {tag}")
    return str(os.getpid())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        log(f"started on port {sys.argv[2]}")
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        log("started")
        server.run("stdio")
