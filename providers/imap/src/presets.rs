//! Mail providers people reach over IMAP with an app password: where their server is, and
//! what a person needs to know before signing in (`account add imap --preset NAME`).

use mailbroker_core::{Error, Result};

use crate::TlsMode;

/// One provider's IMAP server and what to know about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub host: &'static str,
    pub port: u16,
    pub tls: TlsMode,
    /// What the person needs (an app password, and where it is made) and what the provider's
    /// IMAP cannot do.
    pub note: &'static str,
}

const fn implicit(name: &'static str, host: &'static str, note: &'static str) -> Preset {
    Preset {
        name,
        host,
        port: 993,
        tls: TlsMode::Implicit,
        note,
    }
}

/// The known providers, by the name `--preset` takes.
pub const PRESETS: [Preset; 9] = [
    implicit(
        "gmail",
        "imap.gmail.com",
        "Gmail needs an app password (Google Account > Security > 2-Step Verification > App \
         passwords; 2-Step Verification must be on). Over IMAP Gmail's labels are folders and \
         its keywords are not labels: `account add gmail` works with labels themselves.",
    ),
    implicit(
        "icloud",
        "imap.mail.me.com",
        "iCloud Mail needs an app-specific password (account.apple.com > Sign-In and Security \
         > App-Specific Passwords); the user name is the iCloud address.",
    ),
    implicit(
        "yahoo",
        "imap.mail.yahoo.com",
        "Yahoo Mail needs an app password (Account Info > Account Security > Generate app \
         password).",
    ),
    implicit(
        "aol",
        "imap.aol.com",
        "AOL Mail needs an app password (Account Info > Account Security > Generate app \
         password).",
    ),
    implicit(
        "fastmail",
        "imap.fastmail.com",
        "Fastmail needs an app password with IMAP access (Settings > Privacy & Security > \
         Manage app passwords and access).",
    ),
    implicit(
        "outlook",
        "outlook.office365.com",
        "Outlook.com and Microsoft 365 refuse passwords over IMAP for most accounts: use \
         `account add graph` instead; this works only where an administrator still allows \
         basic authentication.",
    ),
    implicit(
        "zoho",
        "imap.zoho.com",
        "Zoho Mail needs IMAP access turned on (Settings > Mail Accounts > IMAP Access) and, \
         with two-factor authentication, an application-specific password; accounts in other \
         regions use their region's host (imap.zoho.eu, imap.zoho.in, …) with --host.",
    ),
    implicit(
        "mailbox.org",
        "imap.mailbox.org",
        "mailbox.org signs in with the account password, or an app password where two-factor \
         authentication is on.",
    ),
    implicit(
        "posteo",
        "posteo.de",
        "Posteo signs in with the account's address and password.",
    ),
];

/// The preset called `name`.
pub fn preset(name: &str) -> Result<&'static Preset> {
    PRESETS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let known: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            Error::validation(format!("no preset {name:?}")).with_next_step(format!(
                "use one of {}, or give --host and --port",
                known.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_provider_once_with_its_server() {
        let expected = [
            ("gmail", "imap.gmail.com"),
            ("icloud", "imap.mail.me.com"),
            ("yahoo", "imap.mail.yahoo.com"),
            ("aol", "imap.aol.com"),
            ("fastmail", "imap.fastmail.com"),
            ("outlook", "outlook.office365.com"),
            ("zoho", "imap.zoho.com"),
            ("mailbox.org", "imap.mailbox.org"),
            ("posteo", "posteo.de"),
        ];
        for (name, host) in expected {
            let p = preset(name).unwrap();
            assert_eq!(
                (p.host, p.port, p.tls),
                (host, 993, TlsMode::Implicit),
                "{name}"
            );
            assert!(!p.note.is_empty());
        }
        assert_eq!(preset("iCloud").unwrap().name, "icloud");
        let unknown = preset("hotmal").unwrap_err();
        assert_eq!(unknown.error_type(), "validation_error");
        assert!(unknown.next_step().unwrap().contains("icloud"));
        assert_eq!(PRESETS.len(), expected.len());
    }
}
