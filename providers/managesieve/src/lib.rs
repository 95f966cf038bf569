//! ManageSieve (RFC 5804): the protocol by which a person's Sieve scripts on Dovecot
//! (Pigeonhole) and Cyrus (timsieved) are read, checked and written. A handful of commands,
//! spoken over any stream the caller opened (TLS, STARTTLS or loopback), so that the TLS and
//! credentials stay with the provider that owns the account.
//!
//! `section` is mailbroker's part of a script: delimited, and never touching a byte of the
//! person's own.

pub mod account;
mod client;
mod response;
pub mod section;
pub mod sieve;

pub use client::{Capabilities, Client, Script};
