//! The credentials' files, read before the first test: the server's private
//! key and users file (iperf3's errors 23 and 35), the client's public key
//! and password (error 22). Which flags name them is the caller's check.

use crate::client::ClientAuth;
use crate::server::ServerAuth;
use linerate_iperf_proto::IErr;
use linerate_iperf_proto::auth::{self, Padding};
use std::path::{Path, PathBuf};

/// Credentials that could not be read: iperf3's message with the file
/// (or what was missing), and why.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {cause}")]
pub struct CredentialError {
    pub context: String,
    pub cause: String,
}

impl CredentialError {
    fn new(what: IErr, file: &Path, cause: impl std::fmt::Display) -> Self {
        Self {
            context: format!("{}: {}", what.message(), file.display()),
            cause: cause.to_string(),
        }
    }
}

/// The server's key (PEM, unprotected) and users file, checked now; the
/// users file is read again at every test, by its absolute path (a
/// daemon's working directory becomes /).
pub fn server_auth(
    key: &Path,
    users: &Path,
    skew_s: i64,
    padding: Padding,
) -> Result<ServerAuth, CredentialError> {
    let bad_users =
        |e: &dyn std::fmt::Display| CredentialError::new(IErr::SERVER_AUTH_USERS, users, e);
    std::fs::File::open(users).map_err(|e| bad_users(&e))?;
    let bad_key = |e: &dyn std::fmt::Display| CredentialError::new(IErr::SET_SERVER_AUTH, key, e);
    let pem = std::fs::read_to_string(key).map_err(|e| bad_key(&e))?;
    let key = auth::private_key_from_pem(&pem).map_err(|e| bad_key(&e))?;
    Ok(ServerAuth {
        key,
        users_path: absolute(users).map_err(|e| bad_users(&e))?,
        skew_s,
        padding,
    })
}

fn absolute(p: &Path) -> std::io::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// The client's credentials: `user`, the server's public key, and the
/// password from IPERF3_PASSWORD or else asked on the terminal.
pub fn client_auth(
    user: &str,
    key: &Path,
    padding: Padding,
) -> Result<ClientAuth, CredentialError> {
    let bad_key = |e: &dyn std::fmt::Display| CredentialError::new(IErr::SET_CLIENT_AUTH, key, e);
    let pem = std::fs::read_to_string(key).map_err(|e| bad_key(&e))?;
    let key = auth::public_key_from_pem(&pem).map_err(|e| bad_key(&e))?;
    let password = match std::env::var("IPERF3_PASSWORD") {
        Ok(p) => p,
        Err(_) => {
            linerate_backend::term::read_password("Password: ").map_err(|e| CredentialError {
                context: format!(
                    "{} (no IPERF3_PASSWORD, and no terminal to ask on)",
                    IErr::SET_CLIENT_AUTH.message()
                ),
                cause: e.to_string(),
            })?
        }
    };
    Ok(ClientAuth {
        user: user.to_string(),
        password,
        key,
        padding,
    })
}
