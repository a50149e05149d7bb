"""One MCP session that waits for `notifications/tools/list_changed`, driven by the official
Python SDK (`mcp`). Used by host/tests/e2e/mcp_server.rs. Usage:

    python3 watch.py ENDPOINT TOKEN WAIT_SECS [MODE]

ENDPOINT and TOKEN as for session.py (an HTTP URL and its token, or a JSON array: a command
line serving MCP on stdio). MODE `legacy` (the default) uses the `initialize` handshake and
takes the notification on the session; `modern` uses `server/discover` (2026-07-28) and a
`subscriptions/listen` stream asking for `toolsListChanged`. It lists the tools and
prints them on one line (`{"tools": [...]}`); once it reads a line on stdin it waits up to
WAIT_SECS for `notifications/tools/list_changed` (one that came earlier counts too); it prints one more line, `{"notified": true|false,
"tools": [...]}` with the tools listed after the wait, and ends.
Exit status 3 when the `mcp` package is missing (the test shows the install command).
"""

import json
import sys

import anyio

try:
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.subscriptions import listen
except ImportError as missing:
    print(f"the Python package 'mcp' is missing: {missing}", file=sys.stderr)
    sys.exit(3)

from session import connect


async def names(session: ClientSession) -> list:
    return [tool.name for tool in (await session.list_tools()).tools]


async def watch_modern(session: ClientSession, wait: float) -> bool:
    """Opens a `subscriptions/listen` stream, prints the tools, and waits for an event."""
    await session.discover()
    async with listen(session, tools_list_changed=True) as subscription:
        print(json.dumps({"tools": await names(session)}), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        with anyio.move_on_after(wait):
            async for _event in subscription:
                return True
    return False


async def watch(endpoint: str, token: str, wait: float, mode: str) -> None:
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(endpoint, token) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            if mode == "modern":
                notified = await watch_modern(session, wait)
                print(json.dumps({"notified": notified, "tools": await names(session)}), flush=True)
                return
            await session.initialize()
            print(json.dumps({"tools": await names(session)}), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            with anyio.move_on_after(wait):
                await changed.wait()
            print(json.dumps({"notified": changed.is_set(), "tools": await names(session)}), flush=True)


def main() -> None:
    endpoint, token, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "legacy"
    anyio.run(watch, endpoint, token, wait, mode)


if __name__ == "__main__":
    main()
