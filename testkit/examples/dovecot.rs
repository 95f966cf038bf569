//! Starts a test Dovecot and prints its ports and CA until interrupted (for trying mailbroker
//! by hand against a local server).

fn main() -> anyhow::Result<()> {
    let server = mailbroker_testkit::Dovecot::start()?;
    println!(
        "imap (starttls) 127.0.0.1:{}  imaps 127.0.0.1:{}  ca {}  password {}",
        server.imap_port,
        server.imaps_port,
        server.ca.ca_pem.display(),
        mailbroker_testkit::PASSWORD
    );
    println!("config {}", server.config_path().display());
    loop {
        std::thread::park();
    }
}
