//! Set algebra over posting lists, merged in the process: a query such as
//! `newsletter -(from:shop OR tag:Work)` reads each of its lists once, as one string of sorted
//! ids, and joins them here by merging. SQLite's compound SELECTs did the same through temporary
//! B-trees, twice as slowly, and the page had to test every row it walked against each list
//! again; with the matches in hand, the count is their number, and a page is the first of
//! them met walking the date index from the newest message (`page_of`), or, when they are
//! few, them sorted (BENCHMARKS.md, "Search beside notmuch"). The one place this is done.

use super::sql::Sql;
use mailbroker_core::Error;

use super::query::Posting;
use super::words::Lexicon;
use super::{Store, db_error};
use std::sync::Arc;

/// A set-algebra expression over numbered posting lists.
#[derive(Debug)]
pub(super) enum SetExpr {
    List(usize),
    Any(Vec<SetExpr>),
    /// In every one of `all` and in none of `none`; `all` is never empty.
    All {
        all: Vec<SetExpr>,
        none: Vec<SetExpr>,
    },
}

/// The sorted ids of `expr`'s matches, its lists read from the index.
pub(super) async fn matches(
    store: &Store,
    (expr, lists): &(SetExpr, Vec<Posting>),
    lexicon: &Option<Arc<Lexicon>>,
) -> Result<Vec<i64>, Error> {
    // Each list in a statement of its own, all at once: on connections of their own (a pool
    // of several, or a large index's side connections, `Store::beside`) they are read side by
    // side, and each is parsed while the others are still read. One statement of all of them
    // took their sum (BENCHMARKS.md, "At a million messages"). Like the page read after them,
    // they may read either side of a sync's commit.
    let reads = lists.iter().enumerate();
    let mut read =
        futures::future::try_join_all(reads.map(|(n, l)| list(store, n, l, lexicon))).await?;
    Ok(eval(expr, &mut read))
}

/// The sorted ids of one posting list, the `n`th read at once.
async fn list(
    store: &Store,
    n: usize,
    posting: &Posting,
    lexicon: &Option<Arc<Lexicon>>,
) -> Result<Vec<i64>, Error> {
    let mut q = Sql::new(store.backend(), "SELECT ").with_lexicon(lexicon.clone());
    let concat = q
        .backend()
        .pick("group_concat(id)", "string_agg(CAST(id AS TEXT), ',')");
    q.push(format_args!("(SELECT {concat} FROM ("));
    posting.push_select(&mut q);
    q.push(") AS list)");
    let row = q
        .build()
        .fetch_one(store.beside(n))
        .await
        .map_err(db_error)?;
    // Borrowed from the row: a list is tens of kilobytes, and a copy is fresh pages.
    let text: Option<&str> = sqlx::Row::try_get(&row, 0).map_err(db_error)?;
    ids_of(text.unwrap_or_default())
}

/// Ids walked from the date index at first, newest first; each further statement walks
/// twice as many as the one before, so a page costs at most about twice the rows it needs.
const FIRST_WALK: u64 = 512;

/// Up to `limit` of `matches` (sorted ids), newest first, after skipping `offset` of them:
/// the date index is read from the newest message, a run of ids at a time, and each id
/// tested here. A page of many matches meets its rows after about `(offset + limit) × all /
/// matches` ids, where reading the matches' dates to sort them would read every match.
pub(super) async fn page_of(
    store: &Store,
    matches: &[i64],
    limit: u32,
    offset: u64,
) -> Result<Vec<i64>, Error> {
    let wanted = offset + u64::from(limit);
    let (mut page, mut seen) = (Vec::new(), 0u64);
    let (mut walked, mut run) = (0u64, FIRST_WALK.max(wanted.saturating_mul(16)));
    loop {
        let text: Option<String> = sqlx::query_scalar(store.backend().pick(
            "SELECT group_concat(id, ',' ORDER BY date DESC, id DESC) FROM (SELECT id, date \
             FROM messages INDEXED BY messages_date ORDER BY date DESC, id DESC \
             LIMIT $1 OFFSET $2)",
            "SELECT string_agg(CAST(id AS TEXT), ',' ORDER BY date DESC, id DESC) FROM \
             (SELECT id, date FROM messages ORDER BY date DESC, id DESC LIMIT $1 OFFSET $2) \
             AS walked",
        ))
        .bind(run as i64)
        .bind(walked as i64)
        .fetch_one(store.pool())
        .await
        .map_err(db_error)?;
        let ids = in_order(text.as_deref().unwrap_or_default())?;
        for id in &ids {
            if matches.binary_search(id).is_ok() {
                seen += 1;
                if seen > offset {
                    page.push(*id);
                }
                if seen == wanted {
                    return Ok(page);
                }
            }
        }
        if (ids.len() as u64) < run {
            return Ok(page);
        }
        walked += run;
        run = run.saturating_mul(2);
    }
}

/// Sorted, distinct ids from the index's comma-separated list.
pub(super) fn ids_of(text: &str) -> Result<Vec<i64>, Error> {
    let mut ids = in_order(text)?;
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Ids from the index's comma-separated list, in its order. Read byte by byte in one pass: a
/// merged query reads tens of thousands of them, and splitting on a `char` pattern and parsing
/// each as a `str` took a tenth of its time.
fn in_order(text: &str) -> Result<Vec<i64>, Error> {
    let bad = || Error::internal(format!("index: bad message id list {:.40?}", text));
    let mut ids = Vec::with_capacity(text.len() / 5 + 1);
    let (mut id, mut digits) = (0i64, 0u32);
    for &b in text.as_bytes() {
        if b == b',' {
            if digits > 0 {
                ids.push(id);
            }
            (id, digits) = (0, 0);
            continue;
        }
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(bad());
        }
        // Eighteen digits never overflow; only a longer id needs the checked arithmetic.
        id = if digits < 18 {
            id * 10 + i64::from(digit)
        } else {
            id.checked_mul(10)
                .and_then(|n| n.checked_add(i64::from(digit)))
                .ok_or_else(bad)?
        };
        digits += 1;
    }
    if digits > 0 {
        ids.push(id);
    }
    Ok(ids)
}

/// The ids of `expr`, taking its lists out of `lists`: each list is one term's, named once.
fn eval(expr: &SetExpr, lists: &mut [Vec<i64>]) -> Vec<i64> {
    match expr {
        SetExpr::List(i) => lists.get_mut(*i).map(std::mem::take).unwrap_or_default(),
        SetExpr::Any(items) => items
            .iter()
            .map(|e| eval(e, lists))
            .reduce(|a, b| union(&a, &b))
            .unwrap_or_default(),
        SetExpr::All { all, none } => {
            let mut acc = all
                .iter()
                .map(|e| eval(e, lists))
                .reduce(|a, b| intersection(&a, &b))
                .unwrap_or_default();
            for e in none {
                acc = subtract(acc, e, lists);
            }
            acc
        }
    }
}

/// `acc` without the ids of `expr`: without each of an OR's items in turn, which never builds
/// their union.
fn subtract(acc: Vec<i64>, expr: &SetExpr, lists: &mut [Vec<i64>]) -> Vec<i64> {
    match expr {
        SetExpr::Any(items) => items.iter().fold(acc, |acc, e| subtract(acc, e, lists)),
        other => difference(acc, &eval(other, lists)),
    }
}

/// The ids in either of two sorted lists of distinct ids, sorted.
fn union(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        out.push(x.min(y));
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The ids in both.
fn intersection(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        if x == y {
            out.push(x);
        }
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out
}

/// `a` without `b`'s ids, in place: a negated group takes each of its lists from the one set.
fn difference(mut a: Vec<i64>, b: &[i64]) -> Vec<i64> {
    let mut j = 0;
    a.retain(|&x| {
        while b.get(j).is_some_and(|&y| y < x) {
            j += 1;
        }
        b.get(j) != Some(&x)
    });
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_keep_sorted_distinct_ids() {
        let (a, b) = (vec![1, 3, 5, 7], vec![2, 3, 7, 9]);
        assert_eq!(union(&a, &b), vec![1, 2, 3, 5, 7, 9]);
        assert_eq!(intersection(&a, &b), vec![3, 7]);
        assert_eq!(difference(a.clone(), &b), vec![1, 5]);
        assert_eq!(difference(b.clone(), &a), vec![2, 9]);
        assert_eq!(difference(a.clone(), &[]), a);
        assert_eq!(union(&a, &[]), a);
        assert_eq!(union(&[], &b), b);
        assert_eq!(intersection(&a, &[]), Vec::<i64>::new());
    }

    #[test]
    fn a_full_text_expression_alone_is_read_as_ids_once() {
        use super::super::Backend::{Postgres, Sqlite};
        let merged = |text: &str, backend| {
            let query = mailbroker_query::parse(text, 0).unwrap();
            super::super::query::merged(&query, backend).map(|(_, lists)| lists.len())
        };
        assert_eq!(merged("\"quarterly report\"", Sqlite), Some(1));
        assert_eq!(
            merged("budget OR invoice", Sqlite),
            Some(1),
            "one FTS5 expression"
        );
        assert_eq!(merged("budget -tag:Work", Sqlite), Some(2));
        // Counted from their own index by SQLite, without a second evaluation to avoid.
        assert_eq!(merged("from:alice", Sqlite), None);
        assert_eq!(merged("tag:Work", Sqlite), None);
        assert_eq!(merged("larger:100K", Sqlite), None);
        // PostgreSQL reads a header list's rows to count them: read once.
        assert_eq!(merged("from:alice OR from:bob", Postgres), Some(1));
        assert_eq!(merged("tag:Work", Postgres), None);
    }

    /// 3,000 messages, three to a date and the oldest undated: pages of a walk that meets its
    /// first match at once, and of one that must read three runs before its first.
    #[tokio::test]
    async fn a_page_walked_from_the_date_index_is_the_matches_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("index.db")).await.unwrap();
        sqlx::query(
            "INSERT INTO accounts (id, provider, settings, capabilities, created_at) \
             VALUES ('a', 'imap', '{}', '{}', 0); \
             INSERT INTO mailboxes (id, account_id, name) VALUES (1, 'a', 'INBOX'); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) \
             INSERT INTO messages (id, mailbox_id, remote_id, date) \
             SELECT i, 1, i, CASE WHEN i <= 30 THEN NULL ELSE i / 3 END FROM n",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let newest_first = |ids: &[i64]| {
            let mut ids = ids.to_vec();
            ids.sort_by_key(|&i| std::cmp::Reverse(((i > 30).then_some(i / 3), i)));
            ids
        };
        let every_seventh: Vec<i64> = (1..=3000).filter(|i| i % 7 == 0).collect();
        let old_ones: Vec<i64> = (1..=600).filter(|i| i % 5 == 0).collect();
        for (matches, limit, offset) in [
            (&every_seventh, 20, 0),
            (&every_seventh, 50, 300),
            (&every_seventh, 20, 420),
            (&old_ones, 20, 0),
            (&old_ones, 100, 90),
        ] {
            let page = page_of(&store, matches, limit, offset).await.unwrap();
            let truth: Vec<i64> = newest_first(matches)
                .into_iter()
                .skip(offset as usize)
                .take(limit as usize)
                .collect();
            assert_eq!(page, truth, "limit {limit} offset {offset}");
        }
    }

    /// A command that only reads reads a query's lists on its one connection, or on a large
    /// index side by side on connections beside it, and finds what the index open for writing
    /// finds.
    #[tokio::test]
    async fn a_reader_reads_lists_side_by_side_and_finds_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.db");
        let store = Store::open(&path).await.unwrap();
        crate::test_messages(&store, 3000).await;
        sqlx::raw_sql(
            "INSERT INTO message_state (id, mailbox_id) SELECT id, mailbox_id FROM messages; \
             INSERT INTO message_tags (message_id, tag) SELECT id, 'Work' FROM messages \
             WHERE id % 3 = 0; \
             INSERT INTO message_tags (message_id, tag) SELECT id, 'Home' FROM messages \
             WHERE id % 5 = 0 AND id % 3 != 0; \
             INSERT INTO messages_fts (rowid, subject, addresses, snippet, body) \
             SELECT id, 'newsletter', '', '', '' FROM messages WHERE id % 2 = 0",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let query = mailbroker_query::parse("newsletter -(tag:Work OR tag:Home)", 0).unwrap();
        let truth: Vec<i64> = (1..=3000)
            .rev()
            .filter(|i| i % 2 == 0 && i % 3 != 0 && i % 5 != 0)
            .collect();
        let ids = |page: crate::SearchPage| -> Vec<i64> {
            page.rows.iter().map(|r| r.place.id).collect()
        };
        let written = store.search_page(&query, 20, 0).await.unwrap();
        assert_eq!(written.total, truth.len() as u64);
        assert_eq!(ids(written), truth[..20]);
        store.close().await;
        // A small index is read on the one connection; a large one (here from 0 bytes) side by
        // side.
        let small = Store::open_reader(&path).await.unwrap();
        assert!(small.side.is_none());
        let read = small.search_page(&query, 20, 40).await.unwrap();
        assert_eq!(read.total, truth.len() as u64);
        assert_eq!(ids(read), truth[40..60]);
        small.close().await;
        let large = Store::reader(&path, 0).await.unwrap();
        let read = large.search_page(&query, 20, 40).await.unwrap();
        assert_eq!(read.total, truth.len() as u64);
        assert_eq!(ids(read), truth[40..60]);
        let side = large.side.as_ref();
        assert!(
            side.is_some_and(|pool| pool.size() > 0),
            "lists read beside the first"
        );
        large.close().await;
    }

    #[test]
    fn an_expression_is_evaluated_as_its_sets() {
        // (l0 OR l1) AND l2, none of l3.
        let mut lists = vec![vec![1, 2, 3], vec![4, 5], vec![2, 3, 4, 5, 6], vec![3, 5]];
        let expr = SetExpr::All {
            all: vec![
                SetExpr::Any(vec![SetExpr::List(0), SetExpr::List(1)]),
                SetExpr::List(2),
            ],
            none: vec![SetExpr::List(3)],
        };
        assert_eq!(eval(&expr, &mut lists), vec![2, 4]);
        // l0 and none of (l1 OR l2): each taken away in turn.
        let mut lists = vec![vec![1, 2, 3, 4, 5, 6], vec![2, 9], vec![3, 4, 7]];
        let expr = SetExpr::All {
            all: vec![SetExpr::List(0)],
            none: vec![SetExpr::Any(vec![SetExpr::List(1), SetExpr::List(2)])],
        };
        assert_eq!(eval(&expr, &mut lists), vec![1, 5, 6]);
        assert_eq!(ids_of("9,2,2,5").unwrap(), vec![2, 5, 9]);
        assert_eq!(ids_of("").unwrap(), Vec::<i64>::new());
        assert!(ids_of("1,x").is_err());
        assert!(ids_of("-3").is_err());
        assert!(ids_of("99999999999999999999").is_err());
        assert_eq!(in_order("30,4,1000").unwrap(), vec![30, 4, 1000]);
        assert_eq!(
            in_order("9223372036854775807").unwrap(),
            vec![i64::MAX],
            "the largest rowid"
        );
        assert!(in_order("9223372036854775808").is_err());
    }
}
