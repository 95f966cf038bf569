//! What the browser tests share: Debian's Chromium driven by playwright-core, and a passkey
//! enrolled from the link `console enroll` shows at a terminal.

use std::path::Path;

pub const PLAYWRIGHT: &str = "playwright-core@1.64.1";
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether Chromium is here; outside CI a missing one skips the test, under CI it fails.
pub fn chromium() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    assert!(
        !mailbroker_testkit::dovecot_required(),
        "CI=true but {CHROMIUM} is missing: .ci/run must install chromium"
    );
    eprintln!("skipping: chromium is not installed (apt-get install chromium)");
    false
}

/// `console enroll` at a terminal of its own: the link it shows there.
pub fn enroll_link(home: &Path, origin: &str) -> String {
    let shown = super::at_terminal(home, &["console", "enroll", "--origin", origin], "");
    assert_eq!(shown.code, 0, "{}", shown.shown);
    (shown.shown.lines())
        .find_map(|l| l.trim().starts_with("http").then(|| l.trim().to_string()))
        .unwrap_or_else(|| panic!("no link in {}", shown.shown))
}
