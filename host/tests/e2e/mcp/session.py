"""One MCP session against a running rojos host, driven by the official Python SDK (`mcp`).

Used by host/tests/e2e/mcp_server.rs. Usage:

    python3 session.py ENDPOINT TOKEN MODE CALLS

ENDPOINT is the host's `/mcp/{projectId}?rojo=NAME` URL, TOKEN its bearer token; or ENDPOINT
is a JSON array, a command line that serves MCP on stdio (`rojos mcp …`), and TOKEN is unused.
MODE is `legacy` (the
`initialize` handshake, with a session) or `modern` (`server/discover`, sessionless), and
CALLS a JSON array of `[tool, arguments]` pairs to call in order after `tools/list`; a third
element is how many seconds the client waits for that call before giving up (the SDK then
sends `notifications/cancelled`).

Prints one JSON object on stdout: the negotiated protocol version, the server's name, the
listed tools (name, description, inputSchema) and each call's `isError` and text (for a call
the client gave up on, `isError` null and the SDK's error).
Exit status 3 when the `mcp` package is missing (the test shows the install command).
"""

import asyncio
import contextlib
import json
import sys

try:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as missing:
    print(f"the Python package 'mcp' is missing: {missing}", file=sys.stderr)
    sys.exit(3)


async def negotiate(session: ClientSession, mode: str) -> tuple[str, str]:
    """Opens the session; returns the protocol version and the server's name (legacy only)."""
    if mode == "legacy":
        result = await session.initialize()
        return result.protocol_version, result.server_info.name
    await session.discover()
    # A discover result names no server; the version is what both sides support.
    return session.protocol_version, None


@contextlib.asynccontextmanager
async def connect(endpoint: str, token: str):
    """The read and write streams of the SDK's transport for ENDPOINT."""
    if endpoint.startswith("["):
        command = json.loads(endpoint)
        server = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(server) as streams:
            yield streams
        return
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(endpoint, http_client=http) as streams:
        yield streams


async def run(endpoint: str, token: str, mode: str, calls: list) -> dict:
    async with connect(endpoint, token) as (read, write):
        async with ClientSession(read, write) as session:
            version, server = await negotiate(session, mode)
            if mode == "legacy":
                # The 2026-07-28 revision has no `ping` (there is no session to keep alive).
                await session.send_ping()
            listed = await session.list_tools()
            tools = [
                {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                for t in listed.tools
            ]
            results = []
            for name, arguments, *wait in calls:
                try:
                    result = await session.call_tool(name, arguments, *wait)
                except MCPError as gave_up:
                    results.append({"isError": None, "text": str(gave_up)})
                    continue
                texts = [c.text for c in result.content if c.type == "text"]
                results.append({"isError": bool(result.is_error), "text": "\n".join(texts)})
            return {"protocolVersion": version, "server": server, "tools": tools, "calls": results}


def main() -> None:
    endpoint, token, mode, calls = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    print(json.dumps(asyncio.run(run(endpoint, token, mode, calls))))


if __name__ == "__main__":
    main()
