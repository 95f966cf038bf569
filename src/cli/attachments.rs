//! `mailbroker attachments ID`: a message's attachments listed, or saved as files with
//! `--to DIR` (safe names, never over a file, 0600; `mailbroker_engine::attachments`).

use clap::Args;
use mailbroker_core::{Error, Result};

use crate::attachments::{self, SaveRequest};
use crate::output::{self, print_json};
use crate::store::Store;

#[derive(Debug, Args)]
pub struct AttachmentsArgs {
    /// The message (an id as `search` prints it).
    id: i64,
    /// Only this part (as listed: 2, 1.2).
    #[arg(long)]
    part: Option<String>,
    /// Save into this directory (it must exist); without it, the attachments are listed.
    #[arg(long, value_name = "DIR")]
    to: Option<std::path::PathBuf>,
    /// The largest attachment to save, in bytes.
    #[arg(long, default_value_t = attachments::DEFAULT_MAX_BYTES)]
    max_bytes: u64,
}

/// One attachment as a person reads it: `2: bill.pdf (application/pdf, 1234 bytes)`; the
/// name, a stranger's text, on one line.
pub(super) fn line(a: &attachments::Attachment) -> String {
    format!(
        "{}: {} ({}, {} bytes)",
        a.part,
        output::one_line(a.name.as_deref().unwrap_or("(unnamed)")),
        output::one_line(&a.content_type),
        a.size
    )
}

pub(super) async fn run(store: &Store, args: &AttachmentsArgs, json: bool) -> Result<()> {
    let owner = crate::scope::Scope::Owner;
    let Some(dir) = &args.to else {
        let read = crate::read::read_messages(store, &[args.id], &owner).await?;
        let read = read.into_iter().next();
        let (_, text) = read
            .ok_or_else(|| Error::not_found("no such message"))?
            .result?;
        let listed: Vec<_> = (text.attachments.into_iter())
            .filter(|a| args.part.as_ref().is_none_or(|p| *p == a.part))
            .collect();
        if json {
            return print_json(Some("attachments"), &listed);
        }
        if listed.is_empty() {
            crate::say!("message {} has no attachments", args.id);
        }
        for a in &listed {
            println!("{}", line(a));
        }
        return Ok(());
    };
    let request = SaveRequest {
        id: args.id,
        part: args.part.as_deref(),
        dir,
        max_bytes: args.max_bytes,
    };
    let saved = attachments::save_from(store, request, &owner).await?;
    if json {
        return print_json(Some("saved"), &saved);
    }
    for s in &saved {
        println!("{}\t{}", s.part, s.path.display());
    }
    Ok(())
}
