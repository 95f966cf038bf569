"""An assistant's write decided in the person's console (URL-mode elicitation), driven by
the official Python MCP SDK: the server asks the client to open the console's page for the
write; the person (`console_person.mjs`, in Chromium with their passkey) decides there; the
client reports what the call answered.

Usage: python console_client.py CONFIG_JSON
CONFIG: {"url": MCP URL, "token": bearer, "person": [argv of the browser script],
         "browser": {its config without "url"},
         "cases": [{"mode": "legacy"|"auto", "args": {...}, "decide": "approve"|"decline"|null,
                    "timeout": seconds or null, "console": the console's list page,
                    "match": text of the request's card,
                    "hold_open": keep the form open after the person decided}]}
A case whose decide is null is a client that accepts without any person: the server must
keep waiting, so the call ends only by the client's timeout. A form (not a URL) with a
"console" in its case: the person decides on the console's list instead, and the client
then accepts its form anyway (the person's answer there must win), or, with "hold_open",
leaves it open until the call's end closes it.
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
        try:
            return await answer(params)
        except BaseException as e:  # said in the output, as the SDK would turn it into a cancel
            seen["callback_error"] = f"{type(e).__name__}: {e}"
            raise

    async def answer(params):
        asked = {"mode": getattr(params, "mode", None), "message": params.message,
                 "url": getattr(params, "url", None),
                 "elicitation_id": getattr(params, "elicitation_id", None)}
        seen["asked"].append(asked)
        url = asked["url"] or case.get("console")
        accept = types.ElicitResult(action="accept", content=None if asked["url"] else {"confirm": True})
        if case["decide"] is None or url is None:
            return accept
        config = dict(browser, url=url, decide=case["decide"], match=case.get("match"))
        # The person goes on even if the call ends first (their answer may be what ends it):
        # their browser is a task of its own, awaited again once the call is over.
        seen["browsing"] = asyncio.ensure_future(person(cfg, config))
        await asyncio.shield(seen["browsing"])
        if case.get("hold_open"):
            # A form still open on the person's screen: only the call's end closes it.
            await asyncio.sleep(60)
        return accept

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
    if "browsing" in seen:
        seen["person"] = await seen.pop("browsing")
        browser["credentials"] = seen["person"]["credentials"]
    return seen


async def person(cfg, config):
    """The person's browser on the console: what it printed."""
    proc = await asyncio.create_subprocess_exec(
        *cfg["person"], json.dumps(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the person's browser failed: {err.decode()}")
    return json.loads(out.decode().strip().splitlines()[-1])


async def main():
    cfg = json.loads(sys.argv[1])
    browser = dict(cfg["browser"])
    out = []
    for case in cfg["cases"]:
        out.append(await run_case(cfg, case, browser))
    print(json.dumps(out))


asyncio.run(main())
