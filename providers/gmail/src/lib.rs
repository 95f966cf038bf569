//! The Gmail adapter. Built so far: authorization (OAuth code + PKCE, refresh) and the calls
//! account setup needs. Sync and writes through the Gmail API come next.

pub mod api;
pub mod oauth;
