//! notmuch beside mailbroker on the same messages: the reference a person who searches a lot of
//! mail locally already uses. The messages of `bench search` are written once more as a Maildir
//! (the same bytes, the same flags), indexed by `notmuch new` and tagged as mailbroker sees them,
//! then every query shape runs as a whole process, the two programs alternating run by run.
//! notmuch is installed by `scripts/bench`, never by the tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Whole-process runs of each shape, per program.
const RUNS: usize = 100;

/// Each benchmark query as mailbroker takes it and as notmuch says the same. `larger:100K` is a
/// tag on the same messages there (notmuch indexes no size), `has:attachment` its own
/// `attachment` tag, and `in:inbox` the `inbox` tag every new message gets.
pub const SHAPES: [(&str, &str); 11] = [
    ("budget", "budget"),
    ("from:alice", "from:alice"),
    ("tag:Work", "tag:Work"),
    ("is:unread in:inbox", "tag:unread and tag:inbox"),
    (
        "after:2025-06-01 before:2025-07-01",
        "date:2025-06-01..2025-06-30",
    ),
    ("from:alice OR from:bob", "from:alice or from:bob"),
    (
        "newsletter -(from:shop OR tag:Work)",
        "newsletter and not (from:shop or tag:Work)",
    ),
    ("\"quarterly report\"", "\"quarterly report\""),
    ("larger:100K", "tag:large"),
    ("account:bench has:attachment", "tag:attachment"),
    ("zzzzqqq", "zzzzqqq"),
];

/// A notmuch database over a Maildir of the benchmark's messages.
pub struct Notmuch {
    config: PathBuf,
}

impl Notmuch {
    /// Writes the Maildir, runs `notmuch new` and tags the messages; prints what each took and
    /// the database's size once compacted.
    pub fn index(dir: &Path, messages: usize) -> Result<Notmuch> {
        let mail = dir.join("mail");
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(mail.join(sub))?;
        }
        let mut batch = String::new();
        for i in 0..messages {
            let (flags, bytes) = super::search::varied_message(i, messages);
            let mut info = String::new();
            if flags.contains("\\Flagged") {
                info.push('F');
            }
            if flags.contains("\\Seen") {
                info.push('S');
            }
            std::fs::write(mail.join("cur").join(format!("{i}:2,{info}")), &bytes)?;
            let mut tags: Vec<String> = flags
                .split(' ')
                .filter(|f| !f.is_empty() && !f.starts_with('\\'))
                .map(|f| format!("+{f}"))
                .collect();
            if bytes.len() > 100 * 1024 {
                tags.push("+large".into());
            }
            if !tags.is_empty() {
                batch.push_str(&format!("{} -- id:v{i}@example.test\n", tags.join(" ")));
            }
        }
        let config = dir.join("notmuch-config");
        std::fs::write(
            &config,
            format!(
                "[database]\npath={}\n[new]\ntags=inbox;unread;\n[maildir]\nsynchronize_flags=true\n",
                mail.display()
            ),
        )?;
        let db = Notmuch { config };
        let start = Instant::now();
        db.run(&["new", "--quiet"], None)?;
        let new = start.elapsed();
        let start = Instant::now();
        db.run(&["tag", "--batch"], Some(&batch))?;
        let tagging = start.elapsed();
        db.run(&["compact", "--quiet"], None)?;
        println!(
            "notmuch 0.37: new {:.1} s, tagging {:.1} s, database {:.1} MB compacted",
            new.as_secs_f64(),
            tagging.as_secs_f64(),
            dir_size(&mail.join(".notmuch"))? as f64 / 1_048_576.0
        );
        Ok(db)
    }

    /// A database an earlier run kept (`BENCH_KEEP`), to look into the queries by hand.
    pub fn kept(dir: &Path) -> Notmuch {
        Notmuch {
            config: dir.join("notmuch-config"),
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new("notmuch");
        c.arg(format!("--config={}", self.config.display()));
        c
    }

    fn run(&self, args: &[&str], input: Option<&str>) -> Result<String> {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("notmuch (scripts/bench installs it)")?;
        let mut stdin = child.stdin.take().context("stdin")?;
        if let Some(text) = input {
            std::io::Write::write_all(&mut stdin, text.as_bytes())?;
        }
        drop(stdin);
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("notmuch {args:?} failed");
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// How many messages match, as `notmuch count` says.
    pub fn count(&self, query: &str) -> Result<u64> {
        Ok(self.run(&["count", query], None)?.trim().parse()?)
    }
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += match meta.is_dir() {
            true => dir_size(&entry.path())?,
            false => meta.len(),
        };
    }
    Ok(total)
}

/// Runs a command to its end with its output thrown away; how long it took.
fn timed(mut command: Command) -> Result<Duration> {
    let start = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let took = start.elapsed();
    if !status.success() {
        bail!("{command:?} failed");
    }
    Ok(took)
}

/// p50 and p95 in ms of unsorted times.
fn p50_p95(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    (
        super::percentile(&times, 0.5),
        super::percentile(&times, 0.95),
    )
}

/// Every shape as a whole process, mailbroker's `search --limit 20` against notmuch's
/// `search --limit=20` (and `count`, which mailbroker's one call also answers), alternating.
/// The two must find the same number of messages.
pub fn side_by_side(bin: &Path, home: &Path, db: &Notmuch) -> Result<()> {
    println!(
        "whole process, {RUNS} runs each, alternating (p50 / p95 ms): mailbroker search --limit 20 \
         | notmuch search --limit=20 | notmuch count"
    );
    for (ours, theirs) in SHAPES {
        let total = mailbroker_total(bin, home, ours)?;
        let count = db.count(theirs)?;
        if total != count {
            bail!("{ours}: mailbroker finds {total}, notmuch {count} ({theirs})");
        }
        let (mut us, mut search, mut counting) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..RUNS {
            let mine = || {
                let mut c = Command::new(bin);
                c.arg("--home")
                    .arg(home)
                    .args(["search", "--limit", "20", ours]);
                c
            };
            let mut theirs_search = db.command();
            theirs_search.args(["search", "--limit=20", theirs]);
            if run % 2 == 0 {
                us.push(timed(mine())?);
                search.push(timed(theirs_search)?);
            } else {
                search.push(timed(theirs_search)?);
                us.push(timed(mine())?);
            }
            let mut theirs_count = db.command();
            theirs_count.args(["count", theirs]);
            counting.push(timed(theirs_count)?);
        }
        let (us, search, counting) = (p50_p95(us), p50_p95(search), p50_p95(counting));
        println!(
            "  {ours:<38} {total:>6}  {:>6.2} / {:>6.2}  | {:>6.2} / {:>6.2}  | {:>6.2} / {:>6.2}  {}",
            us.0,
            us.1,
            search.0,
            search.1,
            counting.0,
            counting.1,
            if us.0 <= search.0 {
                "at or under"
            } else {
                "OVER"
            }
        );
    }
    Ok(())
}

fn mailbroker_total(bin: &Path, home: &Path, query: &str) -> Result<u64> {
    let run = super::run_mailbroker(bin, home, &["search", "--limit", "1", query])?;
    run.json["total"].as_u64().context("total")
}
