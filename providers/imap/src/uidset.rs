//! UID sets on the wire: sorted UIDs compressed to ranges (`1:500,900:1200`) and split so no
//! command line grows past a server's limit.

use crate::ids::Uid;

/// Longest command line we send; some servers refuse lines over 4,096 bytes.
pub const MAX_LINE: usize = 4000;

/// Compresses UIDs into IMAP sequence-set pieces (`7`, `9:12`), sorted, without duplicates.
pub fn ranges(uids: &[Uid]) -> Vec<String> {
    let mut sorted = uids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut iter = sorted.into_iter();
    let Some(mut start) = iter.next() else {
        return out;
    };
    let mut end = start;
    for uid in iter {
        if uid == end + 1 {
            end = uid;
            continue;
        }
        out.push(piece(start, end));
        start = uid;
        end = uid;
    }
    out.push(piece(start, end));
    out
}

fn piece(start: Uid, end: Uid) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}:{end}")
    }
}

/// Sequence sets for `uids`, each short enough that `overhead` more bytes of command still fit
/// in `MAX_LINE`.
pub fn chunks(uids: &[Uid], overhead: usize) -> Vec<String> {
    let budget = MAX_LINE.saturating_sub(overhead).max(16);
    let mut out = Vec::new();
    let mut current = String::new();
    for piece in ranges(uids) {
        if !current.is_empty() && current.len() + 1 + piece.len() > budget {
            out.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(&piece);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses_runs() {
        assert_eq!(ranges(&[5, 1, 2, 3, 9, 10, 3]), vec!["1:3", "5", "9:10"]);
        assert!(ranges(&[]).is_empty());
    }

    #[test]
    fn splits_long_sets_under_the_line_limit() {
        let scattered: Vec<Uid> = (0..10_000).map(|i| i * 2 + 1).collect();
        let sets = chunks(&scattered, 100);
        assert!(sets.len() > 1);
        assert!(sets.iter().all(|s| s.len() + 100 <= MAX_LINE));
        let back: usize = sets.iter().map(|s| s.split(',').count()).sum();
        assert_eq!(back, 10_000);
        let contiguous: Vec<Uid> = (1..=10_000).collect();
        assert_eq!(chunks(&contiguous, 100), vec!["1:10000"]);
    }
}
