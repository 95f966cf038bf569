//! MCP's Tasks extension (`io.modelcontextprotocol/tasks`): a write over many messages, or a
//! sync, asked by a client that declared the extension, is handed back as a task instead of
//! holding the request open. `tasks/get` says how much is done (messages, and which journal
//! change records them; accounts, for a sync), then gives the tool's result; `tasks/cancel`
//! stops a write before its next batch, so what was sent is journaled as it came back and
//! the rest as not sent. Tasks live in this process, for an hour.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, MetaObject, Task,
    TaskPayload, TaskStatus,
};

use super::views::ChangeOut;
use super::{failure, success};
use crate::change::{Follow, Running};
use crate::output::rfc3339;
use mailbroker_core::{Error, Result};

/// A write planning more messages than this is a task, for a client that takes them.
pub const TASK_ABOVE: u64 = 500;
/// How long a task is kept after it started.
const KEEP_SECS: i64 = 3600;
/// How often a client is asked to poll.
const POLL_MS: u64 = 500;

/// The tool's result, once the work behind a task ends.
type Outcome = tokio::task::JoinHandle<JsonObject>;

enum State {
    Running(Outcome),
    /// Ended; its report is being read.
    Ending,
    /// The tool's result, as the call would have answered it.
    Done(JsonObject),
}

struct Entry {
    follow: Follow,
    /// What its progress counts: `message(s)`, `account(s)`.
    unit: &'static str,
    created_at: i64,
    state: State,
}

/// The tasks this server runs.
#[derive(Clone, Default)]
pub struct Tasks(Arc<Mutex<HashMap<String, Entry>>>);

fn now() -> i64 {
    crate::store::now_secs()
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps a write running detached as a new task: the handle the client polls.
    pub fn start_change(&self, running: Running) -> Result<CallToolResponse> {
        let done = tokio::spawn(async move {
            match running.done.await {
                Ok(Ok(report)) => object(success(&ChangeOut::of(&report))),
                Ok(Err(e)) => object(failure(&e)),
                Err(e) => object(failure(&Error::internal(format!("the task: {e}")))),
            }
        });
        self.start(running.follow, "message(s)", done)
    }

    /// Keeps work that answers `done` as a new task, its progress counted in `unit`.
    pub fn start(
        &self,
        follow: Follow,
        unit: &'static str,
        done: Outcome,
    ) -> Result<CallToolResponse> {
        let id = crate::util::random_hex(16)?;
        let at = now();
        let task = describe(&id, at, (&follow, unit), TaskStatus::Working);
        let mut tasks = self.lock();
        tasks.retain(|_, e| e.created_at > at - KEEP_SECS);
        tasks.insert(
            id,
            Entry {
                follow,
                unit,
                created_at: at,
                state: State::Running(done),
            },
        );
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// Where task `id` stands; its result once it has ended.
    pub async fn get(&self, id: &str) -> Result<GetTaskResult> {
        let finished = {
            let mut tasks = self.lock();
            let entry = tasks.get_mut(id).ok_or_else(|| unknown(id))?;
            match &entry.state {
                State::Running(done) if done.is_finished() => {
                    match std::mem::replace(&mut entry.state, State::Ending) {
                        State::Running(done) => Some(done),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        if let Some(done) = finished {
            let result = (done.await)
                .unwrap_or_else(|e| object(failure(&Error::internal(format!("the task: {e}")))));
            if let Some(entry) = self.lock().get_mut(id) {
                entry.state = State::Done(result);
            }
        }
        let tasks = self.lock();
        let entry = tasks.get(id).ok_or_else(|| unknown(id))?;
        let payload = match &entry.state {
            State::Running(_) | State::Ending => TaskPayload::Working,
            State::Done(_) if entry.follow.stopping() => TaskPayload::Cancelled,
            State::Done(result) => TaskPayload::Completed {
                result: result.clone(),
            },
        };
        let task = describe(
            id,
            entry.created_at,
            (&entry.follow, entry.unit),
            payload.status(),
        );
        let mut answer = GetTaskResult::new(DetailedTask::new(task, payload));
        answer.meta = Some(progress(&entry.follow));
        Ok(answer)
    }

    /// Asks task `id` to stop before its next batch.
    pub fn cancel(&self, id: &str) -> Result<()> {
        let tasks = self.lock();
        let entry = tasks.get(id).ok_or_else(|| unknown(id))?;
        entry.follow.stop();
        Ok(())
    }
}

fn unknown(id: &str) -> Error {
    Error::not_found(format!(
        "no task {id:?} on this server (tasks are kept an hour)"
    ))
    .with_next_step("see the journal for the change: list_changes")
}

/// A tool's result as the task's `completed` payload carries it.
pub fn object(result: rmcp::model::CallToolResult) -> JsonObject {
    serde_json::to_value(result)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

/// The task's words: how far it got and which change records it.
fn describe(
    id: &str,
    created_at: i64,
    (follow, unit): (&Follow, &str),
    status: TaskStatus,
) -> Task {
    let change = (follow.change_id()).map_or(String::new(), |c| {
        format!("; change {c} records each message")
    });
    let words = format!(
        "{} of {} {unit} done{change}",
        follow.settled(),
        follow.planned()
    );
    let mut task = Task::new(id, status, rfc3339(created_at), rfc3339(now()))
        .with_status_message(words)
        .with_ttl_ms((KEEP_SECS * 1000) as u64)
        .with_poll_interval_ms(POLL_MS);
    task.status = status;
    task
}

/// The same, for a program: `mailbroker/settled`, `mailbroker/planned`,
/// `mailbroker/change_id`.
fn progress(follow: &Follow) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert("mailbroker/settled".into(), follow.settled().into());
    meta.insert("mailbroker/planned".into(), follow.planned().into());
    if let Some(change) = follow.change_id() {
        meta.insert("mailbroker/change_id".into(), change.into());
    }
    MetaObject(meta)
}
