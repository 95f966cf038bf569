//! An Outlook account's server-side rules as the Inbox's `messageRules` (Graph v1.0). A
//! rule's condition is said only where Outlook's predicates say exactly what mailbroker's
//! search means: a sender by whole address (`fromAddresses`; several, OR'ed, as one list),
//! `hasAttachments`, a size in whole kilobytes (`withinSizeRange`), and one NOT as the rule's
//! exceptions. Outlook's text predicates (`senderContains`, `subjectContains`, …) match
//! anywhere in a field, wider than mailbroker's words, so `subject:`, `to:`, `cc:`, `list:`
//! and a sender that is not a whole address are refused by name. Actions: move to a folder,
//! categories, mark read; Outlook's rules cannot flag. mailbroker's rules come after the
//! person's own (`sequence`), each named by its `displayName`; writing needs
//! `MailboxSettings.ReadWrite`, which every Outlook account is asked for.

use mailbroker_core::{Condition, Error, MailboxInfo, Result, Role, Rule, RulesBefore, ServerRule};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::GraphProvider;

const RULES: &str = "me/mailFolders/inbox/messageRules";

fn refused(term: &str, why: &str) -> Error {
    Error::validation(format!(
        "{term} cannot be a condition of an Outlook rule: {why}"
    ))
    .with_next_step("write the rule without it, or stage the matching mail by hand instead")
}

fn address(c: &Condition) -> Result<Value> {
    let whole = |v: &str| {
        let (local, domain) = v.split_once('@').unwrap_or_default();
        !local.is_empty() && domain.contains('.') && !v.contains(char::is_whitespace)
    };
    match c {
        Condition::From(v) if whole(v) => Ok(json!({"emailAddress": {"address": v}})),
        other => Err(refused(
            &other.term(),
            "Outlook matches a sender's text anywhere in it; give whole addresses (from:news@example.org)",
        )),
    }
}

/// Adds `c` to `predicates` (a `messageRulePredicates`); a predicate given twice is refused,
/// since Outlook's lists are OR'ed.
fn predicate(c: &Condition, predicates: &mut Map<String, Value>) -> Result<()> {
    let (key, value) = match c {
        Condition::From(_) => ("fromAddresses", json!([address(c)?])),
        Condition::Any(items) => (
            "fromAddresses",
            Value::Array(items.iter().map(address).collect::<Result<_>>()?),
        ),
        Condition::HasAttachment => ("hasAttachments", json!(true)),
        Condition::Larger(n) | Condition::Smaller(n) => {
            if n % 1024 != 0 || *n == 0 {
                return Err(
                    refused(&c.term(), "Outlook counts sizes in whole kilobytes")
                        .with_next_step("give the size in K or M (larger:500K)"),
                );
            }
            let key = match c {
                Condition::Larger(_) => "minimumSize",
                _ => "maximumSize",
            };
            ("withinSizeRange", json!({ key: n / 1024 }))
        }
        other => {
            return Err(refused(
                &other.term(),
                "Outlook's rules match text anywhere in a field, wider than mailbroker's search",
            ));
        }
    };
    if predicates.insert(key.to_string(), value).is_some() {
        return Err(refused(
            &c.term(),
            "Outlook takes each kind of condition once",
        ));
    }
    Ok(())
}

/// The rule's `conditions` and `exceptions`.
fn conditions(when: &Condition) -> Result<(Map<String, Value>, Map<String, Value>)> {
    let (mut all, mut except) = (Map::new(), Map::new());
    let items = match when {
        Condition::All(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    for item in items {
        match item {
            Condition::Not(inner) if except.is_empty() => predicate(inner, &mut except)?,
            Condition::Not(_) => {
                return Err(refused(
                    &item.term(),
                    "Outlook takes one NOT, as its exceptions",
                ));
            }
            other => predicate(other, &mut all)?,
        }
    }
    Ok((all, except))
}

/// The folder `rule` moves mail to among `mailboxes` (name, role); never the trash.
pub fn target<'a>(rule: &Rule, mailboxes: &'a [(String, Option<Role>)]) -> Result<Option<&'a str>> {
    let Some(wanted) = rule.then.move_to.as_deref() else {
        return Ok(None);
    };
    let found = match Role::parse(wanted) {
        Some(role) => mailboxes.iter().find(|(_, r)| *r == Some(role)),
        None => mailboxes.iter().find(|(name, _)| name == wanted),
    };
    match found {
        Some((_, Some(Role::Trash))) => Err(Error::validation(
            "a rule never moves arriving mail to the trash: that would delete it unseen",
        )
        .with_next_step("move it to an archive or a folder of its own, or tag it")),
        Some((name, _)) => Ok(Some(name)),
        None => Err(Error::validation(format!(
            "the account has no folder {wanted:?} for the rule to move mail to"
        ))
        .with_next_step("name a folder the account has (mailbroker mailboxes), or a role")),
    }
}

/// `rule` as the `messageRule` Graph will be given; `folder` is the id of the folder it moves
/// mail to (or how the plan names it), `sequence` its place after the person's rules.
pub fn message_rule(rule: &Rule, folder: Option<&str>, sequence: u32) -> Result<Value> {
    rule.validate()?;
    if rule.then.flagged == Some(true) {
        return Err(Error::validation("an Outlook rule cannot flag mail")
            .with_next_step("use --add-tag, --read or --move-to instead of --flag"));
    }
    let (all, except) = conditions(&rule.when)?;
    let mut actions = Map::new();
    if let Some(folder) = folder {
        actions.insert("moveToFolder".into(), json!(folder));
    }
    if !rule.then.add_tags.is_empty() {
        actions.insert("assignCategories".into(), json!(rule.then.add_tags));
    }
    if rule.then.read == Some(true) {
        actions.insert("markAsRead".into(), json!(true));
    }
    let mut out = json!({
        "displayName": rule.name,
        "sequence": sequence,
        "isEnabled": true,
        "conditions": all,
        "actions": actions,
    });
    if !except.is_empty() {
        out["exceptions"] = Value::Object(except);
    }
    Ok(out)
}

/// What of a rule says what it does, for comparing one read back with one written: without
/// its id, place and Exchange's own flags, empty parts left out, a condition's text in lower
/// case (Exchange keeps some in capitals), lists in order.
pub fn essence(rule: &Value) -> Value {
    fn clean(v: &Value, fold: bool) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::String(s) if fold => Some(json!(s.to_lowercase())),
            Value::Array(items) if items.is_empty() => None,
            Value::Array(items) => {
                let mut items: Vec<Value> = items.iter().filter_map(|i| clean(i, fold)).collect();
                items.sort_by_key(Value::to_string);
                Some(Value::Array(items))
            }
            Value::Object(map) => {
                let kept: Map<String, Value> = (map.iter())
                    .filter_map(|(k, v)| Some((k.clone(), clean(v, fold)?)))
                    .collect();
                (!kept.is_empty()).then_some(Value::Object(kept))
            }
            other => Some(other.clone()),
        }
    }
    let part = |key: &str, fold: bool| clean(&rule[key], fold).unwrap_or(Value::Null);
    json!({
        "displayName": rule["displayName"],
        "conditions": part("conditions", true),
        "exceptions": part("exceptions", true),
        "actions": part("actions", false),
    })
}

/// What a change of rules did, so that it can be undone: the rules it deleted and those it
/// made, whole (one made again by an undo has a new id, so it is found again by what it is).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Before {
    deleted: Vec<Value>,
    created: Vec<Value>,
}

fn encode(before: &Before) -> Result<RulesBefore> {
    serde_json::to_string(before)
        .map(RulesBefore)
        .map_err(|e| Error::internal(e.to_string()))
}

/// Graph refusing the mailbox's rules though the account granted what they need: a mailbox
/// whose rules Graph does not serve (as some personal Microsoft accounts answer).
fn not_served(e: Error) -> Error {
    match e.error_type() {
        "insufficient_scope" => Error::unsupported(format!(
            "Outlook refuses this mailbox's rules to mailbroker ({e}); some personal Microsoft accounts do"
        ))
        .with_next_step("make the rule in Outlook's own settings (Settings → Mail → Rules)"),
        _ => e,
    }
}

fn choices(mailboxes: &[MailboxInfo]) -> Vec<(String, Option<Role>)> {
    (mailboxes.iter())
        .filter(|m| m.selectable)
        .map(|m| (m.name.clone(), m.role))
        .collect()
}

impl GraphProvider {
    fn may_write_rules(&self) -> Result<()> {
        match self.master_list {
            true => Ok(()),
            false => Err(Error::insufficient_scope(
                "the account's grant does not let mailbroker keep Outlook rules (MailboxSettings.ReadWrite)",
            )
            .with_next_step(format!(
                "sign in again and grant it: mailbroker account login {}",
                self.client.account()
            ))),
        }
    }

    async fn listed(&self) -> Result<Vec<Value>> {
        let page = self.client.get(RULES).await.map_err(not_served)?;
        Ok(page["value"].as_array().cloned().unwrap_or_default())
    }

    /// Each of `rules` as its `messageRule`, moves resolved to folder ids; from `sequence` on.
    async fn wanted(&mut self, rules: &[Rule], sequence: u32) -> Result<Vec<Value>> {
        let mailboxes = crate::sync::folders(&self.client).await?;
        let infos: Vec<MailboxInfo> = mailboxes.iter().map(crate::convert::Folder::info).collect();
        let choices = choices(&infos);
        let mut out = Vec::new();
        for (n, rule) in rules.iter().enumerate() {
            let folder = match target(rule, &choices)? {
                Some(name) => (mailboxes.iter().find(|f| f.path == name)).map(|f| f.id.as_str()),
                None => None,
            };
            out.push(message_rule(rule, folder, sequence + n as u32)?);
        }
        Ok(out)
    }

    /// The Inbox's rules, each with whether it is exactly one of `ours`.
    pub(crate) async fn inbox_rules(&mut self, ours: &[Rule]) -> Result<Vec<ServerRule>> {
        let mine: Vec<Value> = (self.wanted(ours, 1).await?.iter()).map(essence).collect();
        Ok((self.listed().await?.iter())
            .map(|r| ServerRule {
                name: r["displayName"].as_str().unwrap_or_default().to_string(),
                ours: mine.contains(&essence(r)),
                enabled: r["isEnabled"] != false,
                forwards: ["forwardTo", "forwardAsAttachmentTo", "redirectTo"]
                    .iter()
                    .any(|k| r["actions"][k].as_array().is_some_and(|a| !a.is_empty())),
            })
            .collect())
    }

    /// Makes a rule and reads it back.
    async fn make(&self, rule: &Value) -> Result<Value> {
        let made = self.client.post(RULES, rule).await.map_err(not_served)?;
        let id = made["id"].as_str().unwrap_or_default();
        let kept = self.client.get(&format!("{RULES}/{id}")).await?;
        if essence(&kept) != essence(rule) {
            return Err(Error::provider_write_failed(format!(
                "Outlook keeps rule {id} otherwise than it was written"
            )));
        }
        Ok(kept)
    }

    async fn remove(&self, rule: &Value) -> Result<()> {
        let id = rule["id"].as_str().unwrap_or_default();
        self.client.delete(&format!("{RULES}/{id}")).await
    }

    pub(crate) async fn put_inbox_rules(
        &mut self,
        ours: &[Rule],
        rules: &[Rule],
    ) -> Result<RulesBefore> {
        self.may_write_rules()?;
        let server = self.listed().await?;
        let mine: Vec<Value> = (self.wanted(ours, 1).await?.iter()).map(essence).collect();
        let last = (server.iter())
            .filter(|r| !mine.contains(&essence(r)))
            .filter_map(|r| r["sequence"].as_u64())
            .max()
            .unwrap_or(0);
        let wanted = self.wanted(rules, last as u32 + 1).await?;
        let kept: Vec<Value> = wanted.iter().map(essence).collect();
        let gone: Vec<&Value> = (server.iter())
            .filter(|r| mine.contains(&essence(r)) && !kept.contains(&essence(r)))
            .collect();
        let new: Vec<&Value> = (wanted.iter())
            .filter(|w| !server.iter().any(|r| essence(r) == essence(w)))
            .collect();
        // Made first, then the old ones deleted: a failure leaves the old rules working.
        let mut before = Before::default();
        for rule in new {
            match self.make(rule).await {
                Ok(made) => before.created.push(made),
                Err(e) => {
                    for made in &before.created {
                        let _ = self.remove(made).await;
                    }
                    return Err(e);
                }
            }
        }
        for rule in gone {
            self.remove(rule).await?;
            before.deleted.push(rule.clone());
        }
        encode(&before)
    }

    pub(crate) async fn restore_inbox_rules(
        &mut self,
        before: &RulesBefore,
    ) -> Result<RulesBefore> {
        self.may_write_rules()?;
        let before: Before = serde_json::from_str(&before.0)
            .map_err(|e| Error::internal(format!("a rule change's earlier state: {e}")))?;
        let server = self.listed().await?;
        let mut now = Before::default();
        for made in &before.created {
            let found =
                (server.iter()).find(|r| r["id"] == made["id"] || essence(r) == essence(made));
            // Gone since (the person deleted it): nothing to take away.
            if let Some(rule) = found {
                self.remove(rule).await?;
                now.deleted.push(rule.clone());
            }
        }
        for rule in &before.deleted {
            let mut again = rule.clone();
            if let Some(o) = again.as_object_mut() {
                for key in ["id", "hasError", "isReadOnly", "@odata.etag"] {
                    o.remove(key);
                }
            }
            now.created.push(self.make(&again).await?);
        }
        encode(&now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbroker_core::Patch;

    fn rule(when: Condition, then: Patch) -> Rule {
        Rule {
            name: "news".into(),
            query: "q".into(),
            when,
            then,
        }
    }

    #[test]
    fn whole_addresses_attachments_sizes_and_one_not_are_said_exactly() {
        let when = Condition::All(vec![
            Condition::Any(vec![
                Condition::From("a@example.org".into()),
                Condition::From("b@example.org".into()),
            ]),
            Condition::Larger(5 * 1024 * 1024),
            Condition::Not(Box::new(Condition::HasAttachment)),
        ]);
        let then = Patch {
            add_tags: vec!["News".into()],
            read: Some(true),
            ..Patch::default()
        };
        let r = message_rule(&rule(when, then), Some("AAMk-archive"), 7).unwrap();
        assert_eq!(r["sequence"], 7);
        assert_eq!(
            r["conditions"]["fromAddresses"][1]["emailAddress"]["address"],
            "b@example.org"
        );
        assert_eq!(
            r["conditions"]["withinSizeRange"],
            json!({"minimumSize": 5120})
        );
        assert_eq!(r["exceptions"], json!({"hasAttachments": true}));
        assert_eq!(
            r["actions"],
            json!({"moveToFolder": "AAMk-archive", "assignCategories": ["News"], "markAsRead": true})
        );
    }

    #[test]
    fn what_outlook_cannot_say_exactly_is_refused_by_name() {
        let read = Patch {
            read: Some(true),
            ..Patch::default()
        };
        for (when, naming) in [
            (Condition::Subject("weekly".into()), "subject:weekly"),
            (Condition::From("news".into()), "from:news"),
            (Condition::List(Some("x".into())), "list:x"),
            (Condition::Larger(1000), "larger:1000"),
        ] {
            let e = message_rule(&rule(when, read.clone()), None, 1).unwrap_err();
            assert_eq!(e.error_type(), "validation_error");
            assert!(e.to_string().contains(naming), "{e}");
        }
        let flag = Patch {
            flagged: Some(true),
            ..Patch::default()
        };
        let e = message_rule(&rule(Condition::HasAttachment, flag), None, 1).unwrap_err();
        assert!(e.to_string().contains("flag"), "{e}");
    }

    #[test]
    fn a_rule_read_back_in_capitals_is_the_rule_written() {
        let written = json!({"displayName": "n", "sequence": 3, "conditions": {"senderContains": ["news"]},
                             "actions": {"markAsRead": true}});
        let kept = json!({"id": "x", "displayName": "n", "sequence": 9, "hasError": false,
                          "isReadOnly": false, "conditions": {"senderContains": ["NEWS"], "bodyContains": []},
                          "actions": {"markAsRead": true, "forwardTo": null}});
        assert_eq!(essence(&written), essence(&kept));
    }
}
