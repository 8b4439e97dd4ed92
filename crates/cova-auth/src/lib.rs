//! Credentials, pure: API tokens and scopes, passwords, session secrets and webhook signatures.
//!
//! A token is `cova_` + 30 base62 characters of CSPRNG output (~178 bits) + a 6-character
//! base62 CRC-32 checksum, so secret scanners and the gateway can recognise a well-formed
//! token without a database lookup. Only SHA-256(token) and a short display prefix are stored.
//! Session cookies and e-mailed links carry 256 random bits, stored as their SHA-256 too.

pub mod password;
mod scope;
pub mod sealing;
pub mod secret;
pub mod signature;
mod token;

pub use scope::{Scope, ScopeSet, UnknownScope};
pub use token::{GeneratedToken, TOKEN_PREFIX, display_prefix, generate, hash_token, looks_like_token};
