"""Drives `mailbroker mcp` with the official Python MCP SDK (an independent client).

Usage: python mcp_client.py CONFIG_JSON
CONFIG: {"transport": "stdio"|"http", "mode": "auto"|"legacy", "bin": ..., "home": ...,
         "url": ..., "token": ..., "account": ..., "subjects": [accept, decline, token],
         "error_types": [every SPEC one], "readonly_url": (http: a listener without writes)}
Prints one JSON line with what it saw; exits non-zero (with the reason) when the server
breaks the protocol contract. The caller checks the IMAP server itself.
"""

import asyncio
import json
import shlex
import subprocess
import sys

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
import mcp.types as types

TOOLS = {"list_accounts", "list_mailboxes", "search_messages", "get_messages",
         "update_message", "list_changes", "undo_change", "sync_accounts", "propose_rule",
         "create_draft", "save_attachments"}


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


async def refused(client, name, args, error_type):
    err, body = await call(client, name, args)
    check(err and body["error_type"] == error_type, f"{name} {args}: want {error_type}: {body}")
    check(body.get("next_step"), f"{name}: no next step: {body}")
    return body


async def schema_rejects(c, tools, error_types):
    """Every error_type's result against every tool's output schema, by this SDK's validator."""
    rejects = []
    for name in tools:
        for error_type in error_types:
            body = {"success": False, "error": "e", "error_type": error_type, "next_step": "n"}
            result = types.CallToolResult(content=[], structured_content=body, is_error=True)
            try:
                await c.session.validate_tool_result(name, result)
            except RuntimeError as e:
                rejects.append(f"{name}/{error_type}: {e}")
    return rejects


async def errors_and_undo(c, cfg, message):
    """Each error class a real call can reach here, and a write undone twice."""
    message_id = message["id"]
    await refused(c, "search_messages", {"query": "is:bogus"}, "validation_error")
    await refused(c, "get_messages", {"ids": "three"}, "validation_error")
    body = await refused(c, "update_message", {"ids": [1], "flagged": True, "dryRun": True},
                         "validation_error")
    check("dry_run" in body["error"], f"closest name: {body}")
    await refused(c, "search_messages", {"query": "subject:(a b)"}, "unsupported")
    await refused(c, "get_messages", {"ids": [999999]}, "not_found")
    await refused(c, "search_messages", {"query": "x", "account": "nobody"}, "not_found")
    await refused(c, "sync_accounts", {"account": "gone"}, "provider_unavailable")
    await refused(c, "sync_accounts", {"account": "locked"}, "auth_required")
    toggled = "flagged" not in message["flags"]
    err, done = await call(c, "update_message", {"ids": [message_id], "flagged": toggled})
    check(not err and done["applied"] == 1, f"flag: {done}")
    err, undone = await call(c, "undo_change", {"change_id": done["change_id"]})
    check(not err and undone["applied"] == 1, f"undo: {undone}")
    body = await refused(c, "undo_change", {"change_id": done["change_id"]}, "stale_state")
    check("already undone" in body["error"], f"undo twice: {body}")
    _, journal = await call(c, "list_changes", {"id": done["change_id"]})
    entry = journal["changes"][0]
    check(entry["undone_by"] == undone["change_id"], f"undone_by: {journal}")
    check(entry["origin"] == "mcp:mcp", f"origin: {entry}")


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

        seen["schema_rejects"] = await schema_rejects(c, names, cfg["error_types"])
        _, accounts = await call(c, "list_accounts", {})
        check(cfg["account"] in [a["id"] for a in accounts["accounts"]], f"accounts: {accounts}")
        _, mailboxes = await call(c, "list_mailboxes", {"account": cfg["account"]})
        roles = [m["role"] for a in mailboxes["accounts"] for m in a["mailboxes"]]
        check("inbox" in roles and "trash" in roles, f"mailboxes: {mailboxes}")
        err, synced = await call(c, "sync_accounts", {"account": cfg["account"]})
        check(not err and synced["accounts"][0]["account"] == cfg["account"], f"sync: {synced}")
        accept_id = await find(c, accept_subject)
        _, read = await call(c, "get_messages", {"ids": [accept_id]})
        check(read["messages"][0]["subject"] == accept_subject, f"read: {read}")
        await errors_and_undo(c, cfg, read["messages"][0])
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
        # Nor can a shell it runs (no terminal), --yes or not; the person at the terminal can.
        shell = subprocess.run([cfg["bin"], "--home", cfg["home"], "approve", token, "--yes"],
                               capture_output=True, text=True, start_new_session=True)
        check(shell.returncode == 6, f"approved without a person: {shell.stdout} {shell.stderr}")
        command = shlex.join([cfg["bin"], "--home", cfg["home"], "approve", token])
        approved = subprocess.run(["script", "--quiet", "--return", "--command", command, "/dev/null"],
                                  input="y\n", capture_output=True, text=True)
        check(approved.returncode == 0, f"approve: {approved.stdout} {approved.stderr}")
        err, done = await call(c, "update_message", {**request, "confirm_token": token})
        check(not err and done["applied"] == 1, f"token update: {done}")
        err, again = await call(c, "update_message", {**request, "confirm_token": token, "move_to": "junk"})
        check(err and again["error_type"] == "confirmation_required", f"token reuse: {again}")
    if cfg.get("readonly_url"):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {cfg['token']}"})
        async with Client(streamable_http_client(cfg["readonly_url"], http_client=http),
                          mode=cfg["mode"]) as c:
            listed = {t.name for t in (await c.list_tools()).tools}
            check("update_message" not in listed, f"read-only listener lists writes: {listed}")
            await refused(c, "update_message", {"ids": [1], "flagged": True}, "writes_disabled")
    print(json.dumps(seen))


asyncio.run(main(json.loads(sys.argv[1])))
