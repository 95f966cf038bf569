//! Secrets sealed in the index with a key held outside it (`MAILBROKER_SECRET_KEY_FILE`), for
//! an index others can reach (a shared or backed-up database): AES-256-GCM from aws-lc-rs,
//! the crypto library rustls already runs on here, a random 96-bit nonce per secret, and the
//! account and kind as associated data, so a sealed value copied to another account's row
//! does not open. A copy of the index then holds no password or token.
//!
//! A process without the key cannot read a sealed secret and says so (`auth_required`, with
//! the variable to set); it never falls back to anything.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use mailbroker_core::{Error, Result};

/// The file holding the key: 64 hex digits (32 random bytes), readable by its owner only.
pub const KEY_ENV: &str = "MAILBROKER_SECRET_KEY_FILE";

/// What a sealed value starts with, so another layout can follow.
const VERSION: &str = "v1:";

pub struct Key(LessSafeKey);

/// The key `MAILBROKER_SECRET_KEY_FILE` names, if it names one.
pub fn key() -> Result<Option<Key>> {
    let Some(bytes) = key_bytes()? else {
        return Ok(None);
    };
    let key = UnboundKey::new(&AES_256_GCM, &bytes)
        .map_err(|_| Error::internal("a 32-byte key was refused"))?;
    Ok(Some(Key(LessSafeKey::new(key))))
}

/// A key for another `purpose`, derived from the one in `MAILBROKER_SECRET_KEY_FILE`
/// (HMAC-SHA256 of the purpose): what processes sharing an index and that file, and no one
/// else, hold alike.
pub fn subkey(purpose: &str) -> Result<Option<[u8; 32]>> {
    use hmac::{KeyInit, Mac};
    let Some(bytes) = key_bytes()? else {
        return Ok(None);
    };
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&bytes)
        .map_err(|e| Error::internal(format!("secret key: {e}")))?;
    mac.update(purpose.as_bytes());
    Ok(Some(mac.finalize().into_bytes().into()))
}

/// The 32 bytes the key file holds, if one is named.
fn key_bytes() -> Result<Option<Vec<u8>>> {
    let Some(path) = std::env::var_os(KEY_ENV).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = std::path::PathBuf::from(path);
    let text = crate::util::read_private(&path, "secret key file")?;
    let bad = || {
        Error::validation(format!(
            "the secret key file {} does not hold 64 hex digits",
            path.display()
        ))
        .with_next_step(format!(
            "make one: openssl rand -hex 32 > {0} && chmod 600 {0}",
            path.display()
        ))
    };
    let bytes = hex::decode(text.trim()).map_err(|_| bad())?;
    if bytes.len() != 32 {
        return Err(bad());
    }
    Ok(Some(bytes))
}

/// `secret` sealed under `key`, bound to `label` (the account and kind).
pub fn seal(key: &Key, label: &str, secret: &str) -> Result<String> {
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
    let mut sealed = secret.as_bytes().to_vec();
    key.0
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(label.as_bytes()),
            &mut sealed,
        )
        .map_err(|_| Error::internal("sealing a secret failed"))?;
    Ok(format!(
        "{VERSION}{}{}",
        hex::encode(nonce),
        hex::encode(sealed)
    ))
}

/// The secret a sealed value holds, opened with the key the environment names.
pub fn open(label: &str, sealed: &str) -> Result<String> {
    let Some(key) = key()? else {
        return Err(no_key(label));
    };
    open_with(&key, label, sealed)
}

/// What a process without the key answers for a sealed secret: it does nothing with it.
/// A secret would go into a shared database (PostgreSQL) without a key to seal it: every
/// node, every database user and every dump would hold it in the clear, and a per-machine
/// keyring is no answer either (the other nodes could not read it).
pub fn shared_needs_key() -> Error {
    Error::validation(
        "a secret is stored in a shared database only sealed, and no key file is given",
    )
    .with_next_step(format!(
        "run: openssl rand -hex 32 > key; chmod 600 key; export {KEY_ENV}=$PWD/key \
         (give every node the same file)"
    ))
}

pub fn no_key(label: &str) -> Error {
    Error::auth_required(format!(
        "the secret of {label} is sealed with a key this process was not given"
    ))
    .with_next_step(format!(
        "set {KEY_ENV} to the key file its secrets were sealed with"
    ))
}

fn open_with(key: &Key, label: &str, sealed: &str) -> Result<String> {
    let wrong = || {
        Error::auth_required(format!(
            "the secret of {label} does not open with the key in ${KEY_ENV}"
        ))
        .with_next_step(format!(
            "set {KEY_ENV} to the key file its secrets were sealed with"
        ))
    };
    let bytes = sealed
        .strip_prefix(VERSION)
        .and_then(|h| hex::decode(h).ok())
        .filter(|b| b.len() > NONCE_LEN)
        .ok_or_else(|| {
            Error::internal(format!("index: the sealed secret of {label} is damaged"))
        })?;
    let (nonce, body) = bytes.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| wrong())?;
    let mut body = body.to_vec();
    let plain = key
        .0
        .open_in_place(nonce, Aad::from(label.as_bytes()), &mut body)
        .map_err(|_| wrong())?;
    String::from_utf8(plain.to_vec()).map_err(|_| wrong())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_key(byte: u8) -> Key {
        Key(LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &[byte; 32]).unwrap(),
        ))
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_label() {
        let key = test_key(7);
        let sealed = seal(&key, "work/password", "hunter2-hunter2").unwrap();
        assert!(sealed.starts_with(VERSION) && !sealed.contains("hunter2"));
        assert_ne!(
            sealed,
            seal(&key, "work/password", "hunter2-hunter2").unwrap()
        );
        assert_eq!(
            open_with(&key, "work/password", &sealed).unwrap(),
            "hunter2-hunter2"
        );
        let refused = open_with(&key, "home/password", &sealed).unwrap_err();
        assert_eq!(refused.error_type(), "auth_required");
        assert!(open_with(&test_key(8), "work/password", &sealed).is_err());
        assert!(open_with(&key, "work/password", "v1:00").is_err());
    }
}
