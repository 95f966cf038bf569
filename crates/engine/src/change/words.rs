//! A change in the person's words, for the lines that list changes and the summaries of dry
//! runs: "flag, add tag Finance", "undo change 7". The journal keeps the selection as it came
//! (JSON, in the names a tool's arguments use) and what was asked as an `Asked`.

use mailbroker_core::Patch;
use mailbroker_store::{Asked, Chosen};

/// What a change asked: "undo change 7", "delete (trash)", or its patch's words.
pub fn asked_words(asked: &Asked) -> String {
    match asked {
        Asked::Undo { undo_of } => format!("undo change {undo_of}"),
        Asked::Deletion { delete } => format!("delete ({})", delete.as_str()),
        Asked::Rules { rule, action } => match action {
            mailbroker_store::RuleAction::Install => format!("install rule {rule:?}"),
            mailbroker_store::RuleAction::Remove => format!("remove rule {rule:?}"),
        },
        Asked::Draft { .. } => "save a draft".to_string(),
        Asked::Patch(patch) => patch_words(patch),
    }
}

/// What an operation asks, before it runs: the words its journal line will have.
pub fn operation_words(operation: &super::Operation) -> String {
    use super::Operation;
    match operation {
        Operation::Update { patch, .. } => patch_words(patch),
        Operation::Stage { mode, .. } => format!("stage for {} deletion", mode.as_str()),
        Operation::Undo { change } => format!("undo change {change}"),
        Operation::Run { manifest, .. } => format!("run staged deletion {manifest}"),
        Operation::Rule { manifest } => format!("carry out rule manifest {manifest}"),
        Operation::Draft { .. } => "save a draft".to_string(),
    }
}

/// What a patch does: "mark read, add tags A, B, move to archive"; "stage for trash
/// deletion".
pub fn patch_words(patch: &Patch) -> String {
    if let Some(mode) = patch.delete {
        return format!("stage for {} deletion", mode.as_str());
    }
    let mut words = Vec::new();
    match patch.read {
        Some(true) => words.push("mark read".to_string()),
        Some(false) => words.push("mark unread".to_string()),
        None => {}
    }
    match patch.flagged {
        Some(true) => words.push("flag".to_string()),
        Some(false) => words.push("unflag".to_string()),
        None => {}
    }
    for (tags, verb) in [(&patch.add_tags, "add"), (&patch.remove_tags, "remove")] {
        match tags.as_slice() {
            [] => {}
            [one] => words.push(format!("{verb} tag {one}")),
            many => words.push(format!("{verb} tags {}", many.join(", "))),
        }
    }
    if let Some(target) = &patch.move_to {
        words.push(format!("move to {target}"));
    }
    match words.is_empty() {
        true => "no change".to_string(),
        false => words.join(", "),
    }
}

/// How the messages were chosen: `query "from:alice"`, `3 ids`; nothing for an undo or a
/// deletion's run, whose words say it.
pub fn selection_words(selection: &Chosen) -> Option<String> {
    match selection {
        Chosen::Query { query } => Some(format!("query {query:?}")),
        Chosen::Ids { ids } if ids.len() == 1 => Some("1 id".to_string()),
        Chosen::Ids { ids } => Some(format!("{} ids", ids.len())),
        Chosen::UndoOf { .. } | Chosen::Manifest { .. } | Chosen::RuleManifest { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked(v: serde_json::Value) -> Asked {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn changes_read_as_what_they_asked() {
        let patch = json!({"read": true, "flagged": false, "add_tags": ["Finance"],
            "remove_tags": ["a", "b"], "move_to": "archive"});
        assert_eq!(
            asked_words(&asked(patch)),
            "mark read, unflag, add tag Finance, remove tags a, b, move to archive"
        );
        assert_eq!(asked_words(&asked(json!({"undo_of": 7}))), "undo change 7");
        assert_eq!(
            asked_words(&asked(json!({"delete": "trash"}))),
            "delete (trash)"
        );
        let staged = Patch {
            delete: Some(mailbroker_core::DeleteMode::Permanent),
            ..Patch::default()
        };
        assert_eq!(patch_words(&staged), "stage for permanent deletion");
        assert_eq!(patch_words(&Patch::default()), "no change");
        let chosen = |v: serde_json::Value| -> Chosen { serde_json::from_value(v).unwrap() };
        assert_eq!(
            selection_words(&chosen(json!({"ids": [1, 2]}))).unwrap(),
            "2 ids"
        );
        assert_eq!(
            selection_words(&chosen(json!({"query": "from:a"}))).unwrap(),
            "query \"from:a\""
        );
        assert_eq!(selection_words(&chosen(json!({"undo_of": 4}))), None);
        assert_eq!(selection_words(&chosen(json!({"manifest": 2}))), None);
    }

    #[test]
    fn a_journal_patch_keeps_its_json() {
        for stored in [
            json!({"undo_of": 3}),
            json!({"delete": "permanent"}),
            json!({"read": true, "add_tags": ["A"]}),
        ] {
            assert_eq!(serde_json::to_value(asked(stored.clone())).unwrap(), stored);
        }
        assert!(asked(json!({"delete": "permanent"})).is_permanent_deletion());
        assert!(!asked(json!({"delete": "trash"})).is_permanent_deletion());
        assert!(matches!(asked(json!({"flagged": true})), Asked::Patch(_)));
    }
}
