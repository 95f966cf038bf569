//! A Gmail account's server-side rules as filters (`users.settings.filters`). A filter has
//! no update: a changed rule is its old filter deleted and its new one made, in one change.
//! Writing needs `gmail.settings.basic`, which an account has only once a person turned rules
//! on (`account upgrade-scope ID --rules`); without it nothing is sent. Each filter made is
//! read back; what was deleted and made is returned for an undo.

use google_gmail1::api as gmail;
use mailbroker_core::{Error, Result, Rule, RulesBefore, ServerRule};
use serde::{Deserialize, Serialize};

use crate::filters::{self, MAX_FILTERS, essence};
use crate::oauth::SCOPE_SETTINGS;
use crate::{GmailProvider, api};

/// What a change of filters did, so that it can be undone: the filters it deleted and those
/// it made, whole. A filter made again by an undo has a new id, so one is found again by
/// what it is.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Before {
    deleted: Vec<gmail::Filter>,
    created: Vec<gmail::Filter>,
}

fn encode(before: &Before) -> Result<RulesBefore> {
    serde_json::to_string(before)
        .map(RulesBefore)
        .map_err(|e| Error::internal(e.to_string()))
}

impl GmailProvider {
    async fn may_write_filters(&self) -> Result<()> {
        if self
            .client
            .scopes()
            .await
            .iter()
            .any(|s| s == SCOPE_SETTINGS)
        {
            return Ok(());
        }
        Err(Error::insufficient_scope(
            "the account's grant does not let mailbroker keep Gmail filters (gmail.settings.basic)",
        )
        .with_next_step(format!(
            "turn rules on for the account: mailbroker account upgrade-scope {} --rules",
            self.account
        )))
    }

    /// `rule`'s filter with its tags' label ids (the account's labels read again for one it
    /// does not know), each label made first if Gmail lacks it (`make`), else left as the
    /// text the plan shows.
    async fn filter_of(&mut self, rule: &Rule, make: bool) -> Result<gmail::Filter> {
        for tag in &rule.then.add_tags {
            if self.cursor.label_id(tag).is_none() {
                let labels = api::labels(&self.client).await?;
                self.cursor.set_labels(&labels);
                if make && self.cursor.label_id(tag).is_none() {
                    let label = api::create_label(&self.client, tag).await?;
                    self.cursor.labels.insert(label.id, label.name);
                }
            }
        }
        filters::filter(rule, |tag| self.cursor.label_id(tag).map(str::to_string))
    }

    /// The filters on the server, each with the rule of mailbroker's it is, if any.
    async fn read(&mut self, ours: &[Rule]) -> Result<Vec<(gmail::Filter, Option<String>)>> {
        let mut mine = Vec::new();
        for rule in ours {
            mine.push((
                essence(&self.filter_of(rule, false).await?),
                rule.name.clone(),
            ));
        }
        let listed = api::filters(&self.client).await?;
        Ok((listed.into_iter())
            .map(|f| {
                let e = essence(&f);
                let name = mine.iter().find(|(m, _)| *m == e).map(|(_, n)| n.clone());
                (f, name)
            })
            .collect())
    }

    pub(crate) async fn filters(&mut self, ours: &[Rule]) -> Result<Vec<ServerRule>> {
        Ok((self.read(ours).await?.into_iter())
            .map(|(f, name)| ServerRule {
                ours: name.is_some(),
                name: name.unwrap_or_else(|| filters::describe(&f)),
                enabled: true,
                forwards: f.action.as_ref().is_some_and(|a| a.forward.is_some()),
            })
            .collect())
    }

    /// Makes a filter and reads it back.
    async fn make(&self, filter: &gmail::Filter) -> Result<gmail::Filter> {
        let made = api::create_filter(&self.client, filter).await?;
        let id = made.id.clone().unwrap_or_default();
        let kept = api::filter(&self.client, &id).await?;
        if essence(&kept) != essence(filter) {
            return Err(Error::provider_write_failed(format!(
                "Gmail keeps filter {id} otherwise than it was written"
            )));
        }
        Ok(kept)
    }

    pub(crate) async fn put_filters(
        &mut self,
        ours: &[Rule],
        rules: &[Rule],
    ) -> Result<RulesBefore> {
        self.may_write_filters().await?;
        let mut wanted = Vec::new();
        for rule in rules {
            wanted.push(self.filter_of(rule, true).await?);
        }
        let server = self.read(ours).await?;
        let stays = |f: &gmail::Filter| wanted.iter().any(|w| essence(w) == essence(f));
        let gone: Vec<&gmail::Filter> = (server.iter())
            .filter(|(f, name)| name.is_some() && !stays(f))
            .map(|(f, _)| f)
            .collect();
        let new: Vec<&gmail::Filter> = (wanted.iter())
            .filter(|w| !server.iter().any(|(f, _)| essence(f) == essence(w)))
            .collect();
        if let Some((_, None)) = (server.iter()).find(|(f, name)| name.is_none() && stays(f)) {
            return Err(Error::validation(
                "the account has this very filter already, as one of its own",
            )
            .with_next_step("see it with mailbroker rule list; there is nothing to add"));
        }
        let after = server.len() - gone.len() + new.len();
        if after > MAX_FILTERS {
            return Err(Error::validation(format!(
                "Gmail keeps at most {MAX_FILTERS} filters, and the account has {}",
                server.len()
            ))
            .with_next_step("remove filters the account no longer needs in Gmail's settings"));
        }
        // Made first, then the old ones deleted: a failure leaves the old rules working.
        let mut before = Before::default();
        for filter in new {
            match self.make(filter).await {
                Ok(made) => before.created.push(made),
                Err(e) => {
                    for made in &before.created {
                        let id = made.id.as_deref().unwrap_or_default();
                        let _ = api::delete_filter(&self.client, id).await;
                    }
                    return Err(e);
                }
            }
        }
        for filter in gone {
            api::delete_filter(&self.client, filter.id.as_deref().unwrap_or_default()).await?;
            before.deleted.push(filter.clone());
        }
        encode(&before)
    }

    pub(crate) async fn restore_filters(&mut self, before: &RulesBefore) -> Result<RulesBefore> {
        self.may_write_filters().await?;
        let before: Before = serde_json::from_str(&before.0)
            .map_err(|e| Error::internal(format!("a rule change's earlier state: {e}")))?;
        let mut now = Before::default();
        let server = api::filters(&self.client).await?;
        for made in &before.created {
            let found = (server.iter()).find(|f| f.id == made.id || essence(f) == essence(made));
            // Gone since (the person deleted it): nothing to take away.
            if let Some(filter) = found {
                api::delete_filter(&self.client, filter.id.as_deref().unwrap_or_default()).await?;
                now.deleted.push(filter.clone());
            }
        }
        for filter in &before.deleted {
            let again = gmail::Filter {
                id: None,
                ..filter.clone()
            };
            now.created.push(self.make(&again).await?);
        }
        encode(&now)
    }
}
