"""An assistant's write decided in the person's console (URL-mode elicitation), driven by
the official Python MCP SDK: the server asks the client to open the console's page for the
write; the person (`console_person.mjs`, in Chromium with their passkey) decides there; the
client reports what the call answered.

Usage: python console_client.py CONFIG_JSON
CONFIG: {"url": MCP URL, "token": bearer, "person": [argv of the browser script],
         "browser": {its config without "url"},
         "cases": [{"mode": "legacy"|"auto", "args": {...}, "decide": "approve"|"decline"|null,
                    "timeout": seconds or null}]}
A case whose decide is null is a client that accepts without any person: the server must
keep waiting, so the call ends only by the client's timeout.
Prints one JSON line: for each case the elicitation asked and what the call answered.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
import mcp.types as types


async def run_case(cfg, case, browser):
    seen = {"asked": []}

    async def callback(context, params):
        asked = {"mode": getattr(params, "mode", None), "message": params.message,
                 "url": getattr(params, "url", None),
                 "elicitation_id": getattr(params, "elicitation_id", None)}
        seen["asked"].append(asked)
        if case["decide"] is None or asked["url"] is None:
            return types.ElicitResult(action="accept")
        config = dict(browser, url=asked["url"], decide=case["decide"])
        proc = await asyncio.create_subprocess_exec(
            *cfg["person"], json.dumps(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"the person's browser failed: {err.decode()}")
        seen["person"] = json.loads(out.decode().strip().splitlines()[-1])
        browser["credentials"] = seen["person"]["credentials"]
        return types.ElicitResult(action="accept")

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {cfg['token']}"})
    target = streamable_http_client(cfg["url"], http_client=http)
    async with Client(target, mode=case["mode"], elicitation_callback=callback) as client:
        try:
            result = await client.call_tool("update_message", case["args"],
                                            read_timeout_seconds=case.get("timeout"))
            seen["is_error"] = result.is_error
            seen["result"] = result.structured_content
        except Exception as e:  # the client's own timeout: the server was still waiting
            seen["raised"] = f"{type(e).__name__}: {e}"
    return seen


async def main():
    cfg = json.loads(sys.argv[1])
    browser = dict(cfg["browser"])
    out = []
    for case in cfg["cases"]:
        out.append(await run_case(cfg, case, browser))
    print(json.dumps(out))


asyncio.run(main())
