//! The schemas in `tools/list`, written for the context they are read in: a model reads
//! every tool's schemas before every conversation, so they carry what a caller needs (names,
//! JSON types, one line each) and nothing a generator adds for itself (`$schema`, `$defs`,
//! `format`, nullable unions). The arguments a call brings are checked against the same
//! compact schema, so a wrong name or type is refused naming the argument.

use std::sync::Arc;

use rmcp::handler::server::common::schema_for_output;
use rmcp::model::{JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use mailbroker_core::Error;

/// The output schema of a tool answering `T`: its top-level fields by name (any value), only
/// `success` required. An error result (`success: false`, `error`, `error_type`,
/// `next_step`) satisfies it too, since a client built on the TypeScript SDK validates
/// error results against it as well, and throws on a mismatch instead of showing the error.
/// The descriptions live in the tool's description: the full nested schemas were three
/// quarters of `tools/list`.
pub fn output_schema<T: JsonSchema + std::any::Any>() -> Arc<JsonObject> {
    let full = schema_for_output::<T>();
    let mut properties = Map::new();
    if let Some(Value::Object(fields)) = full.get("properties") {
        // Named only: the descriptions say what each holds, and the types of eleven tools'
        // fields cost every conversation more than a tool (BENCHMARKS.md, MCP).
        for name in fields.keys() {
            properties.insert(name.clone(), json!({}));
        }
    }
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), json!(["success"]));
    Arc::new(schema)
}

/// An input schema as generated (draft 2020-12, `Option<T>` as `[T, "null"]`, enums behind
/// `$ref`) made compact: references inlined, a left-out argument's `null` dropped (leaving
/// it out says the same), `format` and a `minimum` of 0 dropped (an unsigned argument refuses
/// a negative number when it is read), and
/// doc-comment line breaks joined.
pub fn compact_input(schema: &JsonObject) -> JsonObject {
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = JsonObject::new();
    for (key, value) in schema {
        match key.as_str() {
            "$schema" | "$defs" | "title" => {}
            "properties" => {
                let fields = value.as_object().into_iter().flatten();
                let compact =
                    fields.map(|(name, field)| (name.clone(), compact_field(field, &defs)));
                out.insert(key.clone(), Value::Object(compact.collect()));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

fn compact_field(field: &Value, defs: &Value) -> Value {
    let Some(object) = field.as_object() else {
        return field.clone();
    };
    let mut out = Map::new();
    // What a union with `null` or a reference stands for comes first; the field's own
    // description wins over the referenced type's.
    if let Some(inner) = non_null_branch(object, defs)
        && let Value::Object(inner) = compact_field(&inner, defs)
    {
        out.extend(inner);
    }
    for (key, value) in object {
        match key.as_str() {
            "anyOf" | "$ref" | "format" | "title" => {}
            // A flag left out is false, a list left out empty, a count not below zero:
            // saying so costs every conversation tokens.
            "default" if value == &json!(false) || value == &json!([]) => {}
            "minimum" if value == &json!(0) => {}
            "type" => {
                out.insert(key.clone(), without_null(value));
            }
            "description" => {
                let text = value.as_str().unwrap_or_default().replace('\n', " ");
                out.insert(key.clone(), Value::String(text));
            }
            "items" => {
                out.insert(key.clone(), compact_field(value, defs));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// The schema a `$ref` or an `anyOf` stands for once `null` is set aside: the one branch
/// left, or the JSON types of several (`["integer", "string"]`).
fn non_null_branch(object: &Map<String, Value>, defs: &Value) -> Option<Value> {
    if let Some(Value::String(reference)) = object.get("$ref") {
        let name = reference.strip_prefix("#/$defs/")?;
        return defs.get(name).cloned();
    }
    let branches: Vec<Value> = object
        .get("anyOf")?
        .as_array()?
        .iter()
        .filter(|b| b.get("type") != Some(&json!("null")))
        .map(|b| compact_field(b, defs))
        .collect();
    match branches.as_slice() {
        [one] => Some(one.clone()),
        several => {
            let kinds: Vec<Value> = several
                .iter()
                .filter_map(|b| b.get("type").cloned())
                .collect();
            Some(json!({ "type": kinds }))
        }
    }
}

/// `["integer", "null"]` as `"integer"`; any other type as it is.
fn without_null(kind: &Value) -> Value {
    let Some(kinds) = kind.as_array() else {
        return kind.clone();
    };
    let rest: Vec<&Value> = kinds.iter().filter(|k| *k != "null").collect();
    match rest.as_slice() {
        [one] => (*one).clone(),
        _ => Value::Array(rest.into_iter().cloned().collect()),
    }
}

/// Annotations with only what differs from MCP's defaults (`readOnlyHint: false`,
/// `destructiveHint: true`, `idempotentHint: false`, `openWorldHint: true`), and without the
/// hints MCP says mean nothing for a read-only tool; `readOnlyHint` is always given.
pub fn compact_annotations(a: &ToolAnnotations) -> ToolAnnotations {
    let read_only = a.read_only_hint == Some(true);
    let writing = |hint: Option<bool>| hint.filter(|_| !read_only);
    ToolAnnotations::from_raw(
        a.title.clone(),
        Some(read_only),
        writing(a.destructive_hint.filter(|d| !d)),
        writing(a.idempotent_hint.filter(|i| *i)),
        a.open_world_hint.filter(|o| !o),
    )
}

/// Refuses an argument the tool does not take (a typo like `dryRun` would otherwise be
/// ignored, and a write would run for real), naming the closest one it does take; and an
/// argument of the wrong JSON type, naming it and the type it takes.
pub fn check_arguments(
    tool: &str,
    input_schema: &JsonObject,
    arguments: Option<&JsonObject>,
) -> Option<Error> {
    let empty = Map::new();
    let known = match input_schema.get("properties") {
        Some(Value::Object(p)) => p,
        _ => &empty,
    };
    for (name, value) in arguments? {
        let Some(field) = known.get(name) else {
            return Some(unknown_argument(tool, name, known));
        };
        if let Some(wanted) = mistyped(field, value) {
            return Some(
                Error::validation(format!(
                    "{tool}: {name} must be {wanted}, not {}",
                    json_type(value)
                ))
                .with_next_step(format!("pass {name} as {wanted}, or leave it out")),
            );
        }
    }
    None
}

fn unknown_argument(tool: &str, unknown: &str, known: &Map<String, Value>) -> Error {
    let closest = known
        .keys()
        .map(|k| (strsim::jaro_winkler(unknown, k), k))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.clone());
    let hint = closest.map_or(String::new(), |k| format!("; did you mean {k}?"));
    let names: Vec<&str> = known.keys().map(String::as_str).collect();
    Error::validation(format!("{tool} takes no argument {unknown:?}{hint}"))
        .with_next_step(format!("use only: {}", names.join(", ")))
}

/// What `value` should have been, when its JSON type is not one `field` takes (`null` is
/// taken by every argument: it means left out).
fn mistyped(field: &Value, value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    let kinds: Vec<&str> = match field.get("type")? {
        Value::String(k) => vec![k.as_str()],
        Value::Array(ks) => ks.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    if kinds.iter().any(|k| is_a(value, k)) {
        if let Some(allowed) = field.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Some(format!("one of {}", names.join(", ")));
        }
        if let (Some(least), Some(n)) =
            (field.get("minimum").and_then(Value::as_f64), value.as_f64())
            && n < least
        {
            return Some(format!("{} of at least {least}", with_article(kinds[0])));
        }
        let (Value::Array(items), Some(item)) = (value, field.get("items")) else {
            return None;
        };
        let kind = item.get("type").and_then(Value::as_str)?;
        return items
            .iter()
            .any(|v| mistyped(item, v).is_some())
            .then(|| format!("an array of {kind}s"));
    }
    let named: Vec<String> = kinds.iter().map(|k| with_article(k)).collect();
    Some(named.join(" or "))
}

fn is_a(value: &Value, kind: &str) -> bool {
    match kind {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

fn with_article(kind: &str) -> String {
    match kind {
        "integer" | "array" | "object" => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

fn json_type(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) if n.is_f64() => format!("the number {n}"),
        Value::Number(n) => format!("the integer {n}"),
        Value::String(s) if s.chars().count() > 40 => "a long string".into(),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, JsonSchema)]
    struct Out {
        success: bool,
        rows: Vec<Row>,
        next: Option<String>,
    }

    #[derive(serde::Serialize, JsonSchema)]
    struct Row {
        id: i64,
    }

    #[test]
    fn output_schemas_name_their_fields_and_require_only_success() {
        let schema = output_schema::<Out>();
        assert_eq!(schema["required"], json!(["success"]));
        let props = schema["properties"].as_object().unwrap();
        for name in ["success", "rows", "next"] {
            assert!(props.contains_key(name), "{name}: {schema:?}");
        }
        assert_eq!(props["rows"], json!({}));
        assert!(!serde_json::to_string(&*schema).unwrap().contains("$defs"));
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// Ids to change.
        ids: Vec<i64>,
        /// How many,
        /// at most.
        limit: Option<u32>,
        mode: Option<Mode>,
        cursor: Option<Cursor>,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Trash,
        Permanent,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Cursor {
        Number(u64),
        Text(String),
    }

    fn args_schema() -> JsonObject {
        let full = rmcp::handler::server::common::schema_for_type::<Args>();
        compact_input(&full)
    }

    #[test]
    fn input_schemas_lose_what_only_a_generator_needs() {
        let schema = args_schema();
        let text = serde_json::to_string(&schema).unwrap();
        for gone in ["$schema", "$defs", "$ref", "null", "format", "\\n"] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
        let props = &schema["properties"];
        assert_eq!(
            props["limit"],
            json!({"description": "How many, at most.", "type": "integer"})
        );
        assert_eq!(props["mode"]["enum"], json!(["trash", "permanent"]));
        assert_eq!(props["cursor"]["type"], json!(["integer", "string"]));
        assert_eq!(props["ids"]["items"], json!({"type": "integer"}));
        assert_eq!(schema["required"], json!(["ids"]));
    }

    fn check(args: Value) -> Option<Error> {
        let args: JsonObject = serde_json::from_value(args).unwrap();
        check_arguments("update_message", &args_schema(), Some(&args))
    }

    #[test]
    fn unknown_arguments_name_the_closest_known_one() {
        let e = check(json!({ "ids": [3], "limitt": 5 })).unwrap();
        assert_eq!(e.error_type(), "validation_error");
        assert!(e.message().contains("\"limitt\""), "{}", e.message());
        assert!(
            e.message().contains("did you mean limit?"),
            "{}",
            e.message()
        );
        assert!(check(json!({ "ids": [3], "limit": null })).is_none());
    }

    #[test]
    fn wrong_types_name_the_argument_and_the_type_it_takes() {
        let e = check(json!({ "ids": [3], "limit": "five" })).unwrap();
        assert_eq!(
            e.message(),
            "update_message: limit must be an integer, not the string \"five\""
        );
        let e = check(json!({ "ids": ["a"] })).unwrap();
        assert!(
            e.message().contains("ids must be an array of integers"),
            "{}",
            e.message()
        );
        let e = check(json!({ "ids": 3 })).unwrap();
        assert!(
            e.message()
                .contains("ids must be an array, not the integer 3"),
            "{}",
            e.message()
        );
        let e = check(json!({ "ids": [], "limit": 2.5 })).unwrap();
        assert!(
            e.message().contains("not the number 2.5"),
            "{}",
            e.message()
        );
        // A count below zero is refused where the arguments are read (an unsigned type).
        assert!(check(json!({ "ids": [], "limit": -5 })).is_none());
        let e = check(json!({ "ids": [], "mode": "bin" })).unwrap();
        assert_eq!(
            e.message(),
            "update_message: mode must be one of \"trash\", \"permanent\", not the string \"bin\""
        );
        assert!(check(json!({ "ids": [1], "cursor": "20" })).is_none());
        assert!(check(json!({ "ids": [1], "cursor": 20, "mode": "trash" })).is_none());
    }

    #[test]
    fn annotations_keep_only_what_differs_from_the_defaults() {
        let write = ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(true)
            .open_world(true);
        let compact = compact_annotations(&write);
        assert_eq!(
            serde_json::to_value(&compact).unwrap(),
            json!({"readOnlyHint": false, "idempotentHint": true})
        );
        let local = ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        assert_eq!(
            serde_json::to_value(compact_annotations(&local)).unwrap(),
            json!({"readOnlyHint": true, "openWorldHint": false})
        );
    }
}
