//! `save_attachments`: attachments saved into the one directory the person configured
//! (`--attachments-dir`, else the home's `mcp attachments-dir`), each answered as a `resource_link` (`mailbroker://attachment/NAME`)
//! that `resources/read` serves from that directory alone, within `MAX_READ`, so a client
//! reads a file when it needs it instead of receiving it inline.

use std::path::{Path, PathBuf};

use mailbroker_core::{Error, Result};
use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shape::{Brief, success};
use crate::attachments::{self, SaveRequest};

/// The largest file `resources/read` serves.
pub const MAX_READ: u64 = 10 * 1024 * 1024;
const SCHEME: &str = "mailbroker://attachment/";
/// The home setting a person makes with `mailbroker mcp attachments-dir DIR`.
const SETTING: &str = "attachments_dir";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SaveArgs {
    /// 1 to 20 message ids.
    pub ids: Vec<i64>,
    /// One part, as get_messages lists it.
    pub part: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SavedView {
    pub id: i64,
    pub part: String,
    pub path: String,
    pub uri: String,
    pub size: u64,
}

#[derive(Debug, Serialize)]
pub struct FailedView {
    pub id: i64,
    pub error_type: &'static str,
    pub error: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SavedOut {
    pub success: bool,
    #[schemars(with = "Vec<serde_json::Value>")]
    pub saved: Vec<SavedView>,
    #[schemars(with = "Vec<serde_json::Value>")]
    pub failed: Vec<FailedView>,
}

impl Brief for SavedOut {
    fn brief(&self) -> String {
        let failed = match self.failed.len() {
            0 => String::new(),
            n => format!("; {n} message(s) failed"),
        };
        format!("saved {} file(s){failed}", self.saved.len())
    }
}

fn unconfigured() -> Error {
    Error::unsupported("no directory to save attachments in was configured").with_next_step(
        "ask the user to run: mailbroker mcp attachments-dir DIR (or to start the server \
         with --attachments-dir DIR), or to save them: mailbroker attachments ID --to DIR",
    )
}

/// Where attachments go: the server's own directory (`--attachments-dir`), else the one the
/// person set for the home, read at each call so a change needs no restart.
pub async fn directory(store: &crate::store::Store, flag: Option<&Path>) -> Result<PathBuf> {
    match flag {
        Some(dir) => Ok(dir.to_path_buf()),
        None => home_directory(store).await?.ok_or_else(unconfigured),
    }
}

/// Sets the home's attachments directory (an existing directory, kept as its absolute path),
/// or clears it (`None`); the directory now set.
pub async fn set_directory(
    store: &crate::store::Store,
    dir: Option<&Path>,
) -> Result<Option<PathBuf>> {
    let absolute = match dir {
        None => None,
        Some(dir) => {
            let absolute = (dir.canonicalize().ok())
                .filter(|d| d.is_dir())
                .ok_or_else(|| {
                    Error::validation(format!("{} is not a directory", dir.display()))
                        .with_next_step("make the directory first, or give one that exists")
                })?;
            Some(absolute)
        }
    };
    let value = match &absolute {
        None => String::new(),
        Some(dir) => dir.to_str().map(str::to_string).ok_or_else(|| {
            Error::validation("the directory's path is not UTF-8")
                .with_next_step("give a directory whose path is UTF-8")
        })?,
    };
    store.set_home_setting(SETTING, &value, "cli").await?;
    Ok(absolute)
}

/// The home's attachments directory, if the person set one (cleared is kept as empty).
pub async fn home_directory(store: &crate::store::Store) -> Result<Option<PathBuf>> {
    let set = store.home_setting(SETTING).await?;
    Ok(set.filter(|dir| !dir.is_empty()).map(PathBuf::from))
}

/// A saved file's URI: its base name, percent-encoded.
fn uri_of(name: &str) -> String {
    let encoded: String = (name.bytes())
        .map(|b| match b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect();
    format!("{SCHEME}{encoded}")
}

/// Saves the attachments of `args.ids` into `dir`; one result with a link per file.
pub async fn save(
    store: &crate::store::Store,
    dir: Option<&Path>,
    args: SaveArgs,
    scope: &crate::scope::Scope,
) -> Result<CallToolResult> {
    let dir = &directory(store, dir).await?;
    if args.ids.is_empty() || args.ids.len() > 20 {
        return Err(Error::validation("give 1 to 20 message ids"));
    }
    let (mut saved, mut failed) = (Vec::new(), Vec::new());
    for id in &args.ids {
        let request = SaveRequest {
            id: *id,
            part: args.part.as_deref(),
            dir,
            max_bytes: attachments::DEFAULT_MAX_BYTES,
        };
        match attachments::save_from(store, request, scope).await {
            Ok(files) => saved.extend(files.into_iter().map(|f| (*id, f))),
            Err(e) => failed.push(FailedView {
                id: *id,
                error_type: e.error_type(),
                error: e.message().to_string(),
            }),
        }
    }
    if saved.is_empty()
        && let Some(first) = failed.first()
    {
        let e = Error::not_found(first.error.clone());
        return Err(match first.error_type {
            "limit_exceeded" => Error::limit_exceeded(first.error.clone()).with_next_step(
                "ask the user to save it: mailbroker attachments ID --to DIR --max-bytes N",
            ),
            _ => e,
        });
    }
    let mut links = Vec::new();
    let views: Vec<SavedView> = (saved.into_iter())
        .map(|(id, f)| {
            let name = f
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let uri = uri_of(&name);
            let link = Resource::new(uri.clone(), name)
                .with_mime_type(f.content_type.clone())
                .with_size(f.size);
            links.push(ContentBlock::resource_link(link));
            SavedView {
                id,
                part: f.part,
                path: f.path.display().to_string(),
                uri,
                size: f.size,
            }
        })
        .collect();
    let out = SavedOut {
        success: failed.is_empty(),
        saved: views,
        failed,
    };
    let mut result = success(&out);
    result.content.extend(links);
    Ok(result)
}

/// `resources/read` of a saved attachment: the file of that base name in the directory, as
/// base64.
pub async fn read(
    store: &crate::store::Store,
    dir: Option<&Path>,
    uri: &str,
) -> Result<ReadResourceResult> {
    let dir = directory(store, dir).await?;
    let encoded = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| Error::not_found(format!("no resource {uri}")))?;
    let name = url::form_urlencoded::parse(format!("n={}", encoded.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Error::not_found(format!("no resource {uri}")));
    }
    let path = dir.join(&name);
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|_| Error::not_found(format!("no resource {uri}")))?;
    if !meta.is_file() {
        return Err(Error::not_found(format!("no resource {uri}")));
    }
    if meta.len() > MAX_READ {
        return Err(Error::limit_exceeded(format!(
            "{name} is {} bytes, over the {MAX_READ} a read serves",
            meta.len()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::not_found(format!("{name}: {e}")))?;
    let blob = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    Ok(ReadResourceResult::new(vec![ResourceContents::blob(
        blob, uri,
    )]))
}
