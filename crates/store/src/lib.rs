//! The index: one SQLite database (WAL) under the home directory, or a PostgreSQL database
//! several machines share. It holds the messages and their search indexes, the journal of
//! changes and the staged deletions, the accounts with their secrets (`keyring`, `sealed`),
//! and what coordinates the processes that use it (leases, nodes, sessions, tokens).
//!
//! Architecture Invariant: the store knows nothing about any provider. It stores settings and
//! capabilities as opaque JSON and messages in the vocabulary of `mailbroker-core`; it never
//! opens a network connection but to its database. Only this crate speaks SQL.

pub mod home;
pub mod keyring;
pub mod sealed;
pub mod util;

mod accounts;
mod approvals;
mod authserv;
mod batches;
mod budget;
mod console;
mod drafts;
mod frequent;
mod journal;
mod leases;
mod mailboxes;
mod manifests;
mod messages;
mod nodes;
mod oauth;
mod parts;
mod postings;
mod query;
mod rethread;
mod rules;
mod settle;
mod sink;
pub(crate) mod sql;
mod tokens;
mod words;

use std::path::Path;

use sql::Sql;

use mailbroker_core::Error;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, ConnectOptions};

pub use accounts::{AccountRecord, Fallback, MailboxRecord};
pub use approvals::{Approval, ApprovedBy, Decision, Needed};
pub use budget::Over;
pub use console::{ConsoleSession, LinkPurpose, StoredPasskey};
pub use journal::{Asked, ChangeRecord, ChangeStatus, Chosen, JournalItem, MessageState};
pub use leases::{AccountLock, Fence, LOCK_WAIT};
pub use mailboxes::Mailboxes;
pub use manifests::{ItemCounts, ItemOutcome, ItemStatus, Manifest, ManifestItem, ManifestStatus};
pub use messages::{MessageRef, MessageRow, SearchPage, no_message};
pub use oauth::{
    ACCESS_SECS, AuthRequest, ClientKind, Grant, OAuthClient, REFRESH_SECS, REQUEST_SECS,
};
pub use rules::{RuleAction, RuleManifest, RuleStatus};
pub use sink::{StoreSink, SyncProgress};
pub use tokens::{AccessToken, Touched};

/// A handle on the index. Cheap to clone (a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    reads: std::sync::Arc<Reads>,
    /// A command that only reads, on a large index: connections for the posting lists read
    /// beside the first (`postings::matches`), apart from `pool`'s one. sqlx returns a
    /// connection to its pool by a task of its own, so a pool of more than one opens a second
    /// connection for the next statement of the same search (a millisecond of a fresh process).
    /// Lazy: it opens a connection only when a search first reads lists side by side.
    side: Option<AnyPool>,
}

/// How many account rows, mailbox lists and message rows this store (and its clones) has
/// read: what tests count to show a request reads each fact once.
#[derive(Debug, Default)]
struct Reads {
    accounts: std::sync::atomic::AtomicU64,
    mailboxes: std::sync::atomic::AtomicU64,
    messages: std::sync::atomic::AtomicU64,
}

/// `Reads` at one moment; the difference of two is what happened between them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Account rows.
    pub accounts: u64,
    /// An account's mailboxes, each read of the list counted once.
    pub mailboxes: u64,
    /// Message rows.
    pub messages: u64,
}

impl std::ops::Sub for ReadCounts {
    type Output = ReadCounts;

    fn sub(self, earlier: ReadCounts) -> ReadCounts {
        ReadCounts {
            accounts: self.accounts - earlier.accounts,
            mailboxes: self.mailboxes - earlier.mailboxes,
            messages: self.messages - earlier.messages,
        }
    }
}

impl Reads {
    fn add(counter: &std::sync::atomic::AtomicU64, n: usize) {
        counter.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Maps a database failure to our vocabulary. Most database errors are ours, not the user's,
/// so they are `internal`; an index the user's machine keeps us from writing (read-only, a
/// full disk) or a locked one says so, with what to do.
pub(crate) fn db_error(e: sqlx::Error) -> Error {
    let failure = match &e {
        sqlx::Error::Database(db) => match db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        {
            Some(pg) => postgres_failure(pg.code()),
            None => sqlite_failure(db.code().and_then(|c| c.parse::<i32>().ok())),
        },
        // The database's server went away, or no connection came within the pool's time.
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => Some(Failure::Unreachable),
        _ => None,
    };
    match failure {
        Some(Failure::ReadOnly) => {
            Error::writes_disabled("the index is read-only: nothing can be recorded")
                .with_next_step(
                    "make the index writable by you (its file and directory, see --home, or \
                     the database's role), then retry",
                )
        }
        Some(Failure::Full) => Error::limit_exceeded("the disk holding the index is full")
            .with_next_step("free space on that disk, then retry"),
        // Another process held the index past the busy timeout: like a busy account lock,
        // something to retry, not a fault of ours.
        Some(Failure::Busy) => Error::provider_unavailable(
            "the index is busy: another mailbroker process kept it locked",
        )
        .with_next_step("wait for it to finish, then retry"),
        Some(Failure::Unreachable) => {
            Error::provider_unavailable(format!("the index's database cannot be reached: {e}"))
                .with_next_step("check that the database runs and is reachable, then retry")
        }
        None => Error::internal(format!("index: {e}")),
    }
}

/// What a database failure is, where it is the person's to fix or to retry.
enum Failure {
    ReadOnly,
    Full,
    Busy,
    Unreachable,
}

/// From SQLite's result code (its primary code is the low byte of an extended one).
fn sqlite_failure(code: Option<i32>) -> Option<Failure> {
    const BUSY: i32 = 5;
    const LOCKED: i32 = 6;
    const READONLY: i32 = 8;
    const FULL: i32 = 13;
    match code? & 0xff {
        READONLY => Some(Failure::ReadOnly),
        FULL => Some(Failure::Full),
        BUSY | LOCKED => Some(Failure::Busy),
        _ => None,
    }
}

/// From PostgreSQL's SQLSTATE: a read-only transaction or role, a full disk, a lock not
/// granted or a transaction chosen to fail (deadlock, serialization), a server shutting down.
fn postgres_failure(sqlstate: &str) -> Option<Failure> {
    match sqlstate {
        "25006" | "42501" => Some(Failure::ReadOnly),
        "53100" => Some(Failure::Full),
        "55P03" | "40P01" | "40001" => Some(Failure::Busy),
        "57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006" => Some(Failure::Unreachable),
        _ => None,
    }
}

/// The migrations, embedded at build time: SQLite's, and PostgreSQL's in their own directory
/// (the two dialects' schemas are written separately; the statements mostly are not).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
static PG_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Subjects, senders, bodies and the journal travel the link to PostgreSQL: to another
/// machine over TLS with the server's certificate and name checked (`sslmode=verify-full`),
/// unless the URL (or `PGSSLMODE`, `by_env`) says otherwise. On this machine (or a socket),
/// PostgreSQL's own default, `prefer`.
fn tls_by_default(url: &mut url::Url, by_env: bool) {
    let host = url.host_str().unwrap_or_default().to_string();
    let chosen = by_env || url.query_pairs().any(|(k, _)| k == "sslmode");
    if !chosen && !host.is_empty() && !mailbroker_core::endpoint::is_this_machine(&host) {
        url.query_pairs_mut().append_pair("sslmode", "verify-full");
    }
}

/// Which engine holds the index: SQLite in the home (one machine), or a PostgreSQL database
/// that several machines share (`--database`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Brings the index's schema to this build's. The version it reached is kept in SQLite's own
/// header field (`user_version`) as well as in sqlx's table: a search opens the index for a
/// few milliseconds of work, and reading one number spares it the migration table and every
/// migration's checksum. An index at another version (older, or never stamped) goes through
/// sqlx, which checks and applies as before.
async fn migrate(pool: &AnyPool) -> Result<(), Error> {
    let failed = |e: sqlx::Error| Error::internal(format!("index migration failed: {e}"));
    let latest = latest_version();
    if stamped_version(pool).await.map_err(failed)? == latest {
        return Ok(());
    }
    MIGRATOR
        .run(pool)
        .await
        .map_err(|e| Error::internal(format!("index migration failed: {e}")))?;
    rethread::rethread(pool, Backend::Sqlite).await?;
    // A PRAGMA takes no bound parameter; `latest` is this build's own number.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "PRAGMA user_version = {latest}"
    )))
    .execute(pool)
    .await
    .map_err(failed)?;
    Ok(())
}

/// The schema version an index was stamped with (SQLite's `user_version`).
async fn stamped_version(pool: &AnyPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(pool)
        .await
}

/// The URL of the index file, with how to open it (`mode`); the path percent-encoded.
fn sqlite_url(path: &Path, read_only: bool) -> Result<AnyConnectOptions, Error> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(!read_only)
        .read_only(read_only);
    AnyConnectOptions::from_url(&options.to_url_lossy())
        .map_err(|e| Error::internal(format!("index path {}: {e}", path.display())))
}

/// How much of the index file a connection maps (`SQLITE_PRAGMAS`).
pub(crate) const MMAP_SIZE: &str = "PRAGMA mmap_size = 1073741824";

/// What every connection to the index file sets, reading or writing. Reads map the file
/// rather than copy its pages through a per-connection cache: searches and their counts over
/// 100,000 messages take 1.3–3× less (BENCHMARKS.md).
const SQLITE_PRAGMAS: &[&str] = &["PRAGMA busy_timeout = 30000", MMAP_SIZE];

/// What a connection that may write sets besides. The WAL is checkpointed every 64 MB rather
/// than every 4 MB: a 10,000-message change otherwise pays for a checkpoint inside its own
/// commit (≈ 80 ms). The last connection to close checkpoints anyway. Statement journals
/// (the pages a statement that may fail halfway would restore, kept for every batch's
/// multi-row upsert) stay in memory: in a temporary file they cost a first sync's header
/// pass an eighth of its CPU in writes that are thrown away (BENCHMARKS.md).
const SQLITE_WRITER_PRAGMAS: &[&str] = &[
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA wal_autocheckpoint = 16384",
    "PRAGMA temp_store = MEMORY",
];

/// Connections a command that only reads may open besides its one, for posting lists read
/// side by side.
const SIDE_READERS: u32 = 3;

/// The index size from which a command that only reads reads a search's lists side by side.
/// Opening a connection costs a fresh process about a millisecond, more than lists of a
/// 100,000-message index (70 MB) take to read; a million messages' (700 MB) take 20 ms
/// (BENCHMARKS.md, "At a million messages").
const SIDE_BY_SIDE_FROM: u64 = 256 << 20;

/// A pool of the index file whose every new connection first sets `SQLITE_PRAGMAS`, and the
/// writer's too when it may write.
fn sqlite_pool(max: u32, writes: bool) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                use sqlx::Executor;
                let writer = if writes { SQLITE_WRITER_PRAGMAS } else { &[] };
                for pragma in SQLITE_PRAGMAS.iter().chain(writer) {
                    conn.execute(*pragma).await?;
                }
                Ok(())
            })
        })
}

/// The advisory lock key every PostgreSQL write transaction holds (`Store::write_tx`):
/// "mailbroker" in ASCII, so another application's keys in the same database are unlikely
/// to meet it.
const WRITERS_LOCK: i64 = 0x6d61_696c_6272_6f6b;

/// Options as every connection of the store takes them, with the engines' drivers known to
/// `Any`. Statements are logged at debug level only (`MAILBROKER_LOG=debug`): sqlx's warning
/// for a statement slower than a second would otherwise reach a person's terminal whenever a
/// large batch commits or a write waits its turn.
fn prepared(options: AnyConnectOptions) -> AnyConnectOptions {
    sqlx::any::install_default_drivers();
    options
        .log_statements(log::LevelFilter::Debug)
        .log_slow_statements(log::LevelFilter::Debug, std::time::Duration::from_secs(1))
}

/// The schema version this build migrates to.
fn latest_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

impl Store {
    fn with_pool(pool: AnyPool, backend: Backend) -> Store {
        Store {
            pool,
            backend,
            reads: Default::default(),
            side: None,
        }
    }

    /// Opens (creating if needed) the database at `path`, applies migrations, and makes the
    /// file readable by its owner only.
    pub async fn open(path: &Path) -> Result<Store, Error> {
        let existed = path.exists();
        // Checked before any connection: a pool retries a connection it cannot open for its
        // whole timeout (30 s), logging every attempt, where this says why at once.
        unwritable(path)?;
        let pool = sqlite_pool(4, true)
            .connect_with(prepared(sqlite_url(path, false)?))
            .await
            .map_err(|e| open_error(path, e))?;
        // Also an index restored from a backup with the usual 0644: it holds secrets.
        if !existed || !private(path) {
            crate::util::restrict_file(path)?;
        }
        migrate(&pool).await?;
        Ok(Store::with_pool(pool, Backend::Sqlite))
    }

    /// Connects to a PostgreSQL database (`postgres://…`) that holds the index, and applies
    /// its migrations (sqlx holds an advisory lock meanwhile, so nodes starting together
    /// migrate once).
    pub async fn connect(url: &str) -> Result<Store, Error> {
        let mut options = prepared(url.parse().map_err(|_| {
            Error::validation("the database URL is not a URL")
                .with_next_step("give --database postgres://USER@HOST:PORT/DATABASE")
        })?);
        if !matches!(options.database_url.scheme(), "postgres" | "postgresql") {
            return Err(Error::validation(
                "the database URL must start with postgres:// (SQLite is the home's own index)",
            )
            .with_next_step(
                "give --database postgres://USER@HOST:PORT/DATABASE, or leave it out",
            ));
        }
        tls_by_default(
            &mut options.database_url,
            std::env::var_os("PGSSLMODE").is_some(),
        );
        // One connection first, alone: a pool retries a refused connection until its timeout
        // and then reports only that it timed out, where this says why at once.
        let first = <sqlx::AnyConnection as sqlx::Connection>::connect_with(&options)
            .await
            .map_err(|e| {
                let tls = e.to_string().to_lowercase().contains("certificate");
                Error::provider_unavailable(format!("cannot reach the database: {e}"))
                    .with_next_step(match tls {
                        true => {
                            "give the database's CA with sslrootcert=/path/ca.pem in the URL \
                                 (sslmode=verify-full checks the certificate and its name)"
                        }
                        false => "check the database URL and that PostgreSQL runs, then retry",
                    })
            })?;
        let _ = sqlx::Connection::close(first).await;
        // A database that went away answers no connection: a command says so within this,
        // rather than after the default half minute for each statement it still tries.
        let pool = AnyPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_lazy_with(options);
        PG_MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| Error::internal(format!("index migration failed: {e}")))?;
        rethread::rethread(&pool, Backend::Postgres).await?;
        Ok(Store::with_pool(pool, Backend::Postgres))
    }

    /// Opens an existing index for one command that only reads it (`search`): one read-only
    /// connection (and, on a large index, `side`'s for lists read beside it), no migration
    /// check beyond SQLite's header, and nothing written on the way out. A read-write
    /// connection that closes last checkpoints and removes the WAL and its shared-memory file,
    /// which the next command then creates again: a fifth of an empty search's time
    /// (BENCHMARKS.md). An index that is missing, not private, at another schema version or
    /// not readable this way is opened by `open`, which mends all of those.
    pub async fn open_reader(path: &Path) -> Result<Store, Error> {
        if !private(path) {
            return Store::open(path).await;
        }
        match Self::try_reader(path).await {
            Some(store) => Ok(store),
            None => Store::open(path).await,
        }
    }

    async fn try_reader(path: &Path) -> Option<Store> {
        Self::reader(path, SIDE_BY_SIDE_FROM).await
    }

    /// A reader of `path`, reading lists side by side when the file holds `side_from` bytes.
    async fn reader(path: &Path, side_from: u64) -> Option<Store> {
        let url = prepared(sqlite_url(path, true).ok()?);
        let pool = sqlite_pool(1, false).connect_with(url.clone()).await.ok()?;
        if stamped_version(&pool).await.ok()? != latest_version() {
            pool.close().await;
            return None;
        }
        let large = std::fs::metadata(path).is_ok_and(|m| m.len() >= side_from);
        let side = large.then(|| sqlite_pool(SIDE_READERS, false).connect_lazy_with(url));
        Some(Store {
            side,
            ..Store::with_pool(pool, Backend::Sqlite)
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Where the `n`th of several statements read at once goes: the first to `pool`, the
    /// rest to `side` when the store has one.
    pub(crate) fn beside(&self, n: usize) -> &AnyPool {
        match &self.side {
            Some(side) if n > 0 => side,
            _ => &self.pool,
        }
    }

    /// The rows read so far (see `Reads`).
    pub fn reads(&self) -> ReadCounts {
        use std::sync::atomic::Ordering::Relaxed;
        ReadCounts {
            accounts: self.reads.accounts.load(Relaxed),
            mailboxes: self.reads.mailboxes.load(Relaxed),
            messages: self.reads.messages.load(Relaxed),
        }
    }

    pub(crate) fn read_accounts(&self, n: usize) {
        Reads::add(&self.reads.accounts, n);
    }

    pub(crate) fn read_mailboxes(&self) {
        Reads::add(&self.reads.mailboxes, 1);
    }

    pub(crate) fn read_messages(&self, n: usize) {
        Reads::add(&self.reads.messages, n);
    }

    /// A transaction that may write. On SQLite it takes the write lock at BEGIN (IMMEDIATE),
    /// waiting under the busy timeout like any writer: a deferred one that reads first fails
    /// at once with SQLITE_BUSY when it upgrades after another connection committed, which
    /// the busy handler does not cover (two syncs of one home, `serve`'s watchers).
    ///
    /// On PostgreSQL the same order is kept with one transaction-level advisory lock: the
    /// store's write transactions read, decide and write (a lease, a node's claims, a first
    /// sync's place), and that is only sound when no other writer runs between the read and
    /// the write, on any machine. Writers wait for each other as on SQLite; readers do not.
    pub(crate) async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, Error> {
        match self.backend {
            Backend::Sqlite => self
                .pool
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(db_error),
            Backend::Postgres => {
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                sqlx::query("SELECT 1 FROM pg_advisory_xact_lock($1)")
                    .bind(WRITERS_LOCK)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                Ok(tx)
            }
        }
    }

    /// Tells PostgreSQL's planner about the `arrived` rows a sync just wrote (a first sync),
    /// and settles its full-text indexes, rather than leaving both to autovacuum's next round:
    /// a search run right after a first sync otherwise read every message for a term an index
    /// answers. Where they are a fifth of the index or more, which autovacuum's own threshold
    /// would soon vacuum, they are vacuumed now: until then `has:attachment` is counted from
    /// the table instead of its index alone (BENCHMARKS.md, "The index on PostgreSQL beside
    /// SQLite"). SQLite's plans take no statistics (`query.rs` names the index a term reads).
    pub(crate) async fn refresh_statistics(&self, arrived: usize) -> Result<(), Error> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        const TABLES: &str = "messages, message_state, message_tags, message_text, \
                              message_words, message_header_words, mailboxes";
        let rows: f32 =
            sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = 'messages'")
                .fetch_one(&self.pool)
                .await
                .map_err(db_error)?;
        // VACUUM also moves the full-text indexes' pending entries into their trees, as
        // `gin_clean_pending_list` does: every search read the pending lists whole, 447
        // pages after a first sync of 100,000.
        let statement = match arrived as f32 >= rows / 5.0 {
            true => format!("VACUUM (ANALYZE) {TABLES}"),
            false => format!(
                "ANALYZE {TABLES};
                 SELECT gin_clean_pending_list('message_words_gin'),
                   gin_clean_pending_list('message_header_words_gin');"
            ),
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Tells PostgreSQL's planner about the message rows a sync just wrote, before it reads
    /// them back one batch at a time.
    pub(crate) async fn analyze_messages(&self) -> Result<(), Error> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        sqlx::raw_sql("ANALYZE messages, message_state")
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    pub async fn close(&self) {
        if let Some(side) = &self.side {
            side.close().await;
        }
        self.pool.close().await;
    }
}

/// Why the index would not open. WAL mode writes beside the index even to read it, so a
/// directory that cannot be written (a read-only mount) keeps it shut: that is the person's
/// to fix, not a fault of ours.
fn open_error(path: &Path, e: sqlx::Error) -> Error {
    match unwritable(path) {
        Err(refused) => refused,
        Ok(()) => Error::internal(format!("cannot open index {}: {e}", path.display())),
    }
}

/// Why the index at `path` cannot be written, if it cannot: the file (a read-only file
/// system, another owner) or its directory, where SQLite keeps its journal beside it.
fn unwritable(path: &Path) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // Said before anything is read, planned or sent: nothing was.
    let what = format!("cannot open index {} (nothing was sent)", path.display());
    match std::fs::File::options().append(true).open(path) {
        Err(io) if io.raw_os_error() != Some(libc::ENOENT) => {
            Err(crate::util::io_error(&what, &io))
        }
        _ if !writable(dir) => Err(Error::writes_disabled(format!(
            "{what}: its directory cannot be written"
        ))
        .with_next_step("make the home directory writable by you (see --home), then retry")),
        _ => Ok(()),
    }
}

/// Whether this process may create files in `dir`.
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Whether only the owner may read and write the file at `path`.
fn private(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}

/// Rows per multi-row statement; with at most 17 bound values a row, far below SQLite's limit.
pub(crate) const ROWS_PER_STATEMENT: usize = 500;

/// Makes `message_tags` hold exactly the tags of these messages (id, tags as a JSON array).
/// The index of `tag:` searches is kept here, set-based, rather than by per-row triggers.
pub(crate) async fn replace_tags(
    conn: &mut sqlx::AnyConnection,
    rows: &[(i64, String)],
) -> Result<(), Error> {
    let backend = Backend::of(conn);
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut delete = Sql::new(backend, "DELETE FROM message_tags WHERE message_id IN (");
        let mut ids = delete.separated(", ");
        for (id, _) in chunk {
            ids.push_bind(*id);
        }
        delete.push(")");
        delete.build().execute(&mut *conn).await.map_err(db_error)?;
        let mut insert = Sql::new(
            backend,
            "INSERT INTO message_tags (message_id, tag)
             SELECT v.column1, j.value FROM (",
        );
        insert.push_values(chunk, |mut row, (id, tags)| {
            row.push_bind(*id).push_bind(tags.clone());
        });
        insert.push(") AS v, json_each(v.column2) AS j WHERE true ON CONFLICT DO NOTHING");
        insert.build().execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
}

impl Backend {
    /// What this engine takes of a pair written for each: a statement, a keyword.
    pub(crate) fn pick<T>(self, sqlite: T, postgres: T) -> T {
        match self {
            Backend::Sqlite => sqlite,
            Backend::Postgres => postgres,
        }
    }

    /// The engine behind a connection (inside a transaction, where the store is not at hand).
    pub(crate) fn of(conn: &sqlx::AnyConnection) -> Backend {
        use sqlx::Database;
        match conn.backend_name() {
            sqlx::Postgres::NAME => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }
}

/// Whether the process a row names by pid (a node, a lease's holder) runs on this host.
pub(crate) fn process_runs(pid: i64) -> bool {
    u32::try_from(pid).is_ok_and(crate::util::running)
}

pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// Milliseconds since the epoch: a node's heartbeat (`nodes.rs`) needs finer than seconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A store on each engine, for tests of the store to run on both: SQLite in a temporary
/// directory, and PostgreSQL on a fresh database of the tests' private cluster (left out when
/// PostgreSQL is missing outside CI; under CI that fails).
#[cfg(test)]
pub(crate) async fn test_stores() -> Vec<(Option<tempfile::TempDir>, Store)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sqlite = Store::open(&dir.path().join("index.db"))
        .await
        .expect("an index");
    let mut out = vec![(Some(dir), sqlite)];
    if let Some(cluster) = mailbroker_testkit::postgres::shared() {
        let url = cluster.database().expect("a database");
        out.push((None, Store::connect(&url).await.expect("the database")));
    }
    out
}

/// Messages 1 to `n` (remote ids their numbers) in the INBOX of an account `a`, for tests of
/// the store.
#[cfg(test)]
pub(crate) async fn test_messages(store: &Store, n: usize) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO accounts (id, provider, settings, capabilities, created_at) \
         VALUES ('a', 'imap', '{{}}', '{{}}', 0); \
         INSERT INTO mailboxes (id, account_id, name) VALUES (1, 'a', 'INBOX'); \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
         INSERT INTO messages (id, mailbox_id, remote_id) SELECT i, 1, CAST(i AS TEXT) FROM n"
    )))
    .execute(store.pool())
    .await
    .expect("messages for a test");
}

#[cfg(test)]
mod tls_tests {
    #[test]
    fn another_machine_is_reached_over_verified_tls_unless_the_url_says_otherwise() {
        let after = |text: &str, by_env: bool| {
            let mut url = url::Url::parse(text).unwrap();
            super::tls_by_default(&mut url, by_env);
            url.to_string()
        };
        assert_eq!(
            after("postgres://u@db.internal:5432/mb", false),
            "postgres://u@db.internal:5432/mb?sslmode=verify-full"
        );
        for kept in [
            "postgres://u@db.internal/mb?sslmode=require",
            "postgres://u@127.0.0.1:5432/mb",
            "postgres://u@localhost/mb",
            "postgres://u@[::1]/mb",
        ] {
            assert_eq!(after(kept, false), kept);
        }
        assert_eq!(
            after("postgres://u@db.internal/mb", true),
            "postgres://u@db.internal/mb"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    /// Both ways of refreshing PostgreSQL's statistics are statements it takes: a sync that
    /// brought few of the index's messages (ANALYZE), and one that brought many (VACUUM).
    #[tokio::test]
    async fn statistics_are_refreshed_after_few_arrivals_and_after_many() {
        for (_dir, store) in crate::test_stores().await {
            crate::test_messages(&store, 100).await;
            // All 100 arrived (VACUUM), then 1 of 100 (ANALYZE).
            store.refresh_statistics(100).await.unwrap();
            store.refresh_statistics(1).await.unwrap();
        }
    }

    /// An index another connection holds past the busy timeout is a busy index, to retry.
    #[tokio::test]
    async fn a_locked_index_is_busy_not_internal() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("i.db").display());
        sqlx::any::install_default_drivers();
        let mut holder = sqlx::AnyConnection::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE t (x)")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut holder)
            .await
            .unwrap();
        let mut other = sqlx::AnyConnection::connect(&url).await.unwrap();
        sqlx::query("PRAGMA busy_timeout = 0")
            .execute(&mut other)
            .await
            .unwrap();
        let refused = sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut other)
            .await
            .unwrap_err();
        let e = db_error(refused);
        assert_eq!(e.error_type(), "provider_unavailable", "{e}");
        assert!(e.message().contains("busy"), "{e}");
        assert!(e.is_retryable());
    }

    /// PostgreSQL's refusals say what they are as SQLite's do: a read-only transaction cannot
    /// record anything; a lock not granted at once is a busy index to retry.
    #[tokio::test]
    async fn postgres_refusals_map_as_sqlite_ones_do() {
        let Some(cluster) = mailbroker_testkit::postgres::shared() else {
            return;
        };
        let store = Store::connect(&cluster.database().unwrap()).await.unwrap();
        let mut tx = store.pool().begin().await.unwrap();
        sqlx::query("SET TRANSACTION READ ONLY")
            .execute(&mut *tx)
            .await
            .unwrap();
        let refused = sqlx::query("DELETE FROM accounts")
            .execute(&mut *tx)
            .await
            .unwrap_err();
        assert_eq!(db_error(refused).error_type(), "writes_disabled");
        drop(tx);
        let mut holder = store.pool().begin().await.unwrap();
        sqlx::query("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *holder)
            .await
            .unwrap();
        let mut other = store.pool().begin().await.unwrap();
        let busy = sqlx::query("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE NOWAIT")
            .execute(&mut *other)
            .await
            .unwrap_err();
        let e = db_error(busy);
        assert_eq!(e.error_type(), "provider_unavailable", "{e}");
        assert!(e.is_retryable());
    }

    /// A fresh index is stamped with the schema it reached; an index stamped at another
    /// version goes through the migrations again (sqlx finds nothing to apply) and is stamped.
    #[tokio::test]
    async fn the_schema_version_is_stamped_and_an_unstamped_index_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.db");
        let latest = MIGRATOR.iter().map(|m| m.version).max().unwrap();
        let stamp = |store: &Store| {
            let pool = store.pool().clone();
            async move {
                sqlx::query_scalar::<_, i64>("PRAGMA user_version")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        let store = Store::open(&path).await.unwrap();
        assert_eq!(stamp(&store).await, latest);
        sqlx::query("PRAGMA user_version = 3")
            .execute(store.pool())
            .await
            .unwrap();
        store.pool().close().await;
        let again = Store::open(&path).await.unwrap();
        assert_eq!(stamp(&again).await, latest);
        let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(again.pool())
            .await
            .unwrap();
        assert_eq!(applied as usize, MIGRATOR.iter().count());
    }
}
