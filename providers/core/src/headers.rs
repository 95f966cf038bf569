//! Which mailing list and which conversation a message belongs to, from its headers.
//!
//! A list, as the index keeps it for `list:`, is the list's
//! identifier from `List-Id` (RFC 2919), else, for a sender that only offers a way out
//! (`List-Unsubscribe`, RFC 2369 and 8058: most newsletters), the host that way out leads
//! to. Every provider reads the same two headers (or, on Graph, the parsed unsubscribe
//! links), so the same message gets the same value everywhere. A conversation, on IMAP,
//! which has no thread ids of its own that span mailboxes, is the Message-ID that starts it.

/// The list of a message with these header values: `news.example.org` for `List-Id: News
/// <news.example.org>`, `shop.example` for `List-Unsubscribe:
/// <https://shop.example/u?1>` alone; `None` for mail from no list. Lowercase.
pub fn list_of(list_id: Option<&str>, unsubscribe: &[&str]) -> Option<String> {
    if let Some(id) = list_id.and_then(list_identifier) {
        return Some(id);
    }
    let links = unsubscribe.iter().flat_map(|value| value.split(','));
    let hosts: Vec<String> = links.filter_map(link_host).collect();
    // The web link names the sender's own host; a mailto often names its mail provider's.
    let web = hosts.iter().find(|h| !h.starts_with('@'));
    let chosen = web.or(hosts.first())?;
    Some(chosen.trim_start_matches('@').to_string())
}

/// `Description <id>` → `id`; a bare `id` as it is.
fn list_identifier(value: &str) -> Option<String> {
    let value = value.trim();
    let inner = match (value.rfind('<'), value.rfind('>')) {
        (Some(open), Some(close)) if open < close => &value[open + 1..close],
        _ => value,
    };
    let id = inner.trim().to_ascii_lowercase();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then_some(id)
}

/// The host of one unsubscribe link (`<https://host/…>`, `<mailto:a@host?…>`, with or
/// without the brackets); a mail domain is returned as `@host`, to tell it apart.
fn link_host(link: &str) -> Option<String> {
    let link = link
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .trim();
    let url = url::Url::parse(link).ok()?;
    match url.scheme() {
        "http" | "https" => url.host_str().map(str::to_ascii_lowercase),
        "mailto" => {
            let (_, domain) = url.path().rsplit_once('@')?;
            Some(format!("@{}", domain.to_ascii_lowercase()))
        }
        _ => None,
    }
}

/// The Message-ID that starts a message's conversation, from its own headers: the first of
/// its `References` (RFC 5322 §3.6.4: they list the thread from its start), else the one it
/// answers (`In-Reply-To`), else its own. Replies whose clients keep `References` share it,
/// in whatever mailbox each copy is; a reply that drops them starts a conversation of its
/// own.
pub fn conversation_root(
    references: Option<&str>,
    in_reply_to: Option<&str>,
    message_id: Option<&str>,
) -> Option<String> {
    let first_id = |value: &str| {
        let start = value.find('<')?;
        let end = start + value[start..].find('>')?;
        let id = value[start + 1..end].trim();
        (!id.is_empty()).then(|| id.to_string())
    };
    references
        .and_then(first_id)
        .or_else(|| in_reply_to.and_then(first_id))
        .or_else(|| {
            let own = message_id?.trim().trim_matches(['<', '>']).trim();
            (!own.is_empty()).then(|| own.to_string())
        })
}

/// A subject as conversations compare it: reply and forward prefixes (`Re:`, `Fwd:`, `Fw:`,
/// `AW:`, `WG:`, `SV:`, `VS:`, `Antw:`, `Re[2]:`…) and list tags (`[dev]`) set aside,
/// wherever they repeat at its start, whitespace folded, case ignored.
pub fn conversation_subject(subject: &str) -> String {
    const PREFIXES: [&str; 12] = [
        "re", "fwd", "fw", "aw", "wg", "sv", "vs", "antw", "tr", "rv", "r", "enc",
    ];
    let lower = subject.to_lowercase();
    let mut rest = lower.trim();
    loop {
        let before = rest;
        if let Some(tagged) = rest.strip_prefix('[')
            && let Some(end) = tagged.find(']')
        {
            rest = tagged[end + 1..].trim_start();
        }
        if let Some((word, after)) = rest.split_once(':') {
            // `Re[2]` and `Re(2)` count replies; the word itself is one of the prefixes.
            let word = word.trim_end();
            let bare = word
                .split_once(['[', '('])
                .filter(|(_, n)| {
                    n.trim_end_matches([']', ')'])
                        .chars()
                        .all(|c| c.is_ascii_digit())
                })
                .map_or(word, |(w, _)| w);
            if PREFIXES.contains(&bare) {
                rest = after.trim_start();
            }
        }
        if rest == before {
            break;
        }
    }
    rest.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::{conversation_root, conversation_subject, list_of};

    #[test]
    fn a_subject_compares_without_reply_prefixes_and_list_tags() {
        for (subject, want) in [
            ("Lunch on Friday", "lunch on friday"),
            ("Re: Lunch on Friday", "lunch on friday"),
            ("RE: re:  Lunch   on Friday ", "lunch on friday"),
            ("AW: WG: Fwd: [team] Re: Lunch on Friday", "lunch on friday"),
            ("Re[2]: [dev-list] Lunch on Friday", "lunch on friday"),
            ("Antw: SV: Lunch on Friday", "lunch on friday"),
            ("Re: Buy cheap watches", "buy cheap watches"),
            ("Regarding: the plan", "regarding: the plan"),
            ("[] ", ""),
        ] {
            assert_eq!(conversation_subject(subject), want, "{subject}");
        }
    }

    #[test]
    fn a_conversation_starts_at_its_first_reference() {
        let refs = "<a@x>\r\n <b@x> <c@x>";
        assert_eq!(
            conversation_root(Some(refs), Some("<c@x>"), Some("<d@x>")).as_deref(),
            Some("a@x")
        );
        assert_eq!(
            conversation_root(None, Some("<c@x>"), Some("<d@x>")).as_deref(),
            Some("c@x")
        );
        assert_eq!(
            conversation_root(Some("garbage"), None, Some("d@x")).as_deref(),
            Some("d@x")
        );
        assert_eq!(
            conversation_root(None, None, Some("<d@x>")).as_deref(),
            Some("d@x")
        );
        assert_eq!(conversation_root(None, None, None), None);
    }

    #[test]
    fn the_list_id_wins_then_the_unsubscribe_host() {
        let news = Some("Example News <News.Example.ORG>");
        assert_eq!(list_of(news, &[]).as_deref(), Some("news.example.org"));
        assert_eq!(
            list_of(Some("bare.list.id"), &[]).as_deref(),
            Some("bare.list.id")
        );
        let both = ["<mailto:leave@esp.example?subject=out>, <https://Shop.Example/u?1>"];
        assert_eq!(list_of(None, &both).as_deref(), Some("shop.example"));
        assert_eq!(list_of(news, &both).as_deref(), Some("news.example.org"));
        let mail_only = ["<mailto:leave@lists.example>"];
        assert_eq!(list_of(None, &mail_only).as_deref(), Some("lists.example"));
        // Graph gives the links one by one, without brackets.
        let graph = ["mailto:x@lists.example", "https://www.shop.example/unsub"];
        assert_eq!(list_of(None, &graph).as_deref(), Some("www.shop.example"));
        assert_eq!(list_of(Some("  "), &["not a link"]), None);
        assert_eq!(list_of(None, &[]), None);
    }
}
