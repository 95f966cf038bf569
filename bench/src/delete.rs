//! `bench delete --messages N`: runs a staged deletion of N messages in trash mode and of N
//! more in permanent mode through the 20 ms round-trip proxy, against the per-message path
//! (one `UID MOVE` per message) through the same proxy.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use mailbroker_testkit::{Dovecot, ImapClient, Proxy, message};

pub async fn bench_delete(n: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let server = Dovecot::start()?;
    let senders = [
        "trash@bench.example",
        "perm@bench.example",
        "loop@bench.example",
    ];
    let loop_n = 200.min(n);
    let seed = senders
        .iter()
        .flat_map(|s| (0..n).map(move |i| (s, i)))
        .filter(|(s, i)| *s != &"loop@bench.example" || *i < loop_n)
        .map(|(s, i)| message(i, s, &format!("Bulk {i}"), "bulk mail"));
    server.import_messages("bd", seed)?;
    let proxy = Proxy::start(server.imap_port, super::ONE_WAY)?;
    let home = tempfile::tempdir()?;
    super::add_and_sync(&bin, home.path(), "bd", proxy.port)?;
    // Permanent runs with --yes go unattended only where a person allowed it, at a terminal.
    let home_arg = home.path().display().to_string();
    let allowed = mailbroker_testkit::terminal::run(
        &bin,
        &[
            "--home",
            &home_arg,
            "account",
            "set",
            "bd",
            "--unattended-deletions",
        ],
        &[],
        "allow\n",
    )?;
    if allowed.code != 0 {
        bail!("account set --unattended-deletions: {}", allowed.shown);
    }

    let mut rows = Vec::new();
    for (mode, sender) in [("trash", senders[0]), ("permanent", senders[1])] {
        let query = format!("from:{sender}");
        let mut stage = vec!["stage-delete", query.as_str()];
        if mode == "permanent" {
            stage.insert(1, "--permanent");
        }
        let staged = super::run_mailbroker(&bin, home.path(), &stage)?;
        let id = staged.json["manifest"]["id"]
            .as_i64()
            .context("manifest id")?
            .to_string();
        let run = super::run_mailbroker(&bin, home.path(), &["delete-staged", &id, "--yes"])?;
        if run.json["counts"]["done"].as_u64() != Some(n as u64) {
            bail!("{mode}: not all done: {}", run.json);
        }
        rows.push((mode, run.wall, run.json["commands"].clone()));
    }

    let mut client = ImapClient::connect_port(proxy.port, "bd").await?;
    let mailbox = client.select("INBOX").await?;
    let first = mailbox.exists.saturating_sub(loop_n as u32) + 1;
    let uids: Vec<u32> = client.uids_from(first).await?;
    let start = Instant::now();
    client.move_each(&uids, "Trash").await?;
    let loop_time = start.elapsed();
    client.logout().await?;
    let scaled = loop_time.as_secs_f64() * n as f64 / uids.len() as f64;

    println!(
        "staged deletion of {n} messages through a {} ms round-trip proxy",
        2 * super::ONE_WAY.as_millis()
    );
    for (mode, wall, commands) in &rows {
        println!(
            "{mode}: {:.2} s wall (whole process), {commands} IMAP commands, {:.0}x faster than the per-message loop",
            wall.as_secs_f64(),
            scaled / wall.as_secs_f64()
        );
    }
    println!(
        "per-message UID MOVE loop: {:.2} s for {}, scaled to {n}: {scaled:.1} s",
        loop_time.as_secs_f64(),
        uids.len()
    );
    Ok(())
}
