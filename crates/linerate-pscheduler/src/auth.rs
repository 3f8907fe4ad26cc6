//! Authentication per task, as pscheduler-tool-iperf3 does it: participant
//! 1's participant-data makes an RSA key pair (2048 bits), a user name (20
//! letters and digits) and a password (20 of letters, digits and
//! punctuation), and hands them over as `_auth` (the leading underscore:
//! pScheduler shows no such key in what it lists). The server takes the
//! private key and the users file line (`user,sha256("{user}password")`),
//! the client the public key, the user and the password: the one-test
//! server serves only that client. The shape is the iperf3 tool's, key
//! for key.
//!
//! In-process, nothing secret touches a command line or the environment:
//! the private key and the password stay in memory; only the users file
//! (a hash) is written, in a directory of the run's own (0700), removed
//! at its end. Results and diagnostics name the user, never the password
//! or a key.

use crate::error::Error;
use linerate_iperf::{ClientAuth, ServerAuth};
use linerate_iperf_proto::auth::{self, Padding};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bits of the per-task key (the iperf3 tool's).
const KEY_BITS: usize = 2048;
/// Longest user name and password iperf3 takes (the iperf3 tool's
/// IPERF3_LONG_STRING).
const CREDENTIAL_LEN: usize = 20;
/// Seconds a token's time may differ from the server's clock (iperf3's
/// default).
const SKEW_S: i64 = 10;

/// Letters and digits (pScheduler's random_string with `safe`).
const SAFE: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/// Python's string.punctuation.
const PUNCTUATION: &[u8] = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// A task's credentials, as participant 1 hands them over (`_auth`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAuth {
    /// The server's RSA private key, PEM (`BEGIN RSA PRIVATE KEY`).
    pub private: String,
    /// Its public key, PEM (`BEGIN PUBLIC KEY`).
    pub public: String,
    pub username: String,
    pub password: String,
    /// The users file's line: `user,hex(sha256("{user}password"))\n`.
    pub credentials: String,
}

/// Shows the user, never the password or the keys.
impl std::fmt::Debug for TaskAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskAuth")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// `len` characters drawn uniformly from `set` with the system's RNG.
fn random_string(len: usize, set: &[u8]) -> String {
    // The largest multiple of the set's size under 256: bytes at or above
    // it are drawn again, so every character is equally likely.
    let limit = 256 - 256 % set.len();
    let mut out = String::with_capacity(len);
    let mut byte = [0u8; 1];
    while out.len() < len {
        OsRng.fill_bytes(&mut byte);
        if usize::from(byte[0]) < limit {
            out.push(char::from(set[usize::from(byte[0]) % set.len()]));
        }
    }
    out
}

impl TaskAuth {
    /// New credentials for one task.
    pub fn make() -> Result<TaskAuth, Error> {
        let key = rsa::RsaPrivateKey::new(&mut OsRng, KEY_BITS)
            .map_err(|e| Error::Auth(format!("cannot make an RSA key: {e}")))?;
        let private = key
            .to_pkcs1_pem(LineEnding::LF)
            .map_err(|e| Error::Auth(e.to_string()))?
            .to_string();
        let public = key
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| Error::Auth(e.to_string()))?;
        let username = random_string(CREDENTIAL_LEN, SAFE);
        let all: Vec<u8> = SAFE.iter().chain(PUNCTUATION).copied().collect();
        let password = random_string(CREDENTIAL_LEN, &all);
        let credentials = format!("{username},{}\n", auth::password_hash(&username, &password));
        Ok(TaskAuth {
            private,
            public,
            username,
            password,
            credentials,
        })
    }

    /// The server's side: its key, and the users file written in `dir`
    /// (the run's own directory).
    pub fn server(&self, dir: &Path) -> Result<ServerAuth, Error> {
        let key = auth::private_key_from_pem(&self.private)
            .map_err(|e| Error::Auth(format!("participant 1's private key: {e}")))?;
        let users_path = dir.join("credentials");
        std::fs::write(&users_path, &self.credentials)
            .map_err(|e| Error::Auth(format!("{}: {e}", users_path.display())))?;
        Ok(ServerAuth {
            key,
            users_path,
            skew_s: SKEW_S,
            padding: Padding::Oaep,
        })
    }

    /// The client's side: who it is and the server's public key.
    pub fn client(&self) -> Result<ClientAuth, Error> {
        let key = auth::public_key_from_pem(&self.public)
            .map_err(|e| Error::Auth(format!("participant 1's public key: {e}")))?;
        Ok(ClientAuth {
            user: self.username.clone(),
            password: self.password.clone(),
            key,
            padding: Padding::Oaep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_as_the_iperf3_tool_makes_them() {
        let a = TaskAuth::make().unwrap();
        assert!(a.private.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        assert!(a.public.starts_with("-----BEGIN PUBLIC KEY-----\n"));
        assert_eq!(a.username.len(), 20);
        assert!(a.username.bytes().all(|b| SAFE.contains(&b)));
        assert_eq!(a.password.len(), 20);
        assert!(
            a.password
                .bytes()
                .all(|b| SAFE.contains(&b) || PUNCTUATION.contains(&b))
        );
        assert!(auth::users_file_accepts(
            &a.credentials,
            &a.username,
            &a.password
        ));
        assert!(!auth::users_file_accepts(&a.credentials, &a.username, "x"));
        // The key pair is one: a token made with the public key is
        // accepted by the server's check with the private one.
        let dir = tempfile::tempdir().unwrap();
        let server = a.server(dir.path()).unwrap();
        let token = a.client().unwrap().token().unwrap();
        assert_eq!(
            server.check(Some(&token)).map(|c| c.0),
            Ok(a.username.clone())
        );
        let other = TaskAuth::make().unwrap();
        let stranger = other.client().unwrap().token().unwrap();
        assert!(server.check(Some(&stranger)).is_err());
        assert!(server.check(None).is_err());
        // Debug shows no secret.
        let shown = format!("{a:?}");
        assert!(!shown.contains(&a.password) && !shown.contains("PRIVATE"));
    }

    #[test]
    fn random_strings_use_every_character_of_their_set() {
        let s = random_string(4000, b"ab");
        let a = s.bytes().filter(|&b| b == b'a').count();
        assert!((1800..=2200).contains(&a), "{a} of 4000");
    }
}
