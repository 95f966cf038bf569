//! JMAP's wire as types (RFC 8620 §2, §3, §5; RFC 8621 §2, §4): the session resource, the
//! method calls mailbroker sends and their answers, and the mailbox and email objects it
//! reads and writes. Everything here is pure: a call is built, an answer is read, and
//! `Client::call` is the one place a request meets the network.

use std::collections::BTreeMap;

use mailbroker_core::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The core capability, whose limits every request keeps within.
pub const CORE: &str = "urn:ietf:params:jmap:core";
/// The mail capability, whose primary account holds the mail.
pub const MAIL: &str = "urn:ietf:params:jmap:mail";
/// The capabilities every request names.
pub const USING: [&str; 2] = [CORE, MAIL];

/// A collection the server may send as `null`, read as empty.
fn nullable<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The session resource (RFC 8620 §2), as far as mailbroker reads it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    #[serde(default, deserialize_with = "nullable")]
    pub capabilities: BTreeMap<String, Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub primary_accounts: BTreeMap<String, String>,
    pub api_url: Option<String>,
    pub download_url: Option<String>,
    pub upload_url: Option<String>,
    pub event_source_url: Option<String>,
}

/// The core capability's limits (RFC 8620 §2); a server that leaves one out gets ours.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreLimits {
    pub max_objects_in_get: Option<u64>,
    pub max_objects_in_set: Option<u64>,
    pub max_calls_in_request: Option<u64>,
}

impl Session {
    /// The account holding the mail (the session's primary mail account).
    pub fn mail_account(&self) -> Option<&str> {
        self.primary_accounts.get(MAIL).map(String::as_str)
    }

    /// The core capability's limits.
    pub fn core_limits(&self) -> CoreLimits {
        let core = self.capabilities.get(CORE);
        core.and_then(|c| CoreLimits::deserialize(c).ok())
            .unwrap_or_default()
    }
}

/// A result reference (RFC 8620 §3.7): a value taken from an earlier call's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultReference {
    pub result_of: String,
    pub name: String,
    pub path: String,
}

/// Which objects a `/get` asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Ids {
    /// Every object (`"ids": null`).
    All,
    These(Vec<String>),
    /// The ids an earlier call of the same request answered (`"#ids"`).
    Of(ResultReference),
}

/// A PatchObject (RFC 8620 §5.3): a JSON pointer from the object to each new value, `null`
/// removing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct PatchObject(BTreeMap<String, Value>);

impl PatchObject {
    /// The email in mailbox `id`, or not.
    pub fn mailbox(&mut self, id: &str, on: bool) {
        self.set(format!("mailboxIds/{}", pointer(id)), on);
    }

    /// Keyword `keyword` set, or removed.
    pub fn keyword(&mut self, keyword: &str, on: bool) {
        self.set(format!("keywords/{}", pointer(keyword)), on);
    }

    /// The whole `keywords` object, replacing the email's.
    pub fn keywords<'a>(&mut self, all: impl IntoIterator<Item = &'a String>) {
        let all = all.into_iter().map(|k| (k.clone(), Value::Bool(true)));
        self.0
            .insert("keywords".into(), Value::Object(all.collect()));
    }

    fn set(&mut self, path: String, on: bool) {
        self.0
            .insert(path, if on { Value::Bool(true) } else { Value::Null });
    }
}

/// A JSON-pointer segment (RFC 6901): `~` as `~0`, `/` as `~1`.
pub fn pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// A mailbox to create (RFC 8621 §2.5), under `parent_id` (an id, or `#` and a creation id
/// of the same call), at the top when `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewMailbox {
    pub name: String,
    pub parent_id: Option<String>,
}

/// A method call, before its account id and call id are given it (`Client::call`).
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Every mailbox.
    MailboxGet,
    /// Mailboxes to create, by creation id.
    MailboxSet {
        create: BTreeMap<String, NewMailbox>,
    },
    /// What changed since `since_state`, at most `max_changes` ids.
    EmailChanges {
        since_state: String,
        max_changes: usize,
    },
    /// A page of every email's ids.
    EmailQuery {
        position: usize,
        limit: usize,
    },
    EmailGet {
        ids: Ids,
        properties: &'static [&'static str],
    },
    /// Patches by id.
    EmailUpdate(BTreeMap<String, PatchObject>),
    EmailDestroy(Vec<String>),
    /// Messages uploaded as blobs, made emails (RFC 8621 §4.8), by creation id.
    EmailImport(BTreeMap<String, Value>),
    /// One email's body structure: each part's id, blob, type, name and sub-parts.
    EmailParts(String),
}

/// The arguments of a `/get`.
#[derive(Serialize)]
struct GetArguments<'a> {
    /// Left out for `#ids`; `Some(None)` is `null`, every object.
    #[serde(skip_serializing_if = "Option::is_none")]
    ids: Option<Option<&'a [String]>>,
    #[serde(rename = "#ids", skip_serializing_if = "Option::is_none")]
    ids_of: Option<&'a ResultReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<&'a [&'a str]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangesArguments<'a> {
    since_state: &'a str,
    max_changes: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryArguments {
    position: usize,
    limit: usize,
    calculate_total: bool,
}

#[derive(Serialize)]
struct SetArguments<'a, T: Serialize> {
    #[serde(skip_serializing_if = "Option::is_none")]
    create: Option<&'a BTreeMap<String, T>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    update: Option<&'a BTreeMap<String, PatchObject>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    destroy: Option<&'a [String]>,
}

impl Call {
    /// An `Email/get` of these emails' `properties`.
    pub fn email_get<I>(ids: I, properties: &'static [&'static str]) -> Call
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let ids = ids.into_iter().map(|id| id.as_ref().to_string()).collect();
        Call::EmailGet {
            ids: Ids::These(ids),
            properties,
        }
    }

    /// The method's name.
    pub fn name(&self) -> &'static str {
        match self {
            Call::MailboxGet => "Mailbox/get",
            Call::MailboxSet { .. } => "Mailbox/set",
            Call::EmailChanges { .. } => "Email/changes",
            Call::EmailQuery { .. } => "Email/query",
            Call::EmailGet { .. } => "Email/get",
            Call::EmailUpdate(_) | Call::EmailDestroy(_) => "Email/set",
            Call::EmailImport(_) => "Email/import",
            Call::EmailParts(_) => "Email/get",
        }
    }

    /// The method's arguments, without the account id.
    pub fn arguments(&self) -> Result<Value> {
        let get = |ids: &Ids, properties| {
            let (ids, ids_of) = match ids {
                Ids::All => (Some(None), None),
                Ids::These(ids) => (Some(Some(&ids[..])), None),
                Ids::Of(reference) => (None, Some(reference)),
            };
            serde_json::to_value(GetArguments {
                ids,
                ids_of,
                properties,
            })
        };
        let set = |update, destroy| {
            let none: Option<&BTreeMap<String, NewMailbox>> = None;
            serde_json::to_value(SetArguments {
                create: none,
                update,
                destroy,
            })
        };
        let arguments = match self {
            Call::MailboxGet => get(&Ids::All, None),
            Call::MailboxSet { create } => serde_json::to_value(SetArguments {
                create: Some(create),
                update: None,
                destroy: None,
            }),
            Call::EmailChanges {
                since_state,
                max_changes,
            } => serde_json::to_value(ChangesArguments {
                since_state,
                max_changes: *max_changes,
            }),
            Call::EmailQuery { position, limit } => serde_json::to_value(QueryArguments {
                position: *position,
                limit: *limit,
                calculate_total: false,
            }),
            Call::EmailGet { ids, properties } => get(ids, Some(properties)),
            Call::EmailUpdate(update) => set(Some(update), None),
            Call::EmailDestroy(ids) => set(None, Some(&ids[..])),
            Call::EmailImport(emails) => Ok(serde_json::json!({ "emails": emails })),
            Call::EmailParts(id) => Ok(serde_json::json!({
                "ids": [id],
                "properties": ["bodyStructure"],
                "bodyProperties": ["partId", "blobId", "type", "name", "subParts"],
            })),
        };
        arguments.map_err(|e| Error::internal(format!("jmap {}: {e}", self.name())))
    }
}

/// One method's answer (an Invocation: name, arguments, call id), or the error the server
/// answered in its place (`"error"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Answer(pub String, pub Value, pub String);

/// A request's answer (RFC 8620 §3.4).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub method_responses: Vec<Answer>,
}

/// A method's error, or why one object of a `/set` was refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SetError {
    #[serde(rename = "type")]
    pub kind: String,
    pub description: Option<String>,
}

impl Answer {
    /// The method's answer as `T`, or its error as ours (`cannotCalculateChanges` is
    /// `not_found`: the state it was asked from is gone, and the caller starts over).
    pub fn read<T: DeserializeOwned>(&self, what: &str) -> Result<T> {
        let Answer(name, arguments, _) = self;
        if name == "error" {
            let kind = SetError::deserialize(arguments).map_or("unknown".into(), |e| e.kind);
            let message = format!("jmap {what}: the server answered {kind}");
            return Err(match kind.as_str() {
                "cannotCalculateChanges" => Error::not_found(message),
                "accountNotFound" | "forbidden" | "accountNotSupportedByMethod" => {
                    Error::insufficient_scope(message)
                }
                "requestTooLarge" | "tooManyChanges" => Error::limit_exceeded(message),
                _ => Error::provider_unavailable(message),
            });
        }
        T::deserialize(arguments).map_err(|e| {
            Error::provider_unavailable(format!(
                "jmap {what}: an answer not as RFC 8620 has it: {e}"
            ))
        })
    }
}

/// The answer of call `n` of a request as `T` (`Answer::read`); a request answered
/// without it is the server's failure.
pub fn nth<T: DeserializeOwned>(answers: &[Answer], n: usize, what: &str) -> Result<T> {
    match answers.get(n) {
        Some(answer) => answer.read(what),
        None => Err(Error::provider_unavailable(format!(
            "jmap {what}: the server's answer left it out"
        ))),
    }
}

/// A `/get` answer (RFC 8620 §5.1).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: Deserialize<'de>"))]
pub struct GetResponse<T> {
    #[serde(default)]
    pub state: String,
    #[serde(default = "Vec::new", deserialize_with = "nullable")]
    pub list: Vec<T>,
    #[serde(default, deserialize_with = "nullable")]
    pub not_found: Vec<String>,
}

/// A `/changes` answer (RFC 8620 §5.2).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangesResponse {
    pub new_state: String,
    #[serde(default)]
    pub has_more_changes: bool,
    #[serde(default, deserialize_with = "nullable")]
    pub created: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub updated: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub destroyed: Vec<String>,
}

/// A `/query` answer (RFC 8620 §5.5).
#[derive(Debug, Deserialize)]
pub struct QueryResponse {
    #[serde(default, deserialize_with = "nullable")]
    pub ids: Vec<String>,
}

/// A `/set` answer (RFC 8620 §5.3): what was refused, by id.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetResponse {
    #[serde(default, deserialize_with = "nullable")]
    pub updated: BTreeMap<String, Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub not_created: BTreeMap<String, SetError>,
    #[serde(default, deserialize_with = "nullable")]
    pub not_updated: BTreeMap<String, SetError>,
    #[serde(default, deserialize_with = "nullable")]
    pub not_destroyed: BTreeMap<String, SetError>,
}

/// A mailbox (RFC 8621 §2) as mailbroker reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailboxObject {
    pub id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    pub parent_id: Option<String>,
    pub role: Option<String>,
}

/// An address of an email header (RFC 8621 §4.1.2.3).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EmailAddress {
    pub name: Option<String>,
    pub email: Option<String>,
}

/// The list headers, as RFC 8621 header properties in the forms it allows them: List-Id as
/// text, List-Unsubscribe only raw or as its URLs (a server refuses text).
pub const LIST_ID: &str = "header:List-Id:asText";
pub const LIST_UNSUBSCRIBE: &str = "header:List-Unsubscribe:asURLs";
/// Every `Authentication-Results`, in the order the message has them (RFC 8621 §4.1.3).
pub const AUTH_RESULTS: &str = "header:Authentication-Results:asText:all";

/// An email (RFC 8621 §4), with the properties mailbroker asks for; one not asked for is
/// empty.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Email {
    pub id: String,
    pub blob_id: Option<String>,
    pub thread_id: Option<String>,
    /// The mailboxes it is in: ids whose value is `true`.
    #[serde(default, deserialize_with = "nullable")]
    pub mailbox_ids: BTreeMap<String, bool>,
    #[serde(default, deserialize_with = "nullable")]
    pub keywords: BTreeMap<String, bool>,
    #[serde(default)]
    pub size: u64,
    pub received_at: Option<String>,
    pub sent_at: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub message_id: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub from: Vec<EmailAddress>,
    #[serde(default, deserialize_with = "nullable")]
    pub to: Vec<EmailAddress>,
    #[serde(default, deserialize_with = "nullable")]
    pub cc: Vec<EmailAddress>,
    pub subject: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub preview: String,
    #[serde(default)]
    pub has_attachment: bool,
    #[serde(rename = "header:List-Id:asText")]
    pub list_id: Option<String>,
    #[serde(
        rename = "header:List-Unsubscribe:asURLs",
        default,
        deserialize_with = "nullable"
    )]
    pub list_unsubscribe: Vec<String>,
    #[serde(
        rename = "header:Authentication-Results:asText:all",
        default,
        deserialize_with = "nullable"
    )]
    pub auth_results: Vec<String>,
}

impl Email {
    /// The ids of the mailboxes it is in.
    pub fn mailboxes(&self) -> impl Iterator<Item = &String> {
        self.mailbox_ids
            .iter()
            .filter(|(_, on)| **on)
            .map(|(id, _)| id)
    }
}

/// A push `StateChange` (RFC 8620 §7.1): each account's new state, by type.
#[derive(Debug, Deserialize)]
pub struct StateChange {
    #[serde(default, deserialize_with = "nullable")]
    pub changed: BTreeMap<String, BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_sent_as_rfc_8620_has_them() {
        let args = |call: Call| call.arguments().unwrap();
        assert_eq!(args(Call::MailboxGet), json!({ "ids": null }));
        let reference = ResultReference {
            result_of: "0".into(),
            name: "Email/query".into(),
            path: "/ids".into(),
        };
        assert_eq!(
            args(Call::EmailGet {
                ids: Ids::Of(reference),
                properties: &["id"]
            }),
            json!({ "#ids": { "resultOf": "0", "name": "Email/query", "path": "/ids" },
                "properties": ["id"] })
        );
        assert_eq!(
            args(Call::EmailGet {
                ids: Ids::These(vec!["a".into()]),
                properties: &["id"]
            }),
            json!({ "ids": ["a"], "properties": ["id"] })
        );
        assert_eq!(
            args(Call::EmailChanges {
                since_state: "7".into(),
                max_changes: 50
            }),
            json!({ "sinceState": "7", "maxChanges": 50 })
        );
        assert_eq!(
            args(Call::EmailQuery {
                position: 10,
                limit: 5
            }),
            json!({ "position": 10, "limit": 5, "calculateTotal": false })
        );
        assert_eq!(
            args(Call::EmailDestroy(vec!["e".into()])),
            json!({ "destroy": ["e"] })
        );
        let mut patch = PatchObject::default();
        patch.mailbox("a/b", false);
        patch.keyword("$seen", true);
        let update = BTreeMap::from([("e".to_string(), patch)]);
        assert_eq!(
            args(Call::EmailUpdate(update)),
            json!({ "update": { "e": { "mailboxIds/a~1b": null, "keywords/$seen": true } } })
        );
        let create = BTreeMap::from([(
            "l0".to_string(),
            NewMailbox {
                name: "Work".into(),
                parent_id: None,
            },
        )]);
        assert_eq!(
            args(Call::MailboxSet { create }),
            json!({ "create": { "l0": { "name": "Work", "parentId": null } } })
        );
    }

    #[test]
    fn answers_are_read_into_types_and_errors_into_ours() {
        let answer = |name: &str, args: Value| Answer(name.into(), args, "0".into());
        let got: GetResponse<Email> = answer(
            "Email/get",
            json!({ "state": "9", "notFound": null, "list": [{ "id": "e", "mailboxIds": { "m": true },
                "keywords": { "$seen": true }, "from": null, "messageId": ["x@y"],
                "header:List-Unsubscribe:asURLs": null }] }),
        )
        .read("Email/get")
        .unwrap();
        assert_eq!(got.state, "9");
        assert_eq!(got.list[0].mailboxes().collect::<Vec<_>>(), ["m"]);
        assert!(got.list[0].from.is_empty() && got.not_found.is_empty());
        let changes: ChangesResponse = answer(
            "Email/changes",
            json!({ "newState": "3", "hasMoreChanges": false, "created": ["a"], "updated": [],
                "destroyed": null, "oldState": "1" }),
        )
        .read("Email/changes")
        .unwrap();
        assert_eq!(
            (changes.new_state.as_str(), changes.created.len()),
            ("3", 1)
        );
        let error = |kind: &str| {
            answer("error", json!({ "type": kind }))
                .read::<QueryResponse>("x")
                .unwrap_err()
        };
        assert!(error("cannotCalculateChanges").is_not_found());
        assert_eq!(error("serverFail").error_type(), "provider_unavailable");
        assert_eq!(error("forbidden").error_type(), "insufficient_scope");
        let wrong = answer("Email/changes", json!({ "created": "not a list" }));
        let wrong = wrong.read::<ChangesResponse>("Email/changes").unwrap_err();
        assert_eq!(wrong.error_type(), "provider_unavailable");
    }

    #[test]
    fn a_session_names_its_account_and_limits() {
        let session: Session = serde_json::from_value(json!({
            "capabilities": { CORE: { "maxObjectsInGet": 4096, "maxCallsInRequest": 50 } },
            "primaryAccounts": { MAIL: "u1" },
            "apiUrl": "/jmap/", "downloadUrl": null
        }))
        .unwrap();
        assert_eq!(session.mail_account(), Some("u1"));
        let limits = session.core_limits();
        assert_eq!(limits.max_objects_in_get, Some(4096));
        assert_eq!(limits.max_objects_in_set, None);
        assert_eq!(session.api_url.as_deref(), Some("/jmap/"));
    }
}
