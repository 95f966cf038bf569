//! Set algebra over posting lists, merged in the process: a query such as
//! `newsletter -(from:shop OR tag:Work)` reads each of its lists once, as one string of sorted
//! ids, and joins them here by merging. SQLite's compound SELECTs did the same through temporary
//! B-trees, twice as slowly, and the page had to test every row it walked against each list
//! again; with the matches in hand, the count is their number and the page reads only them
//! (BENCHMARKS.md, "Search beside notmuch"). The one place this is done.

use mailbroker_core::Error;
use sqlx::{QueryBuilder, Sqlite};

use super::query::Posting;
use super::{Store, db_error};

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
    expr: &SetExpr,
    lists: &[Posting],
) -> Result<Vec<i64>, Error> {
    // All lists in one statement: a fresh process pays for each statement it prepares.
    let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
    for (i, posting) in lists.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.push("(SELECT group_concat(id) FROM (");
        posting.push_select(&mut q);
        q.push("))");
    }
    let row = q.build().fetch_one(store.pool()).await.map_err(db_error)?;
    let mut read = Vec::with_capacity(lists.len());
    for i in 0..lists.len() {
        let text: Option<String> = sqlx::Row::try_get(&row, i).map_err(db_error)?;
        read.push(ids_of(text.as_deref().unwrap_or_default())?);
    }
    Ok(eval(expr, &read))
}

/// Sorted, distinct ids from SQLite's comma-separated list.
fn ids_of(text: &str) -> Result<Vec<i64>, Error> {
    let mut ids = text
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|e| Error::internal(format!("index: bad message id {s:?}: {e}")))
        })
        .collect::<Result<Vec<i64>, Error>>()?;
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

fn eval(expr: &SetExpr, lists: &[Vec<i64>]) -> Vec<i64> {
    match expr {
        SetExpr::List(i) => lists.get(*i).cloned().unwrap_or_default(),
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
    fn an_expression_is_evaluated_as_its_sets() {
        // (l0 OR l1) AND l2, none of l3.
        let lists = vec![vec![1, 2, 3], vec![4, 5], vec![2, 3, 4, 5, 6], vec![3, 5]];
        let expr = SetExpr::All {
            all: vec![
                SetExpr::Any(vec![SetExpr::List(0), SetExpr::List(1)]),
                SetExpr::List(2),
            ],
            none: vec![SetExpr::List(3)],
        };
        assert_eq!(eval(&expr, &lists), vec![2, 4]);
        assert_eq!(ids_of("9,2,2,5").unwrap(), vec![2, 5, 9]);
        assert_eq!(ids_of("").unwrap(), Vec::<i64>::new());
        assert!(ids_of("1,x").is_err());
    }
}
