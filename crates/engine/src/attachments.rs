//! Attachments: listed by part (the IMAP section number, `2`, `1.2`, the same on every
//! provider), and saved as files a person can open, never where a name sent by a stranger
//! would put them.
//!
//! Architecture Invariant: a file is only ever created inside the directory given, under a
//! base name `safe_name` made (no separator, no `..`, no leading dot, no control or bidi
//! character, at most `MAX_NAME` bytes), new (never over an existing file: a numbered suffix
//! instead), mode 0600, written whole to a temporary file first and then linked in place.

use std::io::Write;
use std::path::{Path, PathBuf};

use mail_parser::{Message, MessageParser, MimeHeaders, PartType};
use mailbroker_core::{Error, Result};
use serde::Serialize;

/// The longest file name saved, in bytes.
pub const MAX_NAME: usize = 120;
/// The largest attachment saved unless the person says otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 50 * 1024 * 1024;

pub use mailbroker_core::Attachment;

fn content_type(part: &mail_parser::MessagePart<'_>) -> String {
    part.content_type()
        .map(|c| match c.subtype() {
            Some(sub) => format!("{}/{sub}", c.ctype()),
            None => c.ctype().to_string(),
        })
        .unwrap_or_else(|| "application/octet-stream".into())
}

/// Every attachment of `message` with its part number, and its index among the message's
/// parts. A forwarded message (`message/rfc822`) is one attachment, named by its subject.
pub fn parts(message: &Message<'_>) -> Vec<(Attachment, usize)> {
    let mut out = Vec::new();
    match &message.parts.first().map(|p| &p.body) {
        Some(PartType::Multipart(children)) => walk(message, children, "", &mut out),
        Some(_) => visit(message, 0, "1", &mut out),
        None => {}
    }
    out
}

fn walk(message: &Message<'_>, children: &[u32], prefix: &str, out: &mut Vec<(Attachment, usize)>) {
    for (n, child) in children.iter().enumerate() {
        let number = format!("{prefix}{}", n + 1);
        let index = *child as usize;
        match message.parts.get(index).map(|p| &p.body) {
            Some(PartType::Multipart(inner)) => walk(message, inner, &format!("{number}."), out),
            Some(_) => visit(message, index, &number, out),
            None => {}
        }
    }
}

fn visit(message: &Message<'_>, index: usize, number: &str, out: &mut Vec<(Attachment, usize)>) {
    let Some(part) = message.parts.get(index) else {
        return;
    };
    let forwarded = matches!(part.body, PartType::Message(_));
    if !forwarded && !message.attachments.contains(&(index as u32)) {
        return;
    }
    let attachment = Attachment {
        part: number.to_string(),
        name: name_of(part),
        content_type: content_type(part),
        size: part.contents().len() as u64,
    };
    out.push((attachment, index));
}

/// A part's file name as sent; a forwarded message's, its subject and `.eml`.
fn name_of(part: &mail_parser::MessagePart<'_>) -> Option<String> {
    (part.attachment_name().map(str::to_string)).or_else(|| match &part.body {
        PartType::Message(inner) => Some(format!("{}.eml", inner.subject().unwrap_or("message"))),
        _ => None,
    })
}

/// The attachment `part` of `source` (a whole message) and its decoded contents.
pub fn extract(source: &[u8], part: &str) -> Result<(Attachment, Vec<u8>)> {
    let message = parse(source)?;
    let (attachment, index) = (parts(&message).into_iter())
        .find(|(a, _)| a.part == part)
        .ok_or_else(|| no_part(part))?;
    Ok((attachment, message.parts[index].contents().to_vec()))
}

fn parse(source: &[u8]) -> Result<Message<'_>> {
    MessageParser::default()
        .parse(source)
        .ok_or_else(|| Error::provider_unavailable("the server sent a message that is not MIME"))
}

pub fn no_part(part: &str) -> Error {
    Error::not_found(format!("the message has no attachment at part {part}"))
        .with_next_step("list its attachments: mailbroker attachments ID")
}

/// Whether `c` may not stand in a file name: a control character (NUL too), a bidi control
/// (which makes `gpj.exe` read as `exe.jpg`), or what a file system or shell treats apart.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|')
}

/// A base name safe to create: the last component of what was sent, without unsafe
/// characters, leading dots or spaces, trailing dots or spaces, Windows device names, and at
/// most `MAX_NAME` bytes (the extension kept); `attachment` when nothing is left.
pub fn safe_name(sent: Option<&str>) -> String {
    let sent = sent.unwrap_or_default();
    let base = sent.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| if unsafe_char(c) { '_' } else { c })
        .collect();
    let cleaned = cleaned
        .trim_start_matches(['.', ' ', '_'])
        .trim_end_matches(['.', ' ']);
    let mut name = match cleaned.is_empty() {
        true => "attachment".to_string(),
        false => cleaned.to_string(),
    };
    let stem = name
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let device = matches!(stem.as_str(), "con" | "prn" | "aux" | "nul")
        || (stem.len() == 4
            && (stem.starts_with("com") || stem.starts_with("lpt"))
            && stem.as_bytes()[3].is_ascii_digit());
    if device {
        name.insert(0, '_');
    }
    shorten(&name, MAX_NAME)
}

/// `name` cut to at most `max` bytes at a character boundary, keeping a short extension.
fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && ext.len() <= 16 => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    let mut cut = max - ext.len();
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut])
}

/// `name` with ` (n)` before its extension.
fn numbered(name: &str, n: u32) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => {
            shorten(&format!("{stem} ({n}).{ext}"), MAX_NAME + 8)
        }
        _ => format!("{name} ({n})"),
    }
}

/// Writes `bytes` as a new file named after `sent` in `dir`: a temporary file (0600, created
/// new) written whole and synced, then linked under the first free name (`name`, `name (1)`,
/// …; a link never replaces a file), then the temporary name removed. The path made.
pub fn save(dir: &Path, sent: Option<&str>, bytes: &[u8]) -> Result<PathBuf> {
    let failed = |e: std::io::Error| {
        Error::validation(format!("cannot write in {}: {e}", dir.display()))
            .with_next_step("give a directory you can write to")
    };
    let name = safe_name(sent);
    let temporary = dir.join(format!(".mailbroker-{}.part", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let _ = std::fs::remove_file(&temporary);
    let mut file = options.open(&temporary).map_err(failed)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed(e));
    }
    let mut n = 0;
    let made = loop {
        let candidate = dir.join(match n {
            0 => name.clone(),
            n => numbered(&name, n),
        });
        match std::fs::hard_link(&temporary, &candidate) {
            Ok(()) => break Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => break Err(failed(e)),
        }
    };
    let _ = std::fs::remove_file(&temporary);
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_strangers_become_safe_base_names() {
        let cases = [
            (Some("../../.bashrc"), "bashrc"),
            (Some("/etc/passwd"), "passwd"),
            (Some(".hidden"), "hidden"),
            (Some("con"), "_con"),
            (Some("COM1.txt"), "_COM1.txt"),
            (Some("invoice\u{202e}fdp.exe"), "invoice_fdp.exe"),
            (Some("a\0b.pdf"), "a_b.pdf"),
            (Some("C:\\Users\\x\\evil.bat"), "evil.bat"),
            (Some(".."), "attachment"),
            (Some(""), "attachment"),
            (None, "attachment"),
        ];
        for (sent, want) in cases {
            assert_eq!(safe_name(sent), want, "{sent:?}");
        }
        let long = format!("{}.pdf", "é".repeat(300));
        let name = safe_name(Some(&long));
        assert!(name.len() <= MAX_NAME && name.ends_with(".pdf"), "{name}");
    }

    #[test]
    fn parts_are_numbered_as_imap_sections() {
        let source = b"Subject: s\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=a\r\n\r\n\
--a\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n\
--b\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n--b--\r\n\
--a\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=bill.pdf\r\n\
Content-Transfer-Encoding: base64\r\n\r\nUERGREFUQQ==\r\n\
--a\r\nContent-Type: message/rfc822\r\n\r\nSubject: Fwd\r\n\r\ninner\r\n--a--\r\n";
        let message = parse(source).unwrap();
        let listed: Vec<(String, Option<String>)> = parts(&message)
            .into_iter()
            .map(|(a, _)| (a.part, a.name))
            .collect();
        assert_eq!(
            listed,
            [
                ("2".into(), Some("bill.pdf".into())),
                ("3".into(), Some("Fwd.eml".into()))
            ]
        );
        assert_eq!(extract(source, "2").unwrap().1, b"PDFDATA");
        assert!(extract(source, "1.1").is_err());
    }
}

/// The most one call saves, all files together.
pub const MAX_CALL_BYTES: u64 = 200 * 1024 * 1024;

/// An attachment saved.
#[derive(Debug, Clone, Serialize)]
pub struct Saved {
    pub part: String,
    pub path: PathBuf,
    pub size: u64,
    pub content_type: String,
}

/// What to save and where.
pub struct SaveRequest<'a> {
    pub id: i64,
    /// One part, or every attachment.
    pub part: Option<&'a str>,
    pub dir: &'a Path,
    pub max_bytes: u64,
}

fn too_large(part: &str, size: u64, max: u64) -> Error {
    Error::limit_exceeded(format!(
        "attachment {part} is {size} bytes, over the {max} a save takes"
    ))
    .with_next_step("save it from the mail client, or raise the limit with --max-bytes")
}

/// Saves message `id`'s attachments (or its one `part`) in `dir`: one part read alone where
/// the provider can, else the whole message read once. Nothing over `max_bytes` a file or
/// `MAX_CALL_BYTES` in all is written.
pub async fn save_from(
    store: &mailbroker_store::Store,
    req: SaveRequest<'_>,
    scope: &crate::scope::Scope,
) -> Result<Vec<Saved>> {
    if !req.dir.is_dir() {
        return Err(
            Error::validation(format!("{} is not a directory", req.dir.display()))
                .with_next_step("make the directory first, or give one that exists"),
        );
    }
    let row =
        store
            .message(req.id)
            .await
            .and_then(|row| match scope.opens(&row.place.account) {
                true => Ok(row),
                false => Err(mailbroker_store::no_message(req.id)),
            })?;
    let place = row.place;
    let listed = store.listed_parts(req.id).await?;
    let mut session = crate::sessions::open(store, &place.account).await?;
    let got = read_parts(
        &mut *session.provider,
        (&place.mailbox, &place.remote_id),
        req.part,
        &listed,
    )
    .await;
    session.close().await;
    let found = got?;
    if found.is_empty() {
        return Err(Error::not_found(format!(
            "message {} has no attachments",
            req.id
        )));
    }
    let mut total = 0;
    for (a, bytes) in &found {
        let size = bytes.len() as u64;
        total += size;
        if size > req.max_bytes {
            return Err(too_large(&a.part, size, req.max_bytes));
        }
    }
    if total > MAX_CALL_BYTES {
        return Err(too_large("all", total, MAX_CALL_BYTES));
    }
    let mut saved = Vec::new();
    for (a, bytes) in found {
        let path = save(req.dir, a.name.as_deref(), &bytes)?;
        saved.push(Saved {
            part: a.part,
            path,
            size: bytes.len() as u64,
            content_type: a.content_type,
        });
    }
    Ok(saved)
}

/// A part its provider read alone, as listed and decoded.
fn alone_part(part: &str, alone: mailbroker_core::FetchedPart) -> Result<(Attachment, Vec<u8>)> {
    let (name, content_type, bytes) = match alone {
        mailbroker_core::FetchedPart::Decoded {
            name,
            content_type,
            bytes,
        } => (name, content_type, bytes),
        mailbroker_core::FetchedPart::Mime(mime) => {
            let message = parse(&mime)?;
            let first = message.parts.first().ok_or_else(|| no_part(part))?;
            (
                name_of(first),
                content_type(first),
                first.contents().to_vec(),
            )
        }
    };
    let attachment = Attachment {
        part: part.to_string(),
        name,
        content_type,
        size: bytes.len() as u64,
    };
    Ok((attachment, bytes))
}

/// The attachments asked for, with their contents.
async fn read_parts(
    provider: &mut dyn mailbroker_core::Provider,
    (mailbox, id): (&str, &mailbroker_core::RemoteId),
    part: Option<&str>,
    listed: &[Attachment],
) -> Result<Vec<(Attachment, Vec<u8>)>> {
    if let Some(part) = part
        && let Some(alone) = provider.fetch_part(mailbox, id, part, listed).await?
    {
        return alone_part(part, alone).map(|one| vec![one]);
    }
    let source = (provider
        .fetch_sources(mailbox, std::slice::from_ref(id))
        .await?)
        .into_iter()
        .next()
        .map(|(_, s)| s)
        .ok_or_else(|| {
            Error::stale_state("the message is no longer where the index has it")
                .with_next_step("run: mailbroker sync, then find it again")
        })?;
    match part {
        Some(part) => Ok(vec![extract(&source, part)?]),
        None => {
            let message = parse(&source)?;
            Ok((parts(&message).into_iter())
                .map(|(a, index)| {
                    let bytes = message.parts[index].contents().to_vec();
                    (a, bytes)
                })
                .collect())
        }
    }
}
