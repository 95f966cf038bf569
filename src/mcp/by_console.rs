//! Confirmation in the person's console (URL-mode elicitation, MCP 2025-11-25 and later): a
//! write that needs the person's yes is recorded as waiting, the client is given the
//! console's page for it to open, and the call goes on only once the person's passkey
//! approved it there.
//!
//! Security Invariant: the page's address names the waiting write by a digest of its token,
//! never the token, so the client can neither approve with it (`mailbroker approve`) nor
//! call with it; and the client's own answer to the elicitation only ever declines. Nothing
//! runs until the index records the person's approval, which is then used once.

use rmcp::RoleServer;
use rmcp::model::ElicitationAction;
use rmcp::service::{ElicitationError, RequestContext};

use super::confirm::{Asked, ConfirmWrite, Confirmations, Request, declined};
use crate::store::{Approval, Decision, Needed};
use mailbroker_core::{Error, Result};

/// How often a call waiting on the person's decision looks for it.
const POLL: std::time::Duration = std::time::Duration::from_millis(250);

impl Confirmations {
    /// Records `request` as waiting for the person: its confirm token (never shown to the
    /// client) and its console page (`Approval::page_of` the token).
    pub(super) async fn wait_in_console(&self, request: &Request<'_>) -> Result<(String, String)> {
        let token = self.issue(request.binding, &request.description).await?;
        let page = Approval::page_of(&token);
        Ok((token, page))
    }

    /// Asks a client of protocol 2025-11-25 to open the console's page, then waits for the
    /// person's decision there.
    pub(super) async fn by_console_page(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: &Request<'_>,
    ) -> Result<Asked> {
        let (_, page) = self.wait_in_console(request).await?;
        let url = url::Url::parse(&self.page_url(&page))
            .map_err(|e| Error::internal(format!("the console's address: {e}")))?;
        let message = super::confirm::console_message(request.reason);
        let accepted = match ctx.peer.elicit_url(message, url, page.clone()).await {
            Ok(action) => action == ElicitationAction::Accept,
            Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => false,
            Err(e) => {
                return Err(Error::confirmation_required(format!(
                    "could not show the user the console's page for this write: {e}; nothing was changed"
                ))
                .with_next_step(format!(
                    "call again with dry_run: true and ask the user to approve it in the console, {}",
                    self.page_url(&page)
                )));
            }
        };
        self.decided_in_console(&page, request.binding, accepted, ctx)
            .await
    }

    /// The person's decision on the write waiting at `page`, waited for while the client
    /// keeps the call open. A client that did not open the page (`accepted` false) declines
    /// it: the console then stops offering it.
    pub(super) async fn decided_in_console(
        &self,
        page: &str,
        binding: &str,
        accepted: bool,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Asked> {
        let token = self.store.approval_at_page(page).await?.token;
        if !accepted {
            // Already decided or gone: the person's answer stands, and this write is off.
            let _ = self.store.decline(&token).await;
            return Err(declined());
        }
        // The person's yes is what this route waits for, even where a token alone would do
        // (`--confirm-with-token`).
        let needed = match self.needed() {
            Needed::Token => Needed::Person,
            needed => needed,
        };
        self.decision(&token, binding, needed, ctx).await
    }

    /// Waits, while the client keeps the call open, until the write of `token` is decided
    /// (or expires), and takes it if it was approved as `needed`.
    async fn decision(
        &self,
        token: &str,
        binding: &str,
        needed: Needed,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Asked> {
        loop {
            let waiting = self.store.approval(token).await?;
            if waiting.decision() != Decision::Waiting {
                // Approved, declined, used or expired: the token's own checks say which.
                self.store.redeem_approval(token, binding, needed).await?;
                return Ok(Asked::Confirmed);
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = ctx.ct.cancelled() => {
                    return Err(Error::confirmation_required(
                        "the call was cancelled before the user decided; nothing was changed",
                    )
                    .with_next_step("call again, and let the user decide"));
                }
            }
        }
    }

    /// The client's form was answered (`yes` or not) for the write also waiting at `page`:
    /// a no, there or in the console, is the answer; a yes takes the write once.
    pub(super) async fn answered_in_form(
        &self,
        page: &str,
        binding: &str,
        yes: bool,
    ) -> Result<Asked> {
        let token = self.store.approval_at_page(page).await?.token;
        if !yes {
            let _ = self.store.decline(&token).await;
            return Err(declined());
        }
        self.store
            .redeem_approval(&token, binding, Needed::Token)
            .await?;
        Ok(Asked::Confirmed)
    }

    /// Asks a client of protocol 2025-11-25 by its form, while the same write waits in the
    /// console: whichever the person answers first decides.
    pub(super) async fn by_form_or_console(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: &Request<'_>,
    ) -> Result<Asked> {
        let (token, page) = self.wait_in_console(request).await?;
        let message = super::confirm::form_message(request.reason);
        tokio::select! {
            answer = ctx.peer.elicit::<ConfirmWrite>(message) => {
                let yes = match answer {
                    Ok(answer) => answer.is_some_and(|a| a.confirm),
                    Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => false,
                    Err(e) => {
                        let _ = self.store.decline(&token).await;
                        return Err(Error::confirmation_required(format!(
                            "could not ask the user to confirm: {e}; nothing was changed"
                        ))
                        .with_next_step(
                            "call again with dry_run: true and use the confirm_token it returns",
                        ));
                    }
                };
                self.answered_in_form(&page, request.binding, yes).await
            }
            decided = self.decision(&token, request.binding, Needed::Person, ctx) => decided,
        }
    }
}
