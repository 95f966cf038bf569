//! Tags as mailboxes (`--tags mailboxes`, Fastmail's labels mode): an email is in several
//! mailboxes at once, the ones with a role (inbox, archive, trash…) are its place and the
//! others are its tags, named by their paths. Adding a tag adds the email to that mailbox
//! and removing one takes it out, without touching its other mailboxes.
//!
//! A tag no mailbox has yet is created (with any missing parents) just before the first
//! write that adds it. An email a removal would leave in no mailbox at all (JMAP refuses
//! that) is put in the archive mailbox instead, as a labels-mode client does.

use std::collections::{BTreeMap, HashSet};

use crate::client::Client;
use crate::convert::{self, Mailbox};
use crate::wire::{Call, GetResponse, MailboxObject, NewMailbox, SetResponse, nth};
use mailbroker_core::{Error, Result, path};
use serde::{Deserialize, Serialize};

/// What a tag is on the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TagMode {
    /// A keyword of the email (RFC 8621 §4.1.1).
    #[default]
    Keywords,
    /// A mailbox without a role that holds the email beside its others.
    Mailboxes,
}

impl TagMode {
    pub fn parse(s: &str) -> Result<TagMode> {
        match s {
            "keywords" => Ok(TagMode::Keywords),
            "mailboxes" => Ok(TagMode::Mailboxes),
            _ => Err(
                Error::validation(format!("--tags {s:?} is neither keywords nor mailboxes"))
                    .with_next_step("pass --tags keywords (the default) or --tags mailboxes"),
            ),
        }
    }
}

/// The account's mailboxes as a labels-mode session sees them.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    by_id: BTreeMap<String, Mailbox>,
}

impl Labels {
    pub fn new(boxes: Vec<Mailbox>) -> Labels {
        Labels {
            by_id: boxes.into_iter().map(|m| (m.id.clone(), m)).collect(),
        }
    }

    /// Reads the mailbox list.
    pub async fn read(client: &mut Client) -> Result<Labels> {
        let answers = client.call(vec![Call::MailboxGet]).await?;
        let list: GetResponse<MailboxObject> = nth(&answers, 0, "Mailbox/get")?;
        Ok(Labels::new(convert::mailboxes(&list.list)))
    }

    /// The tags of an email in mailboxes `ids`: the paths of those without a role, sorted.
    pub fn tags_of<'a>(&self, ids: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        let mut tags: Vec<String> = ids
            .into_iter()
            .filter_map(|id| self.by_id.get(id))
            .filter(|m| m.role.is_none())
            .map(|m| m.path.clone())
            .collect();
        tags.sort();
        tags
    }

    /// The mailbox at `path`: exactly, else the one path equal to it but for case (tags
    /// compare case-blind).
    fn find(&self, path: &str) -> Option<&Mailbox> {
        let exact = self.by_id.values().find(|m| m.path == path);
        exact.or_else(|| {
            let mut same = self
                .by_id
                .values()
                .filter(|m| m.path.eq_ignore_ascii_case(path));
            same.next().filter(|_| same.next().is_none())
        })
    }

    /// The mailbox tag `tag` names, if there is one. A mailbox with a role is never a tag.
    pub fn id_of(&self, tag: &str) -> Result<Option<&str>> {
        match self.find(tag) {
            Some(m) if m.role.is_some() => Err(Error::validation(format!(
                "tag {tag:?} is the account's {} mailbox, not a label",
                m.path
            ))
            .with_next_step("use move_to (or --to) to change where a message is")),
            Some(m) => Ok(Some(m.id.as_str())),
            None => Ok(None),
        }
    }

    /// The archive mailbox's id, where an email left in no mailbox goes.
    pub fn archive(&self) -> Option<&str> {
        self.by_id
            .values()
            .find(|m| m.role == Some(mailbroker_core::Role::Archive))
            .map(|m| m.id.as_str())
    }

    pub fn get(&self, id: &str) -> Option<&Mailbox> {
        self.by_id.get(id)
    }

    /// Every mailbox, by id.
    pub fn boxes(&self) -> &BTreeMap<String, Mailbox> {
        &self.by_id
    }

    /// Creates the mailboxes of `tags` that do not exist yet (their missing parents too),
    /// in one `Mailbox/set`, and learns their ids.
    pub async fn create_missing(&mut self, client: &mut Client, tags: &[String]) -> Result<()> {
        let mut create = BTreeMap::new();
        let mut made: Vec<String> = Vec::new();
        for tag in tags {
            if self.id_of(tag)?.is_some() {
                continue;
            }
            // Each missing mailbox along the path, its parent by id or by creation id.
            let mut parent: Option<(String, String)> = None;
            for name in path::split_path(tag) {
                let at = path::child_path(parent.as_ref().map(|p| p.0.as_str()), &name);
                let id = match self.find(&at) {
                    Some(m) => m.id.clone(),
                    None => {
                        if !made.contains(&at) {
                            made.push(at.clone());
                            let parent_id = parent.as_ref().map(|p| p.1.clone());
                            let key = creation_id(&made, &at);
                            create.insert(key, NewMailbox { name, parent_id });
                        }
                        format!("#{}", creation_id(&made, &at))
                    }
                };
                parent = Some((at, id));
            }
        }
        if create.is_empty() {
            return Ok(());
        }
        let answers = client.call(vec![Call::MailboxSet { create }]).await?;
        let set: SetResponse = nth(&answers, 0, "Mailbox/set")?;
        if !set.not_created.is_empty() {
            let why: Vec<String> = set
                .not_created
                .values()
                .map(|r| {
                    format!(
                        "{} {}",
                        r.kind,
                        r.description.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            return Err(Error::provider_write_failed(format!(
                "jmap Mailbox/set refused a label mailbox: {}",
                why.join("; ")
            ))
            .with_next_step("create the label in your mail client, then try again"));
        }
        // Re-read rather than piece paths together: the server's names are what count.
        *self = Labels::read(client).await?;
        Ok(())
    }

    /// The mailbox ids of an email after `add` and `remove` (tags) from `now`, and the
    /// archive mailbox added when nothing else would be left.
    pub fn after(&self, now: &HashSet<String>, add: &[String], remove: &[String]) -> Patch {
        let ids = |tags: &[String]| -> Vec<String> {
            tags.iter()
                .filter_map(|t| self.id_of(t).ok().flatten().map(str::to_string))
                .collect()
        };
        let (add, remove) = (ids(add), ids(remove));
        let left = now
            .iter()
            .filter(|m| !remove.contains(m))
            .chain(add.iter())
            .count();
        let archive = (left == 0)
            .then(|| self.archive().map(str::to_string))
            .flatten();
        Patch {
            add: add.into_iter().chain(archive).collect(),
            remove,
        }
    }
}

/// Mailbox memberships to add and to remove.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Patch {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// A creation id that sorts in creation order, so a parent is created before its child
/// however the server orders the `create` map.
fn creation_id(made: &[String], at: &str) -> String {
    let n = made.iter().position(|m| m == at).unwrap_or(made.len());
    format!("label{n:04}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbroker_core::Role;

    fn labels() -> Labels {
        let m = |id: &str, path: &str, role| Mailbox {
            id: id.into(),
            path: path.into(),
            role,
        };
        Labels::new(vec![
            m("in", "Inbox", Some(Role::Inbox)),
            m("ar", "Archive", Some(Role::Archive)),
            m("w", "Work", None),
            m("wc", "Work/Clients", None),
        ])
    }

    #[test]
    fn tags_are_the_mailboxes_without_a_role() {
        let l = labels();
        let ids: Vec<String> = ["in", "wc", "w"].map(String::from).to_vec();
        assert_eq!(l.tags_of(&ids), ["Work", "Work/Clients"]);
        assert_eq!(l.id_of("work/clients").unwrap(), Some("wc"));
        assert_eq!(l.id_of("Play").unwrap(), None);
        let e = l.id_of("inbox").unwrap_err();
        assert_eq!(e.error_type(), "validation_error");
    }

    #[test]
    fn an_email_left_in_no_mailbox_goes_to_the_archive() {
        let l = labels();
        let now: HashSet<String> = ["w".to_string()].into();
        let p = l.after(&now, &[], &["Work".into()]);
        assert_eq!(p.remove, ["w"]);
        assert_eq!(p.add, ["ar"]);
        let now: HashSet<String> = ["w".to_string(), "in".to_string()].into();
        assert!(l.after(&now, &[], &["Work".into()]).add.is_empty());
    }
}
