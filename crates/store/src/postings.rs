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
    // All lists in one statement: a fresh process pays for each statement it prepares.
    let mut q = Sql::new(store.backend(), "SELECT ").with_lexicon(lexicon.clone());
    for (i, posting) in lists.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        let concat = q
            .backend()
            .pick("group_concat(id)", "string_agg(CAST(id AS TEXT), ',')");
        q.push(format_args!("(SELECT {concat} FROM ("));
        posting.push_select(&mut q);
        q.push(") AS list)");
    }
    let row = q.build().fetch_one(store.pool()).await.map_err(db_error)?;
    let mut read = Vec::with_capacity(lists.len());
    for i in 0..lists.len() {
        // Borrowed from the row: a list is tens of kilobytes, and a copy is fresh pages.
        let text: Option<&str> = sqlx::Row::try_get(&row, i).map_err(db_error)?;
        read.push(ids_of(text.unwrap_or_default())?);
    }
    Ok(eval(expr, &mut read))
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
fn ids_of(text: &str) -> Result<Vec<i64>, Error> {
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
                acc = difference(&acc, &eval(e, lists));
            }
            acc
        }
    }
}

/// Merges two sorted lists, keeping what `keep(in a, in b)` says of each id.
fn merge(a: &[i64], b: &[i64], keep: fn(bool, bool) -> bool) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (id, in_a, in_b) = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => (*x, true, true),
            (Some(x), Some(y)) if x < y => (*x, true, false),
            (Some(x), None) => (*x, true, false),
            (_, Some(y)) => (*y, false, true),
            (None, None) => break,
        };
        i += usize::from(in_a);
        j += usize::from(in_b);
        if keep(in_a, in_b) {
            out.push(id);
        }
    }
    out
}

fn union(a: &[i64], b: &[i64]) -> Vec<i64> {
    merge(a, b, |x, y| x || y)
}

fn intersection(a: &[i64], b: &[i64]) -> Vec<i64> {
    merge(a, b, |x, y| x && y)
}

fn difference(a: &[i64], b: &[i64]) -> Vec<i64> {
    merge(a, b, |x, y| x && !y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_keep_sorted_distinct_ids() {
        let (a, b) = (vec![1, 3, 5, 7], vec![2, 3, 7, 9]);
        assert_eq!(union(&a, &b), vec![1, 2, 3, 5, 7, 9]);
        assert_eq!(intersection(&a, &b), vec![3, 7]);
        assert_eq!(difference(&a, &b), vec![1, 5]);
        assert_eq!(difference(&b, &a), vec![2, 9]);
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
