//! A TCP proxy in front of a test server that can add latency (like a remote server), cut
//! the connection right after a chosen command has been forwarded (a write whose answer is
//! lost), hold a chosen command back until the test lets it go (another client acting
//! between two commands), and strip a response code from the server's answers (a server
//! without the extension that sends it).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    pub port: u16,
    cut_after: Arc<Mutex<Option<String>>>,
    /// Everything clients sent, for tests that check which commands went out.
    sent: Arc<Mutex<Vec<u8>>>,
    hold: Arc<Hold>,
    strip: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
}

/// A command to hold back: its pattern, whether it is being held, and its release.
#[derive(Default)]
struct Hold {
    pattern: Mutex<Option<String>>,
    holding: AtomicBool,
    release: tokio::sync::Notify,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream`; every byte
    /// arrives `delay` after it was sent, in each direction (a link's latency, not a cap on
    /// its throughput).
    pub fn start(upstream: u16, delay: Duration) -> Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let cut_after = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let hold = Arc::new(Hold::default());
        let strip = Arc::new(Mutex::new(None));
        let (cut, halt, log, held) = (cut_after.clone(), stop.clone(), sent.clone(), hold.clone());
        let stripped = strip.clone();
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                while !halt.load(Ordering::Relaxed) {
                    let Ok(Ok((client, _))) =
                        tokio::time::timeout(Duration::from_millis(200), listener.accept()).await
                    else {
                        continue;
                    };
                    let (cut, log, held) = (cut.clone(), log.clone(), held.clone());
                    let strip = stripped.clone();
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                            let controls = Controls {
                                cut,
                                log,
                                hold: held,
                                strip,
                            };
                            let _ = pipe(client, server, delay, controls).await;
                        }
                    });
                }
            });
        });
        Ok(Proxy {
            port,
            cut_after,
            sent,
            hold,
            strip,
            stop,
        })
    }

    /// From now on, removes every `[CODE …]` response code from what the server sends (as
    /// a server without the extension behind it would answer): `strip_code("COPYUID")`
    /// makes a MOVE's answer name no new UIDs.
    pub fn strip_code(&self, code: &str) {
        if let Ok(mut s) = self.strip.lock() {
            *s = Some(format!("[{code} "));
        }
    }

    /// What clients have sent so far, a line each, and forgets it. LOGIN lines lose their
    /// arguments, so a failing test's message shows no password.
    pub fn take_sent(&self) -> String {
        let bytes = self
            .sent
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| match line.split_once(" LOGIN ") {
                Some((tag, _)) => format!("{tag} LOGIN …\n"),
                None => format!("{line}\n"),
            })
            .collect()
    }

    /// The next time a client sends a line containing `pattern`, forward it, then close both
    /// connections without passing on the server's answer.
    pub fn cut_after(&self, pattern: &str) {
        if let Ok(mut c) = self.cut_after.lock() {
            *c = Some(pattern.to_string());
        }
    }
}

impl Proxy {
    /// The next time a client sends a line containing `pattern`, keep it (and what follows
    /// on that connection) from the server until `release`.
    pub fn hold_at(&self, pattern: &str) {
        if let Ok(mut p) = self.hold.pattern.lock() {
            *p = Some(pattern.to_string());
        }
    }

    /// Whether a command is being held now.
    pub fn holding(&self) -> bool {
        self.hold.holding.load(Ordering::SeqCst)
    }

    /// Lets the held command (or the next one to be held) go on to the server.
    pub fn release(&self) {
        self.hold.release.notify_one();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One direction of the link: bytes written to it reach `out` `delay` after they were read,
/// in order. Reads are not held back while earlier bytes wait, so a long answer streams
/// as it would over a real link with that latency; sleeping inline before each write would
/// instead add the delay once per chunk read and cap the throughput.
struct Link {
    tx: tokio::sync::mpsc::UnboundedSender<(tokio::time::Instant, Vec<u8>)>,
    delay: Duration,
}

impl Link {
    fn new(mut out: tokio::net::tcp::OwnedWriteHalf, delay: Duration) -> Link {
        let (tx, mut rx) =
            tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
        tokio::spawn(async move {
            while let Some((due, bytes)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                if out.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        Link { tx, delay }
    }

    fn send(&self, bytes: &[u8]) -> Result<()> {
        let due = tokio::time::Instant::now() + self.delay;
        self.tx
            .send((due, bytes.to_vec()))
            .map_err(|_| anyhow::anyhow!("the other side closed"))
    }
}

/// Whether `bytes` contain the pattern in `slot`; if so the pattern is spent (cleared).
fn take_if_seen(slot: &Mutex<Option<String>>, bytes: &[u8]) -> bool {
    let Ok(mut pattern) = slot.lock() else {
        return false;
    };
    let seen = pattern
        .as_deref()
        .is_some_and(|p| String::from_utf8_lossy(bytes).contains(p));
    if seen {
        *pattern = None;
    }
    seen
}

/// What a test controls of one connection's pipe.
struct Controls {
    cut: Arc<Mutex<Option<String>>>,
    log: Arc<Mutex<Vec<u8>>>,
    hold: Arc<Hold>,
    strip: Arc<Mutex<Option<String>>>,
}

/// `bytes` without any response code starting with `opening` (`"[COPYUID "`) up to its `]`
/// and the space after it. Codes are short and sent in one piece by the server, so one read
/// holds a whole one.
fn without_code(bytes: &[u8], opening: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    if !text.contains(opening) {
        return bytes.to_vec();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(start) = rest.find(opening) {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let end = after.find(']').map_or(after.len(), |e| e + 1);
        rest = after[end..].strip_prefix(' ').unwrap_or(&after[end..]);
    }
    out.push_str(rest);
    out.into_bytes()
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    delay: Duration,
    controls: Controls,
) -> Result<()> {
    let Controls {
        cut,
        log,
        hold,
        strip,
    } = controls;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, cw) = client.into_split();
    let (mut sr, sw) = server.into_split();
    let (to_client, to_server) = (Link::new(cw, delay), Link::new(sw, delay));
    // Set once the cut command has gone up: nothing more comes down.
    let silenced = Arc::new(AtomicBool::new(false));
    let silenced_up = silenced.clone();
    // Signalled when the server has answered the cut command (its tagged OK went by).
    let answered = Arc::new(tokio::sync::Notify::new());
    let answered_up = answered.clone();
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = sr.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, anyhow::Error>(());
            }
            if silenced.load(Ordering::SeqCst) {
                // Swallow the answer but keep the connection open until the up side closes
                // it, so the server finishes the command undisturbed.
                // An IMAP tagged OK, or an HTTP status line.
                let answer = String::from_utf8_lossy(&buf[..n]);
                if answer.contains(" OK ") || answer.starts_with("HTTP/1.1 ") {
                    answered.notify_one();
                }
                continue;
            }
            let opening = strip.lock().ok().and_then(|s| s.clone());
            match opening {
                Some(opening) => to_client.send(&without_code(&buf[..n], &opening))?,
                None => to_client.send(&buf[..n])?,
            }
        }
    };
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = cr.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, anyhow::Error>(());
            }
            if let Ok(mut log) = log.lock() {
                log.extend_from_slice(&buf[..n]);
            }
            let cutting = take_if_seen(&cut, &buf[..n]);
            if cutting {
                silenced_up.store(true, Ordering::SeqCst);
            }
            if take_if_seen(&hold.pattern, &buf[..n]) {
                hold.holding.store(true, Ordering::SeqCst);
                hold.release.notified().await;
                hold.holding.store(false, Ordering::SeqCst);
            }
            to_server.send(&buf[..n])?;
            if cutting {
                // Let the server finish the command (the rest of its line may still be on
                // its way), then drop both sides unanswered.
                let finish = async {
                    loop {
                        tokio::select! {
                            _ = answered_up.notified() => return,
                            read = cr.read(&mut buf) => match read {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if to_server.send(&buf[..n]).is_err() {
                                        return;
                                    }
                                }
                            },
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(10), finish).await;
                return Ok(());
            }
        }
    };
    // Whichever direction ends first ends the connection.
    tokio::select! {
        r = down => r,
        r = up => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripped_code_leaves_the_rest_of_the_answer() {
        let answer = b"* OK [COPYUID 7 1:2 5:6] Moved UIDs.\r\n* 1 EXPUNGE\r\nA3 OK [COPYUID 7 3 7] Done\r\n";
        assert_eq!(
            without_code(answer, "[COPYUID "),
            b"* OK Moved UIDs.\r\n* 1 EXPUNGE\r\nA3 OK Done\r\n".to_vec()
        );
        assert_eq!(
            without_code(b"A1 OK [READ-WRITE] x", "[COPYUID "),
            b"A1 OK [READ-WRITE] x"
        );
    }

    /// A long answer written in many small pieces comes through the delay line whole and in
    /// order, in both directions.
    #[tokio::test]
    async fn many_small_writes_arrive_whole_and_in_order() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        let proxy = Proxy::start(port, Duration::from_millis(5)).unwrap();
        let payload: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = payload.clone();
        let server = tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.unwrap();
            let mut request = vec![0u8; 6];
            s.read_exact(&mut request).await.unwrap();
            for piece in sent.chunks(4096) {
                s.write_all(piece).await.unwrap();
            }
            request
        });
        let mut client = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
        client.write_all(b"hello\n").await.unwrap();
        let mut got = vec![0u8; payload.len()];
        tokio::time::timeout(Duration::from_secs(20), client.read_exact(&mut got))
            .await
            .expect("the answer did not arrive whole")
            .unwrap();
        assert_eq!(server.await.unwrap(), b"hello\n");
        assert!(got == payload, "bytes reordered or changed on the way");
    }
}
