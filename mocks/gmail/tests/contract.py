"""Google's own Python client against the mock, with every answer checked against Google's
discovery document (gmail.v1.json, shipped in google-api-python-client).

Usage: python contract.py MOCK_URL MODIFY_TOKEN FULL_TOKEN REFRESH_TOKEN CLIENT_ID CLIENT_SECRET
SETTINGS_TOKEN.
Exits non-zero with the reason on
any mismatch; prints a JSON summary.
"""

import json
import os
import sys

import google_auth_httplib2
import googleapiclient
import httplib2
from google.auth.exceptions import RefreshError
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

URL, MODIFY, FULL, REFRESH, CLIENT_ID, CLIENT_SECRET, SETTINGS = sys.argv[1:8]
DOC = json.load(open(os.path.join(os.path.dirname(googleapiclient.__file__),
                                  "discovery_cache", "documents", "gmail.v1.json")))
SCHEMAS = DOC["schemas"]
checked = {}


def fail(what):
    raise SystemExit(f"contract broken: {what}")


def conforms(value, schema, where):
    """Every field is documented, with the documented type."""
    if "$ref" in schema:
        checked[schema["$ref"]] = checked.get(schema["$ref"], 0) + 1
        return conforms(value, SCHEMAS[schema["$ref"]], where)
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            fail(f"{where}: expected an object, got {value!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                conforms(item, props[key], f"{where}.{key}")
            elif extra is not None:
                conforms(item, extra, f"{where}.{key}")
            else:
                fail(f"{where}: field {key!r} is not in the discovery document")
    elif kind == "array":
        if not isinstance(value, list):
            fail(f"{where}: expected an array")
        for i, item in enumerate(value):
            conforms(item, schema["items"], f"{where}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            fail(f"{where}: expected a string (format {schema.get('format')}), got {value!r}")
        if schema.get("format") in ("int64", "uint64") and not value.isdigit():
            fail(f"{where}: expected a decimal string, got {value!r}")
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            fail(f"{where}: expected an integer, got {value!r}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            fail(f"{where}: expected a boolean")


def response_schema(method):
    """The documented response schema of a method like users.messages.list."""
    node = DOC
    parts = method.split(".")
    for part in parts[:-1]:
        node = node["resources"][part]
    return node["methods"][parts[-1]].get("response")


def call(method, request):
    answer = request.execute()
    schema = response_schema(method)
    if schema is None:
        if answer not in ("", None, {}):
            fail(f"{method}: documented as empty, got {answer!r}")
    else:
        conforms(answer, schema, method)
    return answer


def expect_error(status, request, what):
    try:
        request.execute()
    except HttpError as e:
        if e.resp.status != status:
            fail(f"{what}: expected HTTP {status}, got {e.resp.status}")
        body = json.loads(e.content)
        if body["error"]["code"] != status or not body["error"]["errors"][0]["reason"]:
            fail(f"{what}: error body {body}")
        return
    fail(f"{what}: expected HTTP {status}, got success")


def service(token):
    return build("gmail", "v1", static_discovery=True, credentials=Credentials(token),
                 client_options={"api_endpoint": URL + "/"})


gmail = service(MODIFY)
users = gmail.users()
profile = call("users.getProfile", users.getProfile(userId="me"))
start_history = profile["historyId"]

labels = call("users.labels.list", users.labels().list(userId="me"))["labels"]
if not {"INBOX", "UNREAD", "STARRED", "TRASH", "SPAM"} <= {l["id"] for l in labels}:
    fail(f"system labels missing: {labels}")
work = call("users.labels.create", users.labels().create(userId="me", body={"name": "Work"}))
expect_error(409, users.labels().create(userId="me", body={"name": "Work"}), "duplicate label")

# Paging: the mock was seeded with 120 messages in INBOX, 40 of them UNREAD.
ids, token = [], None
while True:
    page = call("users.messages.list",
                users.messages().list(userId="me", maxResults=50, pageToken=token, labelIds=["INBOX"]))
    ids += [m["id"] for m in page.get("messages", [])]
    token = page.get("nextPageToken")
    if not token:
        break
if len(ids) != 120 or len(set(ids)) != 120:
    fail(f"paging returned {len(ids)} ids")
unread = call("users.messages.list", users.messages().list(userId="me", q="is:unread", maxResults=500))
if len(unread["messages"]) != 40:
    fail(f"q=is:unread found {len(unread['messages'])}")

for fmt in ("minimal", "metadata", "full", "raw"):
    msg = call("users.messages.get",
               users.messages().get(userId="me", id=ids[0], format=fmt,
                                    metadataHeaders=["Subject", "From"]))
    if fmt == "metadata" and {h["name"] for h in msg["payload"]["headers"]} != {"Subject", "From"}:
        fail(f"metadataHeaders not honoured: {msg['payload']['headers']}")
expect_error(404, users.messages().get(userId="me", id="ffffffffffffffff"), "unknown message")

call("users.messages.modify",
     users.messages().modify(userId="me", id=ids[0], body={"addLabelIds": [work["id"], "STARRED"]}))
call("users.messages.batchModify",
     users.messages().batchModify(userId="me", body={"ids": ids[:100], "removeLabelIds": ["UNREAD"]}))
expect_error(400, users.messages().batchModify(
    userId="me", body={"ids": [str(i) for i in range(1001)], "addLabelIds": ["STARRED"]}), "1001 ids")
expect_error(400, users.messages().modify(userId="me", id=ids[1], body={"addLabelIds": ["Label_nope"]}),
             "unknown label")
trashed = call("users.messages.trash", users.messages().trash(userId="me", id=ids[2]))
if "TRASH" not in trashed["labelIds"]:
    fail("trash did not add TRASH")
call("users.messages.untrash", users.messages().untrash(userId="me", id=ids[2]))

history = call("users.history.list",
               users.history().list(userId="me", startHistoryId=start_history,
                                    historyTypes=["labelAdded", "labelRemoved"]))
kinds = {k for h in history.get("history", []) for k in h if k in ("labelsAdded", "labelsRemoved")}
if kinds != {"labelsAdded", "labelsRemoved"}:
    fail(f"history kinds {kinds}")
expect_error(404, users.history().list(userId="me", startHistoryId="1"), "expired history")

# Filters: written only with gmail.settings.basic; Gmail's refusals of what the schema allows.
filters = service(SETTINGS).users().settings().filters()
news = {"criteria": {"from": "news@example.org", "size": 100000, "sizeComparison": "smaller"},
        "action": {"addLabelIds": [work["id"], "STARRED"], "removeLabelIds": ["INBOX", "UNREAD"]}}
expect_error(403, users.settings().filters().create(userId="me", body=news), "a filter without its scope")
made = call("users.settings.filters.create", filters.create(userId="me", body=news))
expect_error(400, filters.create(userId="me", body=news), "the same filter twice")
for bad, what in [
    ({"criteria": {}, "action": {"removeLabelIds": ["UNREAD"]}}, "no criteria"),
    ({"criteria": {"from": "a"}, "action": {}}, "no action"),
    ({"criteria": {"from": "a"}, "action": {"addLabelIds": ["Label_nope"]}}, "an unknown label"),
    ({"criteria": {"from": "a"}, "action": {"forward": "x@example.net"}}, "an unverified forward"),
    ({"criteria": {"from": "a", "size": 5}, "action": {"removeLabelIds": ["UNREAD"]}}, "size alone"),
]:
    expect_error(400, filters.create(userId="me", body=bad), what)
if call("users.settings.filters.get", filters.get(userId="me", id=made["id"])) != made:
    fail("a filter reads back otherwise than it was made")
mine = call("users.settings.filters.list", users.settings().filters().list(userId="me"))
if [f["id"] for f in mine["filter"]] != [made["id"]]:
    fail(f"filters listed: {mine}")
call("users.settings.filters.delete", filters.delete(userId="me", id=made["id"]))
expect_error(404, filters.get(userId="me", id=made["id"]), "a deleted filter")
if call("users.settings.filters.list", filters.list(userId="me")) != {}:
    fail("no filter is an empty answer")

# Drafts: made as JSON (message.raw) and as a media upload of the message; read; deleted.
import base64
from googleapiclient.http import MediaInMemoryUpload
source = (b"From: me@mock.example\r\nTo: bob@example.org\r\nSubject: Hello\r\n"
          b"Message-ID: <d1@mock.example>\r\n\r\nHi Bob\r\n")
drafts = users.drafts()


def plain(request):
    """The client writes an upload's URL with https whatever the endpoint; the mock is http."""
    request.uri = request.uri.replace("https://", "http://", 1)
    return request


as_json = call("users.drafts.create", drafts.create(
    userId="me", body={"message": {"raw": base64.urlsafe_b64encode(source).decode()}}))
uploaded = call("users.drafts.create", plain(drafts.create(
    userId="me", body={}, media_body=MediaInMemoryUpload(source, mimetype="message/rfc822"))))
for made_draft in (as_json, uploaded):
    got = call("users.drafts.get", drafts.get(userId="me", id=made_draft["id"], format="minimal"))
    if got["message"]["id"] != made_draft["message"]["id"] or "DRAFT" not in got["message"]["labelIds"]:
        fail(f"a draft reads back otherwise: {got}")
# An attachment: listed in format=full under an attachmentId, read by messages.attachments.get.
mixed = (b"From: me@mock.example\r\nTo: bob@example.org\r\nSubject: Bill\r\nMIME-Version: 1.0\r\n"
         b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nSee it\r\n"
         b"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=bill.pdf\r\n"
         b"Content-Transfer-Encoding: base64\r\n\r\nUERGREFUQQ==\r\n--b--\r\n")
with_file = call("users.drafts.create", plain(drafts.create(
    userId="me", body={}, media_body=MediaInMemoryUpload(mixed, mimetype="message/rfc822"))))
full = call("users.messages.get", users.messages().get(userId="me", id=with_file["message"]["id"], format="full"))
pdf = full["payload"]["parts"][1]
if pdf["filename"] != "bill.pdf" or "attachmentId" not in pdf["body"] or "data" in pdf["body"]:
    fail(f"an attachment is not kept apart: {pdf}")
if "data" not in full["payload"]["parts"][0]["body"]:
    fail("a text part is not inline")
got = call("users.messages.attachments.get", users.messages().attachments().get(
    userId="me", messageId=with_file["message"]["id"], id=pdf["body"]["attachmentId"]))
if base64.urlsafe_b64decode(got["data"]) != b"PDFDATA" or got["size"] != 7:
    fail(f"an attachment reads back otherwise: {got}")
expect_error(404, users.messages().attachments().get(
    userId="me", messageId=ids[0], id=pdf["body"]["attachmentId"]), "an attachment of another message")
call("users.drafts.delete", drafts.delete(userId="me", id=with_file["id"]))
expect_error(400, plain(drafts.create(userId="me", body={}, media_body=MediaInMemoryUpload(
    b"hello", mimetype="text/plain"))), "a draft uploaded as text/plain")
expect_error(400, drafts.create(userId="me", body={"message": {"raw": base64.urlsafe_b64encode(
    b"Subject: nobody\r\n\r\nx").decode()}}), "a draft without a recipient")
call("users.drafts.delete", drafts.delete(userId="me", id=as_json["id"]))
expect_error(404, drafts.get(userId="me", id=as_json["id"]), "a deleted draft")
call("users.drafts.delete", drafts.delete(userId="me", id=uploaded["id"]))

expect_error(403, users.messages().batchDelete(userId="me", body={"ids": ids[-2:]}), "batchDelete without scope")
call("users.messages.batchDelete",
     service(FULL).users().messages().batchDelete(userId="me", body={"ids": ids[-2:]}))
expect_error(404, users.messages().get(userId="me", id=ids[-1]), "deleted message")
# A bad token: Google's client would try to refresh, so ask with a plain request.
import urllib.error
import urllib.request
try:
    urllib.request.urlopen(urllib.request.Request(
        URL + "/gmail/v1/users/me/profile", headers={"Authorization": "Bearer ya29.wrong"}))
    fail("a bad token was accepted")
except urllib.error.HTTPError as e:
    if e.code != 401 or json.load(e)["error"]["code"] != 401:
        fail(f"bad token: HTTP {e.code}")

# google-auth refreshes as an installed app does: refresh token, client id and secret.
def refreshed(secret):
    creds = Credentials(None, refresh_token=REFRESH, client_id=CLIENT_ID, client_secret=secret,
                        token_uri=URL + "/token")
    creds.refresh(google_auth_httplib2.Request(httplib2.Http()))
    return creds


try:
    refreshed("GOCSPX-not-the-secret")
    fail("a refresh with a wrong client secret was accepted")
except RefreshError as e:
    if "invalid_client" not in str(e):
        fail(f"wrong secret: {e}")
creds = refreshed(CLIENT_SECRET)
if not creds.token or not creds.expiry:
    fail("the refresh answer gave no token or expiry")
fresh = build("gmail", "v1", static_discovery=True, credentials=creds,
              client_options={"api_endpoint": URL + "/"})
call("users.getProfile", fresh.users().getProfile(userId="me"))

print(json.dumps({"schemas_checked": checked, "refreshed": True}))
