//! The write tools' side of `change::request`: how an MCP client's person confirms
//! (`ByClient`: a confirm token, elicitation or an input-required round, `confirm.rs`), and
//! how each outcome is answered.

use async_trait::async_trait;
use rmcp::model::{CallToolResponse, InputResponses};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, model::CallToolResult};

use super::confirm::{self, Asked};
use super::views::{ChangeOut, SummaryOut, describe};
use super::{McpServer, success};
use crate::change::{
    self, Asking, ChangeRequest, Confirmation, Confirmed, Operation, Outcome, Preview,
};
use crate::listing::Chosen;
use mailbroker_core::{Error, Result};

/// A write tool's call as the change service needs it besides the operation: the tool, its
/// arguments (which a confirmation is bound to), a dry run, a confirm token, and the input
/// responses of a second round.
pub(super) struct ToolCall {
    pub tool: &'static str,
    pub args: serde_json::Value,
    pub dry_run: bool,
    pub token: Option<String>,
    pub round: (Option<String>, Option<InputResponses>),
    /// What it asks and how its messages were chosen, in words, for the sentence a person
    /// is asked (set from the operation).
    pub words: String,
    pub chosen: Option<Chosen>,
}

impl ToolCall {
    /// A call of `tool` with `args`; its confirmation is bound to those exact arguments.
    pub fn of(
        tool: &'static str,
        args: &impl serde::Serialize,
        dry_run: bool,
        token: Option<String>,
    ) -> Result<ToolCall> {
        Ok(ToolCall {
            tool,
            args: serde_json::to_value(args).map_err(|e| Error::internal(e.to_string()))?,
            dry_run,
            token,
            round: (None, None),
            words: String::new(),
            chosen: None,
        })
    }

    /// The same call, answering an input-required round (its state and responses).
    pub fn with(self, round: (Option<String>, Option<InputResponses>)) -> ToolCall {
        ToolCall { round, ..self }
    }
}

/// Confirmation through the MCP client: the person approves by the means the client has.
struct ByClient<'a> {
    server: &'a McpServer,
    ctx: &'a RequestContext<RoleServer>,
    call: &'a mut ToolCall,
}

#[async_trait]
impl Confirmation for ByClient<'_> {
    type Answer = CallToolResponse;

    async fn confirm(&mut self, asking: Asking<'_>) -> Result<Confirmed<CallToolResponse>> {
        let call = &mut *self.call;
        let binding = confirm::binding(call.tool, &call.args, asking.ids);
        let (reason, summary) = self
            .server
            .described(asking.reason, asking.ids, call.chosen.as_ref())
            .await?;
        let plan = match asking.preview {
            Preview::Change(report) => ChangeOut::of(report).plan,
            _ => Vec::new(),
        };
        let waiting = Waiting {
            reason: &reason,
            plan: &plan,
            summary: summary.as_ref(),
            ids: asking.ids,
        };
        let description = self.server.waiting(self.ctx, call, waiting).await?;
        let request = confirm::Request {
            binding: &binding,
            reason: &reason,
            description,
        };
        let (state, responses) = std::mem::take(&mut call.round);
        let asked = confirm::confirm(
            self.ctx,
            &self.server.confirmations,
            request,
            call.token.as_deref(),
            (state.as_deref(), responses.as_ref()),
        )
        .await
        .map_err(|e| match e.error_type() {
            // Say what was declined: the assistant tells the user why it asked.
            "confirmation_declined" => Error::confirmation_declined(format!(
                "the user did not confirm this write, which {}; nothing was changed",
                asking.reason
            ))
            .with_next_step(
                e.next_step()
                    .unwrap_or("ask the user what they want instead"),
            ),
            _ => e,
        })?;
        Ok(match asked {
            Asked::Confirmed => Confirmed::Yes,
            Asked::InputRequired(r) => Confirmed::Answer(r.into()),
        })
    }
}

impl McpServer {
    /// Runs a write tool's `operation` through the change service and answers the client.
    pub(super) async fn change(
        &self,
        ctx: &RequestContext<RoleServer>,
        operation: Operation,
        mut call: ToolCall,
    ) -> Result<CallToolResponse> {
        let cx = change::Context {
            home: &self.home,
            store: &self.store,
            work: &self.options.work,
        };
        call.words = change::words::operation_words(&operation);
        call.chosen = operation.chosen();
        let request = ChangeRequest {
            operation,
            dry_run: call.dry_run,
            origin: origin_of(ctx),
            confirm_above: self.options.confirm_above,
            budget: Some(change::Budget {
                messages: self.options.confirm_above,
                window_secs: self.options.confirm_window,
            }),
            // A client that takes tasks gets a large write as one, not a request held open.
            follow: match ctx
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
            {
                true => change::Follow::detached_above(super::tasks::TASK_ABOVE),
                false => change::Follow::default(),
            },
        };
        let mut by_client = ByClient {
            server: self,
            ctx,
            call: &mut call,
        };
        match change::request(&cx, request, &mut by_client).await? {
            Outcome::DryRun {
                preview,
                reason,
                ids,
            } => Ok(self
                .dry_run(ctx, &call, preview, reason, &ids)
                .await?
                .into()),
            Outcome::Answered(answer) => Ok(answer),
            Outcome::Staged(manifest) => {
                let count = manifest.summary.count;
                let mut out = ChangeOut::staged(count, manifest.mode.as_str(), false);
                out.manifest_id = Some(manifest.id);
                out.summary = Some(SummaryOut::of(manifest.summary, None));
                out.next_step = Some(format!(
                    "ask the user to run: mailbroker delete-staged {}",
                    manifest.id
                ));
                Ok(success(&out).into())
            }
            Outcome::Done(report) | Outcome::Ran { report, .. } => {
                Ok(success(&ChangeOut::of(&report)).into())
            }
            Outcome::Running(running) => self.tasks.start_change(running),
        }
    }

    /// A dry run's answer: the plan, and where the change needs the person's yes, why, the
    /// messages' summary and a confirm token for a client that cannot ask.
    async fn dry_run(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: &ToolCall,
        preview: Preview,
        reason: Option<String>,
        ids: &[i64],
    ) -> Result<CallToolResult> {
        let mut dry = match &preview {
            Preview::Change(report) => ChangeOut::of(report),
            Preview::Staged { count, mode } => ChangeOut::staged(*count, mode.as_str(), true),
            // `ByClient` runs no staged deletion: `change::request` refuses it first.
            Preview::Run { .. } => {
                return Err(Error::internal(
                    "a staged deletion's run reached an MCP tool",
                ));
            }
        };
        if let Some(action) = reason {
            let (reason, summary) = self.described(&action, ids, call.chosen.as_ref()).await?;
            if let Some(summary) = summary {
                dry.summary.get_or_insert(summary);
            }
            let waiting = Waiting {
                reason: &reason,
                plan: &dry.plan,
                summary: dry.summary.as_ref(),
                ids,
            };
            let description = self.waiting(ctx, call, waiting).await?;
            let binding = confirm::binding(call.tool, &call.args, ids);
            let token = self.confirmations.issue(&binding, &description).await?;
            dry.next_step = Some(self.confirmations.token_step(&token));
            dry.confirm_token = Some(token);
            dry.confirmation_required = Some(reason);
        } else if dry.planned > 0 {
            // The same sentence a confirmation shows, so the plan reads in words as well.
            let action = format!("{} ({} message(s) to change)", call.words, dry.planned);
            dry.summary = self.described(&action, ids, call.chosen.as_ref()).await?.1;
        }
        Ok(success(&dry))
    }

    /// What the person is shown and asked, in their terms: the action, the messages (how
    /// many, from whom, when) and how they were chosen; with the messages' summary.
    async fn described(
        &self,
        action: &str,
        ids: &[i64],
        chosen: Option<&Chosen>,
    ) -> Result<(String, Option<SummaryOut>)> {
        if ids.is_empty() {
            return Ok((action.to_string(), None));
        }
        let summary = self.listing().summary(ids).await?;
        let text = describe(action, &summary, chosen);
        Ok((text.clone(), Some(SummaryOut::of(summary, Some(text)))))
    }
}

/// What a person is shown of a write that waits for them.
struct Waiting<'a> {
    reason: &'a str,
    plan: &'a [String],
    summary: Option<&'a SummaryOut>,
    ids: &'a [i64],
}

/// How many of a waiting write's messages the console shows.
const SAMPLE: usize = 10;

impl McpServer {
    /// What the console shows of a write waiting for the person: the tool, the sentence, the
    /// plan, the messages' summary and a sample of them, and which client and session asked.
    async fn waiting(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: &ToolCall,
        w: Waiting<'_>,
    ) -> Result<serde_json::Value> {
        let sample: Vec<serde_json::Value> = (self.listing().sample(w.ids, SAMPLE).await?)
            .into_iter()
            .map(|m| {
                serde_json::json!({
                    "subject": m.subject, "from": m.from, "date": m.date,
                    "mailbox": format!("{}/{}", m.place.account, m.place.mailbox),
                })
            })
            .collect();
        let client = ctx
            .client_info()
            .map(|i| format!("{} {}", i.name, i.version));
        Ok(serde_json::json!({
            "tool": call.tool, "reason": w.reason, "plan": w.plan, "summary": w.summary,
            "sample": sample, "client": client, "session": session_of(ctx),
        }))
    }
}

/// The MCP session a call came in, as far as the person needs to tell sessions apart: the
/// start of its id over HTTP, `stdio` otherwise.
fn session_of(ctx: &RequestContext<RoleServer>) -> String {
    let parts = ctx.extensions.get::<axum::http::request::Parts>();
    match parts.and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok()) {
        Some(id) => id.chars().take(8).collect(),
        None if parts.is_some() => "none (each request stands alone)".to_string(),
        None => "stdio".to_string(),
    }
}

/// `mcp:<client name>`, as the journal records where a change came from.
pub(super) fn origin_of(ctx: &RequestContext<RoleServer>) -> String {
    let name = ctx
        .client_info()
        .map(|i| i.name)
        .unwrap_or_else(|| "unknown".into());
    format!("mcp:{name}")
}
