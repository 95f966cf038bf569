"""Microsoft's sign-in library (msal) completes the device code flow against the mock (served
over TLS, as msal accepts only an https authority), keeps the account it signed in, and
refreshes silently; the token it got opens Graph on the mock.

Usage: msal_contract.py AUTHORITY_ROOT CLIENT_ID (REQUESTS_CA_BUNDLE names the test CA).
Prints a JSON summary on success; any mismatch raises (non-zero exit).
"""

import json
import os
import sys
import threading
import urllib.request
import ssl

import msal

ROOT, CLIENT = sys.argv[1], sys.argv[2]
TLS = ssl.create_default_context(cafile=os.environ["REQUESTS_CA_BUNDLE"])


def post(path, body):
    request = urllib.request.Request(
        f"{ROOT}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, context=TLS) as answer:
        return json.load(answer)


def me(token):
    request = urllib.request.Request(f"{ROOT}/v1.0/me", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=TLS) as answer:
        return json.load(answer)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


app = msal.PublicClientApplication(CLIENT, authority=f"{ROOT}/common", instance_discovery=False)
scopes = ["Mail.ReadWrite", "User.Read"]
flow = app.initiate_device_flow(scopes=scopes)
check("user_code" in flow, f"no device flow: {flow}")
check(flow["verification_uri"].startswith(ROOT), flow["verification_uri"])

# The person types the code a moment after msal starts polling.
timer = threading.Timer(1.5, post, ["/_mock/device/approve", {"user_code": flow["user_code"]}])
timer.start()
result = app.acquire_token_by_device_flow(flow)
check("access_token" in result, f"device flow failed: {result.get('error_description', result)}")
check(me(result["access_token"])["mail"] == "me@mock.example", "the token opens Graph")

accounts = app.get_accounts()
check(len(accounts) == 1, f"accounts {accounts}")
check(accounts[0]["username"] == "me@mock.example", accounts[0])
silent = app.acquire_token_silent(scopes, account=accounts[0], force_refresh=True)
check(silent and "access_token" in silent, f"silent refresh failed: {silent}")
check(silent["access_token"] != result["access_token"], "a fresh token")
check(me(silent["access_token"])["mail"] == "me@mock.example", "the refreshed token opens Graph")
print(json.dumps({"username": accounts[0]["username"], "refreshed": True}))
