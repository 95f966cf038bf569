//! A change in the person's words, for the lines that list changes and the summaries of dry
//! runs: "flag, add tag Finance", "undo change 7". The journal keeps the request as it came
//! (its patch and selection as JSON); these read either that or a tool's arguments, which use
//! the same names.

use serde_json::Value;

/// What a patch does: "mark read, add tags A, B, move to archive"; "undo change 7";
/// "stage for trash deletion".
pub fn patch_words(patch: &Value) -> String {
    if let Some(change) = patch.get("undo_of").or(patch.get("change_id")) {
        return format!("undo change {change}");
    }
    if let Some(mode) = patch.get("delete").and_then(Value::as_str) {
        return format!("stage for {mode} deletion");
    }
    let mut words = Vec::new();
    match patch.get("read").and_then(Value::as_bool) {
        Some(true) => words.push("mark read".to_string()),
        Some(false) => words.push("mark unread".to_string()),
        None => {}
    }
    match patch.get("flagged").and_then(Value::as_bool) {
        Some(true) => words.push("flag".to_string()),
        Some(false) => words.push("unflag".to_string()),
        None => {}
    }
    for (key, verb) in [("add_tags", "add"), ("remove_tags", "remove")] {
        let tags: Vec<&str> = patch
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match tags.as_slice() {
            [] => {}
            [one] => words.push(format!("{verb} tag {one}")),
            many => words.push(format!("{verb} tags {}", many.join(", "))),
        }
    }
    if let Some(target) = patch.get("move_to").and_then(Value::as_str) {
        words.push(format!("move to {target}"));
    }
    match words.is_empty() {
        true => "no change".to_string(),
        false => words.join(", "),
    }
}

/// How the messages were chosen: `query "from:alice"`, `3 ids`.
pub fn selection_words(selection: &Value) -> Option<String> {
    if let Some(query) = selection.get("query").and_then(Value::as_str) {
        return Some(format!("query {query:?}"));
    }
    match selection.get("ids").and_then(Value::as_array)?.len() {
        1 => Some("1 id".to_string()),
        n => Some(format!("{n} ids")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_read_as_what_they_do() {
        let patch = json!({"read": true, "flagged": false, "add_tags": ["Finance"],
            "remove_tags": ["a", "b"], "move_to": "archive"});
        assert_eq!(
            patch_words(&patch),
            "mark read, unflag, add tag Finance, remove tags a, b, move to archive"
        );
        assert_eq!(patch_words(&json!({"undo_of": 7})), "undo change 7");
        assert_eq!(patch_words(&json!({"change_id": 7})), "undo change 7");
        assert_eq!(
            patch_words(&json!({"delete": "trash"})),
            "stage for trash deletion"
        );
        assert_eq!(patch_words(&json!({"read": null})), "no change");
        assert_eq!(selection_words(&json!({"ids": [1, 2]})).unwrap(), "2 ids");
        assert_eq!(
            selection_words(&json!({"query": "from:a"})).unwrap(),
            "query \"from:a\""
        );
        assert_eq!(selection_words(&json!({})), None);
    }
}
