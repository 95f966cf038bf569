"""Microsoft's Python Graph SDK (msgraph-sdk) drives the mock: folders and child folders,
delta paging with a change made in between, PATCH with and without If-Match, move (with and
without immutable ids), master categories, permanentDelete and $batch. The SDK builds every
URL and body from Graph's own metadata, so what it sends is what a real client sends.

Usage: contract.py MOCK_URL ACCESS_TOKEN. Prints a JSON summary on success; any mismatch
raises (non-zero exit).
"""

import asyncio
import json
import sys
import urllib.request

from kiota_abstractions.authentication import (
    AccessTokenProvider,
    AllowedHostsValidator,
    BaseBearerTokenAuthenticationProvider,
)
from kiota_abstractions.base_request_configuration import RequestConfiguration
from kiota_abstractions.method import Method
from msgraph.generated.users.item.messages.item.attachments.attachments_request_builder import (
    AttachmentsRequestBuilder,
)
from kiota_abstractions.request_information import RequestInformation
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph.generated.models.message import Message
from msgraph.generated.models.message_rule import MessageRule
from msgraph.generated.models.message_rule_actions import MessageRuleActions
from msgraph.generated.models.message_rule_predicates import MessageRulePredicates
from msgraph.generated.models.recipient import Recipient
from msgraph.generated.models.item_body import ItemBody
from msgraph.generated.users.item.messages.item.create_reply_all.create_reply_all_post_request_body import (
    CreateReplyAllPostRequestBody,
)
from msgraph.generated.models.body_type import BodyType
from msgraph.generated.models.email_address import EmailAddress
from msgraph.generated.models.followup_flag import FollowupFlag
from msgraph.generated.models.followup_flag_status import FollowupFlagStatus
from msgraph.generated.models.o_data_errors.o_data_error import ODataError
from msgraph.generated.models.outlook_category import OutlookCategory
from msgraph.generated.models.category_color import CategoryColor
from msgraph.generated.users.item.messages.item.move.move_post_request_body import (
    MovePostRequestBody,
)
from msgraph_core.requests.batch_request_content_collection import (
    BatchRequestContentCollection,
)
from msgraph_core.requests.batch_request_item import BatchRequestItem

URL, TOKEN = sys.argv[1], sys.argv[2]
IMMUTABLE = 'IdType="ImmutableId"'


class StaticToken(AccessTokenProvider):
    async def get_authorization_token(self, uri, additional_authentication_context=None):
        return TOKEN

    def get_allowed_hosts_validator(self):
        return AllowedHostsValidator([])


def control(path, body):
    request = urllib.request.Request(
        f"{URL}/_mock/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def config(headers=None, **query):
    cfg = RequestConfiguration()
    for k, v in (headers or {}).items():
        cfg.headers.add(k, v)
    if query:
        cfg.query_parameters = type("Q", (), query)()
    return cfg


async def expect_error(call, status, code):
    try:
        await call
    except ODataError as e:
        check(e.response_status_code == status, f"status {e.response_status_code} != {status}")
        check(code is None or e.error.code == code, f"code {e.error.code} != {code}")
        return
    raise AssertionError(f"expected {status} {code}")


async def walk_delta(client, folder, link=None):
    """All pages of a folder's delta: (messages by id, removed ids, the final deltaLink)."""
    builder = client.me.mail_folders.by_mail_folder_id(folder).messages.delta
    headers = {"Prefer": "odata.maxpagesize=7"}
    page = await (builder.with_url(link) if link else builder).get(config(headers))
    seen, removed, pages = {}, set(), 1
    while True:
        for m in page.value or []:
            if m.additional_data.get("@removed"):
                removed.add(m.id)
            else:
                seen[m.id] = m
        if page.odata_next_link:
            page = await builder.with_url(page.odata_next_link).get(config(headers))
            pages += 1
            continue
        check(page.odata_delta_link, "the last page carries a deltaLink")
        return seen, removed, page.odata_delta_link, pages


async def main():
    adapter = GraphRequestAdapter(BaseBearerTokenAuthenticationProvider(StaticToken()))
    adapter.base_url = f"{URL}/v1.0"
    client = GraphServiceClient(request_adapter=adapter)
    summary = {}

    # Folders: well-known names resolve, child folders list under their parent.
    folders = await client.me.mail_folders.get()
    names = {f.display_name: f for f in folders.value}
    check("Inbox" in names and "Archive" in names, f"folders: {list(names)}")
    inbox = await client.me.mail_folders.by_mail_folder_id("inbox").get()
    check(inbox.id == names["Inbox"].id, "well-known name inbox")
    children = await client.me.mail_folders.by_mail_folder_id(inbox.id).child_folders.get()
    check([c.display_name for c in children.value] == ["Receipts"], "child folders")
    summary["folders"] = len(folders.value)

    # Delta: pages of 7 with nextLinks, then a deltaLink that shows only later changes.
    seen, removed, link, pages = await walk_delta(client, "inbox")
    check(len(seen) == 30 and not removed and pages == 5, f"{len(seen)} in {pages} pages")
    ids = sorted(seen)
    control("modify", {"id": ids[0], "categories": ["Blue"]})
    control("modify", {"id": ids[1], "moveTo": "archive"})
    changed, removed, link, _ = await walk_delta(client, "inbox", link)
    check(list(changed) == [ids[0]] and changed[ids[0]].categories == ["Blue"], "delta change")
    check(removed == {ids[1]}, f"removed {removed}")
    summary["delta_pages"] = pages

    # PATCH: only the properties sent change; If-Match takes the message's @odata.etag
    # (W/"<changeKey>"); a stale one is 412.
    message = client.me.messages.by_message_id(ids[2])
    before = await message.get()
    etag = (before.additional_data or {}).get("@odata.etag")
    check(etag == f'W/"{before.change_key}"', f"etag {etag!r}")
    patched = await message.patch(
        Message(is_read=True, flag=FollowupFlag(flag_status=FollowupFlagStatus.Flagged)),
        config({"If-Match": etag}),
    )
    check(patched.is_read and patched.flag.flag_status == FollowupFlagStatus.Flagged, "patched")
    check(patched.change_key != before.change_key, "changeKey bumped")
    check(patched.subject == before.subject, "other properties kept")
    await expect_error(
        message.patch(Message(categories=["Red"]), config({"If-Match": etag})),
        412,
        "ErrorIrresolvableConflict",
    )
    summary["patch"] = "ok"

    # Move: PascalCase DestinationId; a new id unless immutable ids were asked for.
    kept = await client.me.messages.by_message_id(ids[3]).move.post(
        MovePostRequestBody(destination_id="archive"), config({"Prefer": IMMUTABLE})
    )
    check(kept.id == ids[3] and kept.parent_folder_id == names["Archive"].id, "immutable move")
    renamed = await client.me.messages.by_message_id(ids[4]).move.post(
        MovePostRequestBody(destination_id=names["Archive"].id)
    )
    check(renamed.id != ids[4], "a move without immutable ids gives a new id")
    await expect_error(client.me.messages.by_message_id(ids[4]).get(), 404, "ErrorItemNotFound")
    summary["move"] = "ok"

    # Master categories: create, list, a duplicate name is 409.
    categories = client.me.outlook.master_categories
    await categories.post(OutlookCategory(display_name="Invoices", color=CategoryColor.Preset0))
    listed = await categories.get()
    check("Invoices" in [c.display_name for c in listed.value], "category listed")
    await expect_error(
        categories.post(OutlookCategory(display_name="Invoices", color=CategoryColor.Preset1)),
        409,
        None,
    )

    # $batch: 25 PATCHes (absolute urls, percent-encoded ids) go as a batch of 20 and one of
    # 5; their effects are checked on the mock's state, since the SDK does not parse inner
    # JSON bodies.
    targets = ids[5:30]
    collection = BatchRequestContentCollection()
    for n, mid in enumerate(targets):
        info = client.me.messages.by_message_id(mid).to_patch_request_information(
            Message(categories=["Invoices"])
        )
        item = BatchRequestItem(request_information=info, id=str(n))
        if n % 20 == 1:
            item.set_depends_on([str(n - 1)])
        collection.add_batch_request_item(item)
    answers = await client.batch.post(collection)
    statuses = []
    for response in answers._responses:
        statuses += [r.status for r in response.responses.values()]
    check(statuses == [200] * 25, f"batch statuses {statuses}")
    summary["batch"] = len(answers._responses)

    # Inbox rules: created (201, the "contains" strings as Exchange keeps them), read,
    # listed, refused without a required property or with a folder that is not there,
    # deleted.
    rules = client.me.mail_folders.by_mail_folder_id("inbox").message_rules
    made = await rules.post(MessageRule(
        display_name="news",
        sequence=2,
        is_enabled=True,
        conditions=MessageRulePredicates(
            sender_contains=["news"],
            from_addresses=[Recipient(email_address=EmailAddress(address="news@shop.example"))],
        ),
        actions=MessageRuleActions(move_to_folder=inbox.id, mark_as_read=True,
                                   assign_categories=["News"]),
    ))
    check(made.sequence == 2 and made.is_enabled and made.has_error is False, "rule made")
    check(made.conditions.sender_contains == ["NEWS"], f"kept as {made.conditions.sender_contains}")
    got = await rules.by_message_rule_id(made.id).get()
    check(got.display_name == "news" and got.actions.mark_as_read, "rule read back")
    listed = await rules.get()
    check([r.id for r in listed.value] == [made.id], "rules listed")
    await expect_error(rules.post(MessageRule(display_name="x", actions=MessageRuleActions(
        mark_as_read=True))), 400, None)
    await expect_error(rules.post(MessageRule(display_name="x", sequence=3, actions=MessageRuleActions(
        move_to_folder="AAMkfolder-missing"))), 404, "ErrorItemNotFound")
    await rules.by_message_rule_id(made.id).delete()
    await expect_error(rules.by_message_rule_id(made.id).get(), 404, "ErrorItemNotFound")
    summary["rules"] = True

    # Drafts: createReplyAll in the original's conversation, a draft's own fields by PATCH,
    # a new draft by POST, DELETE; a message that is not a draft keeps its subject.
    reply = await client.me.messages.by_message_id(ids[5]).create_reply_all.post(CreateReplyAllPostRequestBody(comment=""))
    original = await client.me.messages.by_message_id(ids[5]).get()
    check(reply.is_draft and reply.conversation_id == original.conversation_id, "reply threaded")
    check(reply.parent_folder_id == names["Drafts"].id, "reply in Drafts")
    to = [Recipient(email_address=EmailAddress(address="bob@example.org"))]
    edited = await client.me.messages.by_message_id(reply.id).patch(Message(
        subject="Re: lunch", to_recipients=to, body=ItemBody(content_type=BodyType.Text, content="Noon.")))
    check(edited.subject == "Re: lunch" and edited.body.content == "Noon.", "draft patched")
    check(edited.to_recipients[0].email_address.address == "bob@example.org", "draft recipients")
    await expect_error(client.me.messages.by_message_id(ids[5]).patch(Message(subject="x")), 400,
                       "ErrorInvalidPropertyUpdateSentAsReadOnly")
    new = await client.me.messages.post(Message(subject="Hello", to_recipients=to))
    check(new.is_draft and new.parent_folder_id == names["Drafts"].id, "a new draft")
    for made_draft in (reply, new):
        await client.me.messages.by_message_id(made_draft.id).delete()
        await expect_error(client.me.messages.by_message_id(made_draft.id).get(), 404, "ErrorItemNotFound")
    summary["drafts"] = True

    # Attachments: listed as fileAttachment ($select honoured), and each one's raw contents
    # by `$value`, as the attachment reference documents (the SDK has no builder for it).
    made = control("attachment", {"message": ids[6], "name": "bill.pdf",
                                  "content_type": "application/pdf", "text": "PDFDATA"})
    selected = AttachmentsRequestBuilder.AttachmentsRequestBuilderGetQueryParameters(
        select=["id", "name", "contentType", "size"])
    listed = await client.me.messages.by_message_id(ids[6]).attachments.get(
        RequestConfiguration(query_parameters=selected))
    check([(a.odata_type, a.name, a.content_type, a.size) for a in listed.value]
          == [("#microsoft.graph.fileAttachment", "bill.pdf", "application/pdf", 7)], "attachments listed")
    info = RequestInformation(Method.GET, f"{URL}/v1.0/me/messages/{ids[6]}/attachments/{made['id']}/$value")
    raw = await client.request_adapter.send_primitive_async(info, "bytes", {})
    check(raw == b"PDFDATA", f"an attachment's $value: {raw!r}")
    summary["attachments"] = True

    # permanentDelete: gone for good.
    await client.me.messages.by_message_id(ids[2]).permanent_delete.post()
    await expect_error(client.me.messages.by_message_id(ids[2]).get(), 404, "ErrorItemNotFound")

    # Errors keep Graph's envelope.
    await expect_error(
        client.me.mail_folders.by_mail_folder_id("nope").get(), 404, "ErrorItemNotFound"
    )
    summary["targets"] = targets
    print(json.dumps(summary))


asyncio.run(main())
