"""Drives `mailbroker mcp` with the official Python MCP SDK (an independent client).

Usage: python mcp_client.py CONFIG_JSON
CONFIG: {"transport": "stdio"|"http", "mode": "auto"|"legacy", "bin": ..., "home": ...,
         "url": ..., "token": ..., "subjects": [accept, decline, token]}
Prints one JSON line with what it saw; exits non-zero (with the reason) when the server
breaks the protocol contract. The caller checks the IMAP server itself.
"""

import asyncio
import json
import subprocess
import sys

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
import mcp.types as types

TOOLS = {"list_accounts", "list_mailboxes", "search_messages", "get_messages",
         "update_message", "list_changes", "undo_change", "sync_accounts"}


def check(cond, what):
    if not cond:
        raise SystemExit(f"contract broken: {what}")


def target(cfg):
    if cfg["transport"] == "stdio":
        return StdioServerParameters(command=cfg["bin"], args=["--home", cfg["home"], "mcp"])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {cfg['token']}"})
    return streamable_http_client(cfg["url"], http_client=http)


ASKED = []


def answer(action):
    async def callback(context, params):
        ASKED.append(params.message)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action=action)
    return callback


async def call(client, name, args):
    result = await client.call_tool(name, args)
    body = result.structured_content
    check(isinstance(body, dict), f"{name}: no structured content")
    check(body.get("success") is (not result.is_error), f"{name}: success vs isError: {body}")
    return result.is_error, body


async def find(client, subject):
    _, body = await call(client, "search_messages", {"query": f'subject:"{subject}" in:inbox'})
    exact = [m for m in body["messages"] if m["subject"] == subject]
    check(len(exact) == 1, f"one message for {subject}: {body}")
    return exact[0]["id"]


async def main(cfg):
    accept_subject, decline_subject, token_subject = cfg["subjects"]
    seen = {}
    async with Client(target(cfg), mode=cfg["mode"], elicitation_callback=answer("accept")) as c:
        listed = await c.list_tools()
        names = {t.name for t in listed.tools}
        check(TOOLS <= names, f"tools missing: {TOOLS - names}")
        size = len(json.dumps([t.model_dump(mode="json", by_alias=True) for t in listed.tools]))
        seen["tools_list_chars"] = size
        check(size / 4 <= 6000, f"tools/list is {size} characters")
        for t in listed.tools:
            check(len(t.description or "") > 40, f"{t.name} lacks a description")
            check(t.output_schema is not None, f"{t.name} lacks an output schema")

        _, accounts = await call(c, "list_accounts", {})
        check(accounts["accounts"][0]["id"] == "py", f"accounts: {accounts}")
        accept_id = await find(c, accept_subject)
        # A dry run shows the plan and changes nothing.
        err, dry = await call(c, "update_message", {"ids": [accept_id], "move_to": "trash", "dry_run": True})
        check(not err and dry["planned"] == 1 and dry["dry_run"], f"dry run: {dry}")
        check(any("MOVE" in line for line in dry["plan"]), f"plan: {dry['plan']}")
        check(dry["confirmation_required"] and dry["confirm_token"], f"dry run needs confirming: {dry}")
        # The plan says what happens in the user's terms: the action, whom from, when, how chosen.
        text = dry["summary"]["text"]
        for part in ("moves 1 message(s) to trash", "1 from", "dated 2026-11-02", "chosen by id"):
            check(part in text, f"summary lacks {part!r}: {text}")
        check(dry["summary"]["count"] == 1 and "T" in dry["summary"]["first_date"], f"{dry}")
        # Confirmed by the user through elicitation.
        err, done = await call(c, "update_message", {"ids": [accept_id], "move_to": "trash"})
        check(not err and done["applied"] == 1, f"confirmed update: {done}")
        check(done["changed_ids"] == [accept_id], f"changed ids: {done}")
        check(ASKED and "It moves 1 message(s) to trash: 1 from" in ASKED[-1], f"asked: {ASKED}")
        seen["protocol"] = str(getattr(c, "protocol_version", ""))

    async with Client(target(cfg), mode=cfg["mode"], elicitation_callback=answer("decline")) as c:
        decline_id = await find(c, decline_subject)
        err, body = await call(c, "update_message", {"ids": [decline_id], "move_to": "trash"})
        check(err and body["error_type"] == "confirmation_declined", f"declined: {body}")

    # No elicitation at all: refused, then the dry-run token flow.
    async with Client(target(cfg), mode=cfg["mode"]) as c:
        token_id = await find(c, token_subject)
        request = {"ids": [token_id], "move_to": "trash"}
        err, body = await call(c, "update_message", request)
        check(err and body["error_type"] == "confirmation_required", f"no confirmation: {body}")
        check("dry_run" in body.get("next_step", ""), f"next step: {body}")
        _, dry = await call(c, "update_message", {**request, "dry_run": True})
        token = dry["confirm_token"]
        # Fails closed: the assistant cannot approve its own token; the person does, at
        # the CLI.
        err, early = await call(c, "update_message", {**request, "confirm_token": token})
        check(err and early["error_type"] == "confirmation_required", f"unapproved: {early}")
        check(f"mailbroker approve {token}" in early.get("next_step", ""), f"step: {early}")
        approved = subprocess.run([cfg["bin"], "--home", cfg["home"], "approve", token, "--yes"],
                                  capture_output=True, text=True)
        check(approved.returncode == 0, f"approve: {approved.stdout} {approved.stderr}")
        err, done = await call(c, "update_message", {**request, "confirm_token": token})
        check(not err and done["applied"] == 1, f"token update: {done}")
        err, again = await call(c, "update_message", {**request, "confirm_token": token, "move_to": "junk"})
        check(err and again["error_type"] == "confirmation_required", f"token reuse: {again}")
    print(json.dumps(seen))


asyncio.run(main(json.loads(sys.argv[1])))
