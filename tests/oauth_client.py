"""The official Python MCP SDK's OAuth client (`OAuthClientProvider` as the HTTP client's auth)
connecting to `mailbroker serve` from nothing: discovery from the 401, Dynamic Client
Registration, the authorization code flow with PKCE. The person's consent happens elsewhere:
the authorization URL is printed as a JSON line, and the URL the browser came back to is read
from stdin. Then tools are called with the token, the token is refreshed, and what happened
is printed as a JSON line; once a line on stdin says the grant was revoked, it tries again and
prints whether it was sent to sign in anew.

Usage: python oauth_client.py CONFIG_JSON
CONFIG: {"mcp": url, "redirect": url}
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata


class Memory:
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client):
        self.client = client


async def main(cfg):
    stored = Memory()

    revoked = False

    async def redirect(url):
        if revoked:
            raise RuntimeError("sent to sign in again")
        print(json.dumps({"authorize": url}), flush=True)

    async def callback():
        back = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        query = parse_qs(urlparse(back.strip()).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                       iss=query.get("iss", [None])[0])

    metadata = OAuthClientMetadata(client_name="Python assistant", redirect_uris=[cfg["redirect"]],
                                   grant_types=["authorization_code", "refresh_token"],
                                   response_types=["code"], token_endpoint_auth_method="none")
    provider = OAuthClientProvider(server_url=cfg["mcp"], client_metadata=metadata, storage=stored,
                                   redirect_handler=redirect, callback_handler=callback)
    async def tool(name, args):
        async with create_mcp_http_client(auth=provider) as http:
            async with Client(streamable_http_client(cfg["mcp"], http_client=http)) as client:
                return (await client.call_tool(name, args)).structured_content

    out = {"search": await tool("search_messages", {"query": "zebra", "limit": 50})}
    out["client_id"] = stored.client.client_id
    first = stored.tokens.access_token
    # The access token's time is up: the SDK refreshes it before the next call.
    provider.context.token_expiry_time = 1
    out["accounts"] = await tool("list_accounts", {})
    out["refreshed"] = stored.tokens.access_token != first
    print(json.dumps(out), flush=True)

    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    revoked = True
    try:
        await tool("list_accounts", {})
        after = "still let in"
    except BaseException as e:  # the SDK wraps what the redirect raised
        after = "sent to sign in again" if "sent to sign in again" in repr(e) else repr(e)
    print(json.dumps({"after_revoke": after}), flush=True)


asyncio.run(main(json.loads(sys.argv[1])))
