//! The providers' own published schemas, which the mocks check every request against:
//! Microsoft's TypeScript definitions of Graph v1.0 (`@microsoft/microsoft-graph-types`, from
//! the npm registry) and Google's discovery document for Gmail v1 (shipped inside
//! `google-api-python-client`, from the Python package index). Neither is written by this
//! project, so a mock cannot come to agree with an adapter's mistake.
//!
//! Each is fetched once, pinned, into `target/published/` (or `MAILBROKER_PUBLISHED_DIR`),
//! under a file lock, since tests of several processes start mocks at once. There is no
//! lenient fallback: without the schema a mock does not start, and says how to get it.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Microsoft's v1.0 type definitions, pinned. The beta API's are another package
/// (`…-beta`), never this one.
pub const GRAPH_TYPES: &str = "@microsoft/microsoft-graph-types@2.43.1";
/// Google's Python client, pinned, for the discovery document it ships.
pub const GOOGLE_CLIENT: &str = "google-api-python-client==2.202.0";
const GMAIL_DOCUMENT: &str = "googleapiclient/discovery_cache/documents/gmail.v1.json";

fn root() -> PathBuf {
    match std::env::var_os("MAILBROKER_PUBLISHED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/published"),
    }
}

/// The path of Graph v1.0's `microsoft-graph.d.ts`, fetched if it is not here yet.
pub fn graph_types() -> io::Result<PathBuf> {
    let dir = root().join("graph-types");
    let file = dir.join("package/microsoft-graph.d.ts");
    fetched_once(&dir, &file, |dir| {
        run(Command::new("npm")
            .args(["pack", "--silent", GRAPH_TYPES, "--pack-destination"])
            .arg(dir))?;
        let tarball = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "tgz"))
            .ok_or_else(|| io::Error::other("npm pack left no tarball"))?;
        run(Command::new("tar")
            .arg("xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(dir))
    })
}

/// The path of Gmail v1's discovery document, fetched if it is not here yet.
pub fn gmail_discovery() -> io::Result<PathBuf> {
    let dir = root().join("gmail-discovery");
    let file = dir.join("gmail.v1.json");
    fetched_once(&dir, &file, |dir| {
        // A venv of its own, so pip runs the same on a system Python that refuses installs.
        let venv = dir.join("venv");
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        run(Command::new(venv.join("bin/pip"))
            .args([
                "download",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
            ])
            .arg(GOOGLE_CLIENT)
            .arg("-d")
            .arg(dir))?;
        let extract = format!(
            "import glob, sys, zipfile\n\
             wheel = glob.glob(sys.argv[1] + '/*.whl')[0]\n\
             open(sys.argv[2], 'wb').write(zipfile.ZipFile(wheel).read('{GMAIL_DOCUMENT}'))\n"
        );
        run(Command::new(venv.join("bin/python"))
            .args(["-c", &extract])
            .arg(dir)
            .arg(dir.join("gmail.v1.json")))
    })
}

/// `file`, made by `fetch` into `dir` unless it exists; one process fetches while the others
/// wait on the lock.
fn fetched_once(
    dir: &Path,
    file: &Path,
    fetch: impl Fn(&Path) -> io::Result<()>,
) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let lock = std::fs::File::create(dir.with_extension("lock"))?;
    lock.lock()?;
    if file.exists() {
        return Ok(file.to_path_buf());
    }
    fetch(dir).map_err(|e| {
        io::Error::other(format!(
            "the provider's published schema could not be fetched into {} ({e}); the mocks \
             need npm and python3 with venv, and the package registries (.ci/run installs them)",
            dir.display()
        ))
    })?;
    if !file.exists() {
        return Err(io::Error::other(format!(
            "{} was not fetched",
            file.display()
        )));
    }
    Ok(file.to_path_buf())
}

fn run(command: &mut Command) -> io::Result<()> {
    let out = command.output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{:?} failed: {}",
        command.get_program(),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}
