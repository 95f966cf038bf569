//! `mailbroker draft`: a reply (or a new message) saved in the account's Drafts, for the
//! person to edit and send from their own mail client. mailbroker never sends it.

use std::io::Read;

use clap::Args;
use mailbroker_core::{AccountId, Error, MAX_DRAFT_BODY, Result};

use super::update::{change, print_outcome};
use crate::change::Operation;
use crate::change::draft::DraftRequest;
use crate::home::Home;
use crate::store::Store;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("body").required(true).args(["body_file", "body_stdin"])))]
pub struct DraftArgs {
    /// The message to reply to (an id as `search` prints it).
    #[arg(long, value_name = "ID", conflicts_with = "account")]
    reply_to: Option<i64>,
    /// Reply to all: the original's other recipients go in Cc.
    #[arg(long, requires = "reply_to")]
    all: bool,
    /// The account of a new message.
    #[arg(long, value_name = "ID")]
    account: Option<AccountId>,
    /// A recipient (repeat for more); a reply's are its sender's.
    #[arg(long, value_name = "ADDRESS")]
    to: Vec<String>,
    #[arg(long, value_name = "ADDRESS")]
    cc: Vec<String>,
    /// The subject; a reply's is "Re: " and the original's.
    #[arg(long)]
    subject: Option<String>,
    /// Read the body (plain text, UTF-8) from this file.
    #[arg(long, value_name = "FILE")]
    body_file: Option<std::path::PathBuf>,
    /// Read the body from standard input.
    #[arg(long)]
    body_stdin: bool,
    /// Quote the original below the body.
    #[arg(long, requires = "reply_to")]
    quote: bool,
    /// Show the draft and save nothing.
    #[arg(long)]
    dry_run: bool,
}

fn body(args: &DraftArgs) -> Result<String> {
    let mut bytes = Vec::new();
    let limit = MAX_DRAFT_BODY as u64 + 1;
    let read = match &args.body_file {
        Some(path) => std::fs::File::open(path)
            .and_then(|f| f.take(limit).read_to_end(&mut bytes))
            .map_err(|e| {
                Error::validation(format!("cannot read {}: {e}", path.display()))
                    .with_next_step("give a readable file to --body-file")
            }),
        None => (std::io::stdin().take(limit).read_to_end(&mut bytes))
            .map_err(|e| Error::validation(format!("cannot read standard input: {e}"))),
    };
    read?;
    String::from_utf8(bytes).map_err(|_| {
        Error::validation("the body is not UTF-8 text").with_next_step("save the body as UTF-8")
    })
}

pub(super) async fn draft(home: &Home, store: &Store, args: &DraftArgs, json: bool) -> Result<u8> {
    if args.reply_to.is_none() && args.to.is_empty() {
        return Err(
            Error::validation("a draft needs --reply-to ID or --to ADDRESS")
                .with_next_step("reply: mailbroker draft --reply-to ID --body-file F"),
        );
    }
    let request = DraftRequest {
        account: args.account.clone(),
        reply_to: args.reply_to,
        all: args.all,
        to: args.to.clone(),
        cc: args.cc.clone(),
        subject: args.subject.clone(),
        body: body(args)?,
        quote: args.quote,
    };
    let operation = Operation::Draft {
        request,
        scope: crate::scope::Scope::Owner,
    };
    let outcome = change(home, store, operation, (args.dry_run, true)).await?;
    print_outcome(store, outcome, json).await
}
