"""The official Python MCP SDK against `mailbroker serve`: searches until a message another
client added is found, without ever calling sync_accounts.

Usage: python serve_client.py '{"url", "token", "query", "within": seconds}'
Prints one JSON line: {"total", "after": seconds, "sync_called": false}; exits non-zero when
the message is not found in time.
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
    async with Client(streamable_http_client(cfg["url"], http_client=http)) as c:
        start = time.monotonic()
        while True:
            result = await c.call_tool("search_messages", {"query": cfg["query"]})
            body = result.structured_content
            if body.get("total") == 1:
                after = time.monotonic() - start
                print(json.dumps({"total": 1, "after": after, "sync_called": False}))
                return
            if time.monotonic() - start > cfg["within"]:
                raise SystemExit(f"not found within {cfg['within']} s: {body}")
            await asyncio.sleep(0.1)


asyncio.run(main(json.loads(sys.argv[1])))
