"""The official Python MCP SDK against `mailbroker serve`: searches until each query finds
one message (changes another client made), and records every tool it called.

Usage: python serve_client.py '{"url", "token", "queries": [...], "within": seconds}'
Prints one JSON line: {"found": {query: seconds}, "tools_called": [names]}; exits non-zero
when a query finds nothing in time.
"""

import asyncio
import json
import sys
import time

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(cfg):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {cfg['token']}"})
    called = set()
    found = {}
    async with Client(streamable_http_client(cfg["url"], http_client=http)) as c:

        async def call(tool, args):
            called.add(tool)
            return await c.call_tool(tool, args)

        start = time.monotonic()
        for query in cfg["queries"]:
            while True:
                result = await call("search_messages", {"query": query})
                body = result.structured_content
                if body.get("total") == 1:
                    found[query] = time.monotonic() - start
                    break
                if time.monotonic() - start > cfg["within"]:
                    raise SystemExit(f"{query!r} not found within {cfg['within']} s: {body}")
                await asyncio.sleep(0.1)
    print(json.dumps({"found": found, "tools_called": sorted(called)}))


asyncio.run(main(json.loads(sys.argv[1])))
