"""An MCP server of the tests' own (official Python SDK, MCPServer), started by rojos as
`[mcp.servers.pytools]`: tools that answer, refuse, raise, crash the process and hang, each
logging its calls on stderr so the tests can tell what reached the server; and tools that
change its tool list (`add_tool`, `remove_tool`), sending `notifications/tools/list_changed`.

Two environment variables shape a start: `PYTOOLS_EXTRA_TOOLS_FILE`, a file whose lines name
tools to register at start (when it exists); `PYTOOLS_START_ONLY_IF`, a file without which
the server exits at once with status 1; `PYTOOLS_START_DELAY_SECS`, seconds to wait before
answering the handshake (a slow start, as `npx` fetching a package).

`tool_server.py` serves over stdio; `tool_server.py --http PORT` serves the same tools over
Streamable HTTP at `http://127.0.0.1:PORT/mcp` (started by the tests, reached by rojos's
`url`)."""

import os
import subprocess
import sys
import time

import anyio

from mcp.server.mcpserver import Context, MCPServer
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


def extra_tool(name: str):
    """A tool called NAME that echoes its text with its name."""

    def extra(text: str = "") -> str:
        log(f"called {name} {text}")
        return f"{name}: {text}"

    return extra


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Registers a tool called NAME and tells the client the tool list changed."""
    server.add_tool(extra_tool(name), name=name, description=f"The added tool {name}.")
    await ctx.session.send_tool_list_changed()
    log(f"called add_tool {name}")
    return f"added {name}"


@server.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Removes the tool called NAME and tells the client the tool list changed."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    log(f"called remove_tool {name}")
    return f"removed {name}"


if __name__ == "__main__":
    delay = float(os.environ.get("PYTOOLS_START_DELAY_SECS", "0"))
    if delay:
        log(f"starting slowly: {delay} s")
        time.sleep(delay)
    required = os.environ.get("PYTOOLS_START_ONLY_IF")
    if required and not os.path.exists(required):
        log(f"not starting: {required} does not exist")
        sys.exit(1)
    extras = os.environ.get("PYTOOLS_EXTRA_TOOLS_FILE")
    if extras and os.path.exists(extras):
        with open(extras) as names:
            for name in filter(None, (line.strip() for line in names)):
                server.add_tool(extra_tool(name), name=name, description=f"The extra tool {name}.")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        log(f"started on port {sys.argv[2]}")
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        log("started")
        server.run("stdio")
