//! Graph v1.0 as Microsoft publishes it: the entity and complex types of
//! `@microsoft/microsoft-graph-types` (`microsoft-graph.d.ts`), read at start. Every name a
//! request puts in `$select`, `$expand`, `$filter` or `$orderby`, and every property of a
//! PATCH or POST body, must be a property of the v1.0 type its endpoint serves; otherwise
//! the request is refused with Graph's own status and error (a beta-only property such as
//! `unsubscribeEnabled` is answered `400 RequestBroker--ParseUri`, as v1.0 answers it).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// One `export interface`: its parent and its own properties.
struct Interface {
    parent: Option<String>,
    props: HashMap<String, Prop>,
}

/// A property's type: a type name (`string`, `boolean`, `number`, `any`, an interface or an
/// enum alias) and whether it is a list.
#[derive(Clone)]
struct Prop {
    ty: String,
}

/// Graph v1.0's types, by their TypeScript names (`Message`, `MailFolder`).
pub struct Schema {
    interfaces: HashMap<String, Interface>,
    /// String enums (`FollowupFlagStatus`) and their values.
    enums: HashMap<String, Vec<String>>,
}

/// A request Graph would refuse: status, error code and message, as Graph words them.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

/// The v1.0 schema, read once per process from the published package.
pub fn v1() -> std::io::Result<Arc<Schema>> {
    static SCHEMA: OnceLock<Arc<Schema>> = OnceLock::new();
    if let Some(s) = SCHEMA.get() {
        return Ok(s.clone());
    }
    let path = mailbroker_mock_server::published::graph_types()?;
    let schema = Arc::new(Schema::parse(&std::fs::read_to_string(path)?));
    if !schema.interfaces.contains_key("Message") {
        return Err(std::io::Error::other(
            "microsoft-graph.d.ts holds no Message type",
        ));
    }
    Ok(SCHEMA.get_or_init(|| schema).clone())
}

/// The OData name Graph's errors use: `Message` → `microsoft.graph.message`.
fn odata_name(ty: &str) -> String {
    let mut chars = ty.chars();
    let first = chars.next().map(|c| c.to_ascii_lowercase());
    format!(
        "microsoft.graph.{}{}",
        first.unwrap_or_default(),
        chars.as_str()
    )
}

fn parse_uri(ty: &str, name: &str) -> Refusal {
    Refusal {
        status: 400,
        code: "RequestBroker--ParseUri",
        message: format!(
            "Could not find a property named '{name}' on type '{}'.",
            odata_name(ty)
        ),
    }
}

/// The element type of a TypeScript property type: `NullableOption<Recipient[]>` → `Recipient`.
fn element_type(ts: &str) -> String {
    let t = ts.trim();
    let t = t
        .strip_prefix("NullableOption<")
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(t);
    t.trim_end_matches("[]").trim().to_string()
}

impl Schema {
    /// Reads the top-level `export interface` and `export type X = "a" | "b"` declarations
    /// (the namespaces after them are other workloads').
    pub fn parse(text: &str) -> Schema {
        let mut interfaces = HashMap::new();
        let mut enums = HashMap::new();
        let mut current: Option<(String, Interface)> = None;
        for line in text.lines() {
            if let Some(head) = line.strip_prefix("export interface ") {
                let head = head.trim_end_matches('{').trim();
                let (name, parent) = match head.split_once(" extends ") {
                    Some((n, p)) => (n.trim(), Some(p.trim().to_string())),
                    None => (head, None),
                };
                current = Some((
                    name.to_string(),
                    Interface {
                        parent,
                        props: HashMap::new(),
                    },
                ));
                continue;
            }
            if let Some(alias) = line.strip_prefix("export type ")
                && let Some((name, values)) = alias.split_once(" = ")
                && values.trim_start().starts_with('"')
            {
                let values = values
                    .trim_end_matches(';')
                    .split('|')
                    .map(|v| v.trim().trim_matches('"').to_string())
                    .collect();
                enums.insert(name.trim().to_string(), values);
                continue;
            }
            let Some((_, iface)) = current.as_mut() else {
                continue;
            };
            if line == "}" {
                if let Some((name, iface)) = current.take() {
                    interfaces.insert(name, iface);
                }
                continue;
            }
            let trimmed = line.trim();
            if trimmed.starts_with("//") || trimmed.starts_with("/*") || trimmed.starts_with('*') {
                continue;
            }
            if let Some((name, ty)) = trimmed.trim_end_matches(';').split_once(':') {
                let name = name.trim().trim_end_matches('?');
                iface.props.insert(
                    name.to_string(),
                    Prop {
                        ty: element_type(ty),
                    },
                );
            }
        }
        Schema { interfaces, enums }
    }

    /// Property `name` of type `ty`, its own or inherited.
    fn property(&self, ty: &str, name: &str) -> Option<&Prop> {
        let mut at = self.interfaces.get(ty);
        while let Some(iface) = at {
            if let Some(p) = iface.props.get(name) {
                return Some(p);
            }
            at = iface.parent.as_deref().and_then(|p| self.interfaces.get(p));
        }
        None
    }

    /// Whether `ty` is an entity (has an id of its own), so a property of its type is a
    /// navigation property that `$expand` may name.
    fn is_entity(&self, ty: &str) -> bool {
        let mut at = Some(ty);
        while let Some(name) = at {
            if name == "Entity" {
                return true;
            }
            at = self.interfaces.get(name).and_then(|i| i.parent.as_deref());
        }
        false
    }

    /// Whether a type of this name is declared at all (the mock's own routes name types;
    /// a typo there would make every check pass).
    pub fn knows(&self, ty: &str) -> bool {
        self.interfaces.contains_key(ty)
    }

    /// The request's OData query options for an endpoint serving `ty`: every name in
    /// `$select`, `$expand` (and the options nested in it), `$filter` and `$orderby` must be
    /// a property of that type; other system options must be ones Graph has.
    pub fn check_query(&self, ty: &str, query: &HashMap<String, String>) -> Result<(), Refusal> {
        for (option, value) in query {
            match option.as_str() {
                "$select" => self.check_select(ty, value)?,
                "$expand" => self.check_expand(ty, value)?,
                "$filter" => self.check_filter(ty, value)?,
                "$orderby" => self.check_orderby(ty, value)?,
                "$top" | "$skip" | "$count" | "$search" | "$skiptoken" | "$deltatoken"
                | "$format" => {}
                other if other.starts_with('$') => {
                    return Err(Refusal {
                        status: 400,
                        code: "BadRequest",
                        message: format!("Query option '{other}' is not supported."),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn check_select(&self, ty: &str, list: &str) -> Result<(), Refusal> {
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if self.property(ty, name).is_none() {
                return Err(parse_uri(ty, name));
            }
        }
        Ok(())
    }

    /// `a,b($filter=…;$select=…)`: each item a navigation property, its nested options
    /// checked against the property's own type.
    fn check_expand(&self, ty: &str, list: &str) -> Result<(), Refusal> {
        for item in split_top(list, ',') {
            let (name, nested) = match item.find('(') {
                Some(open) => (&item[..open], item[open + 1..].strip_suffix(')')),
                None => (item, None),
            };
            let name = name.trim();
            let Some(prop) = self.property(ty, name) else {
                return Err(parse_uri(ty, name));
            };
            if !self.is_entity(&prop.ty) {
                return Err(Refusal {
                    status: 400,
                    code: "RequestBroker--ParseUri",
                    message: format!(
                        "Property '{name}' on type '{}' is not a navigation property or complex property. Only navigation properties can be expanded.",
                        odata_name(ty)
                    ),
                });
            }
            let options: HashMap<String, String> = nested
                .map(|n| {
                    split_top(n, ';')
                        .into_iter()
                        .filter_map(|o| o.split_once('='))
                        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            self.check_query(&prop.ty, &options)?;
        }
        Ok(())
    }

    /// The property paths a `$filter` names (`flag/flagStatus eq 'flagged'`,
    /// `id eq 'String {…} Name List-Id'`): literals, operators and function names aside.
    fn check_filter(&self, ty: &str, expr: &str) -> Result<(), Refusal> {
        for path in filter_paths(expr) {
            self.check_path(ty, &path)?;
        }
        Ok(())
    }

    fn check_orderby(&self, ty: &str, list: &str) -> Result<(), Refusal> {
        for item in list.split(',') {
            if let Some(path) = item.split_whitespace().next() {
                self.check_path(ty, path)?;
            }
        }
        Ok(())
    }

    fn check_path(&self, ty: &str, path: &str) -> Result<(), Refusal> {
        let mut at = ty.to_string();
        for segment in path.split('/') {
            match self.property(&at, segment) {
                Some(p) => at = p.ty.clone(),
                None => return Err(parse_uri(&at, segment)),
            }
        }
        Ok(())
    }

    /// A PATCH or POST body for type `ty`: every property (nested ones too) must be one the
    /// type has, and a string enum's value one of its values. `@odata.` annotations (the
    /// SDK's `@odata.type`) are OData's, not properties.
    pub fn check_body(&self, ty: &str, body: &Value) -> Result<(), Refusal> {
        match body {
            Value::Object(fields) => {
                for (name, value) in fields {
                    if name.starts_with("@odata.") {
                        continue;
                    }
                    let Some(prop) = self.property(ty, name) else {
                        return Err(Refusal {
                            status: 400,
                            code: "RequestBodyRead",
                            message: format!(
                                "The property '{name}' does not exist on type '{}'. Make sure to only use property names that are defined by the type or mark the type as open type.",
                                odata_name(ty)
                            ),
                        });
                    };
                    self.check_value(&prop.ty, value)?;
                }
                Ok(())
            }
            Value::Null => Ok(()),
            _ => Err(Refusal {
                status: 400,
                code: "RequestBodyRead",
                message: "The request body must be a JSON object.".into(),
            }),
        }
    }

    fn check_value(&self, ty: &str, value: &Value) -> Result<(), Refusal> {
        match value {
            Value::Array(items) => items.iter().try_for_each(|v| self.check_value(ty, v)),
            Value::Object(_) if self.interfaces.contains_key(ty) => self.check_body(ty, value),
            Value::String(s) => match self.enums.get(ty) {
                Some(values) if !values.contains(s) => Err(Refusal {
                    status: 400,
                    code: "RequestBodyRead",
                    message: format!("Requested value '{s}' was not found."),
                }),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// `s` split at `sep` outside parentheses and quotes.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut out = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            c if c == sep && !quoted && depth == 0 => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The property paths in a `$filter` expression.
fn filter_paths(expr: &str) -> Vec<String> {
    const WORDS: [&str; 16] = [
        "eq", "ne", "gt", "ge", "lt", "le", "and", "or", "not", "has", "in", "true", "false",
        "null", "add", "sub",
    ];
    let mut out = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A string literal; '' inside is a quote.
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' && chars.get(i + 1) != Some(&'\'') {
                    break;
                }
                i += if chars[i] == '\'' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '/' || chars[i] == '_')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            // A function (`contains(`) or a lambda's variable (`x:`) is not a property.
            if !WORDS.contains(&word.as_str()) && !matches!(next, Some('(') | Some(':')) {
                out.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        "export type FollowupFlagStatus = \"notFlagged\" | \"complete\" | \"flagged\";
export interface Entity {
    // The id.
    id?: string;
}
export interface OutlookItem extends Entity {
    categories?: NullableOption<string[]>;
}
export interface Message extends OutlookItem {
    /**
     * A comment.
     */
    flag?: NullableOption<FollowupFlag>;
    isRead?: NullableOption<boolean>;
    singleValueExtendedProperties?: NullableOption<SingleValueLegacyExtendedProperty[]>;
}
export interface SingleValueLegacyExtendedProperty extends Entity {
    value?: NullableOption<string>;
}
export interface FollowupFlag {
    flagStatus?: NullableOption<FollowupFlagStatus>;
}
";

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_checked_against_the_type_and_its_parents() {
        let s = Schema::parse(SAMPLE);
        assert!(
            s.check_query("Message", &query(&[("$select", "id,categories,isRead")]))
                .is_ok()
        );
        let refused = s
            .check_query(
                "Message",
                &query(&[("$select", "isRead,unsubscribeEnabled")]),
            )
            .unwrap_err();
        assert_eq!(refused.code, "RequestBroker--ParseUri");
        assert_eq!(
            refused.message,
            "Could not find a property named 'unsubscribeEnabled' on type 'microsoft.graph.message'."
        );
        let expand = "singleValueExtendedProperties($filter=id eq 'String {x} Name List-Id' or id eq 'a, b')";
        assert!(
            s.check_query("Message", &query(&[("$expand", expand)]))
                .is_ok()
        );
        let nested = "singleValueExtendedProperties($filter=name eq 'x')";
        assert!(
            s.check_query("Message", &query(&[("$expand", nested)]))
                .is_err()
        );
        assert!(
            s.check_query("Message", &query(&[("$expand", "flag")]))
                .is_err()
        );
        assert!(
            s.check_query(
                "Message",
                &query(&[("$filter", "flag/flagStatus eq 'flagged'")])
            )
            .is_ok()
        );
        assert!(
            s.check_query("Message", &query(&[("$filter", "flag/status eq 'x'")]))
                .is_err()
        );
        assert!(
            s.check_query("Message", &query(&[("$orderby", "isRead desc")]))
                .is_ok()
        );
        assert!(
            s.check_query("Message", &query(&[("$bogus", "1")]))
                .is_err()
        );
    }

    #[test]
    fn bodies_hold_only_the_types_properties_and_enum_values() {
        let s = Schema::parse(SAMPLE);
        let ok = serde_json::json!({"@odata.type": "#microsoft.graph.message", "isRead": true,
            "flag": {"flagStatus": "flagged"}, "categories": ["a"]});
        assert!(s.check_body("Message", &ok).is_ok());
        let unknown = s
            .check_body(
                "Message",
                &serde_json::json!({"isRead": true, "importance": "high"}),
            )
            .unwrap_err();
        assert_eq!(unknown.code, "RequestBodyRead");
        assert!(
            unknown.message.contains("'importance'"),
            "{}",
            unknown.message
        );
        assert!(
            s.check_body("Message", &serde_json::json!({"flag": {"status": "x"}}))
                .is_err()
        );
        assert!(
            s.check_body(
                "Message",
                &serde_json::json!({"flag": {"flagStatus": "urgent"}})
            )
            .is_err()
        );
    }
}
