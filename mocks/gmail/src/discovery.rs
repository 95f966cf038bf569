//! Gmail v1 as Google publishes it: the discovery document `gmail.v1.json` shipped in
//! `google-api-python-client`, read at start. Every API request must name a method of the
//! document (its HTTP method and path), carry only that method's query parameters (and the
//! document's global ones) with values of their type and enum, a body whose every field is
//! in the method's request schema, and a token holding one of the method's scopes; otherwise
//! it is refused with Google's error, as Gmail refuses it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

/// The scope whose holder may not use some parameters and values: the document says so in
/// their descriptions ("cannot be used when accessing the api using the gmail.metadata
/// scope").
const METADATA_SCOPE: &str = "https://www.googleapis.com/auth/gmail.metadata";
const METADATA_LIMIT: &str = "cannot be used when accessing the api using the gmail.metadata scope";

/// One method of the document.
struct Method {
    http: String,
    /// The path's segments after the root: `gmail`, `v1`, `users`, `{userId}`, …
    segments: Vec<String>,
    params: Map<String, Value>,
    request: Option<String>,
    scopes: Vec<String>,
    /// Its media upload path's segments (`upload`, `gmail`, …), where it takes media.
    upload: Option<Vec<String>>,
    /// The media types an upload may carry (`message/*`).
    accept: Vec<String>,
}

/// Gmail v1's discovery document, as the mock checks requests against it.
pub struct Discovery {
    methods: Vec<Method>,
    global: Map<String, Value>,
    schemas: Map<String, Value>,
}

/// A request Gmail would refuse: status, reason and message as Google's envelope carries
/// them; `wire` when the request itself is undocumented (not merely a grant too small).
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
    pub wire: bool,
}

fn invalid(message: String) -> Refusal {
    Refusal {
        status: 400,
        reason: "invalid",
        message,
        wire: true,
    }
}

/// The document, read once per process from the published package.
pub fn v1() -> std::io::Result<Arc<Discovery>> {
    static DOCUMENT: OnceLock<Arc<Discovery>> = OnceLock::new();
    if let Some(d) = DOCUMENT.get() {
        return Ok(d.clone());
    }
    let path = mailbroker_mock_server::published::gmail_discovery()?;
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let discovery = Arc::new(Discovery::parse(&json));
    if discovery.methods.is_empty() {
        return Err(std::io::Error::other("gmail.v1.json holds no methods"));
    }
    Ok(DOCUMENT.get_or_init(|| discovery).clone())
}

fn collect(resource: &Value, out: &mut Vec<Method>) {
    for method in resource["methods"]
        .as_object()
        .into_iter()
        .flat_map(Map::values)
    {
        let (Some(http), Some(path)) = (method["httpMethod"].as_str(), method["path"].as_str())
        else {
            continue;
        };
        out.push(Method {
            http: http.to_string(),
            segments: path.split('/').map(str::to_string).collect(),
            params: method["parameters"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
            request: method["request"]["$ref"].as_str().map(str::to_string),
            scopes: method["scopes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some(s.as_str()?.to_string()))
                .collect(),
            upload: (method["mediaUpload"]["protocols"]["simple"]["path"].as_str()).map(|p| {
                p.trim_start_matches('/')
                    .split('/')
                    .map(str::to_string)
                    .collect()
            }),
            accept: (method["mediaUpload"]["accept"]
                .as_array()
                .into_iter()
                .flatten())
            .filter_map(|a| Some(a.as_str()?.to_string()))
            .collect(),
        });
    }
    for child in resource["resources"]
        .as_object()
        .into_iter()
        .flat_map(Map::values)
    {
        collect(child, out);
    }
}

/// Whether a request path segment fills a document segment: a literal, `{name}`, or
/// `{name}:verb` (a custom method).
fn fills(template: &str, segment: &str) -> bool {
    match template.find('{') {
        None => template == segment,
        Some(open) => {
            let close = template.find('}').unwrap_or(template.len() - 1);
            let (before, after) = (&template[..open], &template[close + 1..]);
            segment.len() > before.len() + after.len()
                && segment.starts_with(before)
                && segment.ends_with(after)
        }
    }
}

impl Discovery {
    pub fn parse(document: &Value) -> Discovery {
        let mut methods = Vec::new();
        collect(document, &mut methods);
        Discovery {
            methods,
            global: document["parameters"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
            schemas: document["schemas"].as_object().cloned().unwrap_or_default(),
        }
    }

    /// Checks one API request: `path` as sent (`/gmail/v1/users/me/messages/abc`), its query
    /// pairs, its JSON body (`Null` for none) and the scopes its token holds.
    pub fn check(
        &self,
        http: &str,
        path: &str,
        query: &[(String, String)],
        body: &Value,
        scopes: &[String],
    ) -> Result<(), Refusal> {
        let method = self.method(http, path)?;
        if !method.scopes.iter().any(|s| scopes.contains(s)) {
            return Err(Refusal {
                status: 403,
                reason: "insufficientPermissions",
                message: "Request had insufficient authentication scopes.".into(),
                wire: false,
            });
        }
        let metadata_only = scopes
            .iter()
            .all(|s| s == METADATA_SCOPE || !method.scopes.contains(s));
        self.check_query(method, query, metadata_only)?;
        match (&method.request, body) {
            (_, Value::Null) => Ok(()),
            (Some(schema), body) => self.check_schema(&Value::String(schema.clone()), body, ""),
            (None, _) => Err(invalid(format!(
                "Invalid JSON payload received. {http} {path} takes no request body."
            ))),
        }
    }

    /// The method `http` `path` names: by its path, or by its media upload path.
    fn method(&self, http: &str, path: &str) -> Result<&Method, Refusal> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let uploading = path.starts_with("/upload/");
        let template = |m: &Method| -> Option<Vec<String>> {
            match uploading {
                true => m.upload.clone(),
                false => Some(m.segments.clone()),
            }
        };
        self.methods
            .iter()
            .filter(|m| m.http == http)
            .filter_map(|m| Some((m, template(m)?)))
            .filter(|(_, t)| t.len() == segments.len())
            .filter(|(_, t)| t.iter().zip(&segments).all(|(t, s)| fills(t, s)))
            // A literal beats a parameter (`messages/batchModify` is not `messages/{id}`).
            .max_by_key(|(_, t)| t.iter().filter(|t| !t.contains('{')).count())
            .map(|(m, _)| m)
            .ok_or_else(|| Refusal {
                status: 404,
                reason: "notFound",
                message: format!("{http} {path} is not a method of Gmail v1"),
                wire: true,
            })
    }

    /// Checks the media of an upload: a type the method accepts (`message/*`).
    pub fn check_media(&self, http: &str, path: &str, media_type: &str) -> Result<(), Refusal> {
        let method = self.method(http, path)?;
        let accepted = method.accept.iter().any(|a| match a.strip_suffix('*') {
            Some(prefix) => media_type.starts_with(prefix),
            None => a == media_type,
        });
        match accepted {
            true => Ok(()),
            false => Err(invalid(format!(
                "Media type '{media_type}' is not supported. Valid media types: {:?}",
                method.accept
            ))),
        }
    }

    fn check_query(
        &self,
        method: &Method,
        query: &[(String, String)],
        metadata_only: bool,
    ) -> Result<(), Refusal> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (name, value) in query {
            let spec = method
                .params
                .get(name)
                .filter(|p| p["location"] == "query")
                .or_else(|| self.global.get(name))
                .ok_or_else(|| {
                    invalid(format!(
                        "Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query parameter. Field '{name}' could not be found in request message."
                    ))
                })?;
            let seen = counts.entry(name).or_default();
            *seen += 1;
            if *seen > 1 && spec["repeated"] != true {
                return Err(invalid(format!("Parameter '{name}' is not repeated.")));
            }
            check_scalar(spec, value)
                .map_err(|_| invalid(format!("Invalid value at '{name}', \"{value}\"")))?;
            if metadata_only && limited_to_full_scopes(spec, value) {
                return Err(Refusal {
                    status: 403,
                    reason: "forbidden",
                    message: format!("Metadata scope does not support '{name}' parameter"),
                    wire: false,
                });
            }
        }
        Ok(())
    }

    /// `value` against a schema (a `$ref` name as a JSON string, or an inline schema): every
    /// object field one the schema has, every enum value one it lists.
    fn check_schema(&self, schema: &Value, value: &Value, at: &str) -> Result<(), Refusal> {
        let schema = match schema {
            Value::String(name) => self.schemas.get(name).unwrap_or(&Value::Null),
            other => match other["$ref"].as_str() {
                Some(name) => self.schemas.get(name).unwrap_or(&Value::Null),
                None => other,
            },
        };
        match value {
            Value::Object(fields) => {
                let properties = schema["properties"].as_object();
                let additional = &schema["additionalProperties"];
                for (name, field) in fields {
                    let inner = match properties.and_then(|p| p.get(name)) {
                        Some(spec) => spec,
                        None if additional.is_object() => additional,
                        None => {
                            return Err(invalid(format!(
                                "Invalid JSON payload received. Unknown name \"{name}\"{}: Cannot find field.",
                                if at.is_empty() {
                                    String::new()
                                } else {
                                    format!(" at '{at}'")
                                }
                            )));
                        }
                    };
                    let path = if at.is_empty() {
                        name.clone()
                    } else {
                        format!("{at}.{name}")
                    };
                    self.check_schema(inner, field, &path)?;
                }
                Ok(())
            }
            Value::Array(items) => items
                .iter()
                .try_for_each(|item| self.check_schema(&schema["items"], item, at)),
            Value::String(s) => check_scalar(schema, s)
                .map_err(|_| invalid(format!("Invalid value at '{at}', \"{s}\""))),
            _ => Ok(()),
        }
    }
}

/// A scalar against its type and enum: an integer parses, a boolean is `true`/`false`, an
/// enum's value is listed.
fn check_scalar(spec: &Value, value: &str) -> Result<(), ()> {
    if let Some(values) = spec["enum"].as_array()
        && !values.iter().any(|v| v == value)
    {
        return Err(());
    }
    match spec["type"].as_str() {
        Some("integer") if value.parse::<i64>().is_err() => Err(()),
        Some("boolean") if !matches!(value, "true" | "false") => Err(()),
        _ => Ok(()),
    }
}

/// Whether the document says this parameter, or this value of it, cannot be used with the
/// metadata scope alone.
fn limited_to_full_scopes(spec: &Value, value: &str) -> bool {
    let said = |text: &Value| {
        text.as_str()
            .is_some_and(|t| t.to_lowercase().contains(METADATA_LIMIT))
    };
    if said(&spec["description"]) {
        return true;
    }
    let values = spec["enum"].as_array().into_iter().flatten();
    let descriptions = spec["enumDescriptions"].as_array().into_iter().flatten();
    values.zip(descriptions).any(|(v, d)| v == value && said(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discovery() -> Arc<Discovery> {
        v1().expect("Gmail's discovery document")
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const MODIFY: &str = "https://www.googleapis.com/auth/gmail.modify";

    #[test]
    fn methods_parameters_bodies_and_scopes_come_from_the_document() {
        let d = discovery();
        let scopes = vec![MODIFY.to_string()];
        let get = "/gmail/v1/users/me/messages/18c0";
        let ok = pairs(&[
            ("format", "metadata"),
            ("metadataHeaders", "From"),
            ("metadataHeaders", "To"),
            ("alt", "json"),
        ]);
        d.check("GET", get, &ok, &Value::Null, &scopes).unwrap();
        let bogus = d
            .check(
                "GET",
                get,
                &pairs(&[("fields2", "x")]),
                &Value::Null,
                &scopes,
            )
            .unwrap_err();
        assert_eq!((bogus.status, bogus.wire), (400, true));
        assert!(
            bogus.message.contains("Unknown name \"fields2\""),
            "{}",
            bogus.message
        );
        assert!(
            d.check(
                "GET",
                get,
                &pairs(&[("format", "everything")]),
                &Value::Null,
                &scopes
            )
            .is_err()
        );
        assert!(
            d.check(
                "GET",
                get,
                &pairs(&[("format", "raw"), ("format", "full")]),
                &Value::Null,
                &scopes
            )
            .is_err()
        );

        let batch = "/gmail/v1/users/me/messages/batchModify";
        let body = serde_json::json!({"ids": ["a"], "addLabelIds": ["STARRED"]});
        d.check("POST", batch, &[], &body, &scopes).unwrap();
        let extra = serde_json::json!({"ids": ["a"], "addLabels": ["STARRED"]});
        let refused = d.check("POST", batch, &[], &extra, &scopes).unwrap_err();
        assert!(
            refused.message.contains("Unknown name \"addLabels\""),
            "{}",
            refused.message
        );
        let nested =
            serde_json::json!({"name": "x", "color": {"textColor": "#000000", "shade": 1}});
        let labels = "/gmail/v1/users/me/labels";
        assert!(d.check("POST", labels, &[], &nested, &scopes).is_err());

        assert_eq!(
            d.check(
                "GET",
                "/gmail/v1/users/me/nothing",
                &[],
                &Value::Null,
                &scopes
            )
            .unwrap_err()
            .status,
            404
        );
        assert_eq!(
            d.check("DELETE", get, &[], &Value::Null, &scopes)
                .unwrap_err()
                .status,
            403,
            "delete needs the full scope"
        );
        let delete = d
            .check(
                "POST",
                "/gmail/v1/users/me/messages/batchDelete",
                &[],
                &serde_json::json!({"ids": []}),
                &scopes,
            )
            .unwrap_err();
        assert_eq!((delete.status, delete.wire), (403, false));

        let metadata = vec![METADATA_SCOPE.to_string()];
        let list = "/gmail/v1/users/me/messages";
        d.check(
            "GET",
            list,
            &pairs(&[("labelIds", "INBOX")]),
            &Value::Null,
            &metadata,
        )
        .unwrap();
        assert_eq!(
            d.check("GET", list, &pairs(&[("q", "x")]), &Value::Null, &metadata)
                .unwrap_err()
                .status,
            403
        );
        assert!(
            d.check(
                "GET",
                get,
                &pairs(&[("format", "full")]),
                &Value::Null,
                &metadata
            )
            .is_err()
        );
        d.check(
            "GET",
            get,
            &pairs(&[("format", "metadata")]),
            &Value::Null,
            &metadata,
        )
        .unwrap();
    }
}
