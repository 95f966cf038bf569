//! An account's mailboxes as one request reads them, once: where a move goes (a name or a
//! role), the cursor each was last synced at, and the provider's folder ids.

use std::collections::BTreeMap;

use mailbroker_core::{AccountId, Error, MailboxCursor, Role};

use super::{Store, db_error};

/// One mailbox of an account, as a write needs it.
#[derive(Debug, Clone)]
struct Mailbox {
    name: String,
    role: Option<Role>,
    selectable: bool,
    remote_id: Option<String>,
    cursor: MailboxCursor,
}

/// An account's mailboxes, read once for a request (`Store::mailboxes_of`).
#[derive(Debug, Clone)]
pub struct Mailboxes {
    account: AccountId,
    rows: Vec<Mailbox>,
}

impl Mailboxes {
    /// The mailbox a move target names, with its role: the selectable mailbox holding the
    /// role `name` (`junk`, `trash`, …), else the one named exactly `name`. A role wins over
    /// a folder that merely carries its name, so `--move-to junk` always means the junk role,
    /// and asks for confirmation as a move to junk does.
    pub fn resolve(&self, name: &str) -> Result<(String, Option<Role>), Error> {
        let selectable = || self.rows.iter().filter(|m| m.selectable);
        let by_role = selectable().find(|m| {
            m.role
                .is_some_and(|r| r.as_str().eq_ignore_ascii_case(name))
        });
        let found = by_role.or_else(|| selectable().find(|m| m.name == name));
        let account = &self.account;
        let found = found.ok_or_else(|| {
            Error::not_found(format!("account {account} has no mailbox or role {name:?}"))
                .with_next_step(format!("run: mailbroker account show {account}"))
        })?;
        Ok((found.name.clone(), found.role))
    }

    /// Where the last sync of mailbox `name` stopped (empty when it never completed).
    pub fn cursor(&self, name: &str) -> MailboxCursor {
        self.rows
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.cursor.clone())
            .unwrap_or_default()
    }

    /// The provider's ids of the mailboxes among `names` that have one.
    pub fn folder_ids(&self, names: &[&str]) -> BTreeMap<String, String> {
        self.rows
            .iter()
            .filter(|m| names.contains(&m.name.as_str()))
            .filter_map(|m| Some((m.name.clone(), m.remote_id.clone()?)))
            .collect()
    }
}

impl Store {
    /// The account's mailboxes, in one read.
    pub async fn mailboxes_of(&self, account: &AccountId) -> Result<Mailboxes, Error> {
        type Row = (String, Option<String>, i64, Option<String>, String);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT name, role, selectable, remote_id, cursor FROM mailboxes
              WHERE account_id = $1 ORDER BY name",
        )
        .bind(account.as_str())
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        self.read_mailboxes();
        let rows = rows
            .into_iter()
            .map(|(name, role, selectable, remote_id, cursor)| Mailbox {
                name,
                role: role.as_deref().and_then(Role::parse),
                selectable: selectable != 0,
                remote_id,
                cursor: MailboxCursor::new(cursor),
            })
            .collect();
        Ok(Mailboxes {
            account: account.clone(),
            rows,
        })
    }
}
