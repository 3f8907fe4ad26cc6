//! iperf3's RSA authentication, interoperable with iperf3 3.12 and 3.21.
//!
//! The client encrypts `user: U\npwd:  P\nts:   T` (T: Unix seconds) with
//! the server's RSA public key and sends it, base64 without line breaks,
//! as `authtoken` in its parameters. The server decrypts it with its private
//! key, refuses a token whose time is more than the skew threshold away
//! from its own clock, and looks the user up in its users file: lines of
//! `user,hex(sha256("{user}password"))`, `#` comments.
//!
//! Padding: iperf3 3.17 and later use OAEP (SHA-1, MGF1-SHA-1: OpenSSL's
//! defaults); older ones PKCS#1 v1.5 (`--use-pkcs1-padding`).
//!
//! The RSA is RustCrypto's `rsa` 0.9, which has a known timing side channel
//! in decryption (RUSTSEC-2023-0071, "Marvin") and no fixed release: a
//! server that takes tokens from untrusted networks exposes its private key
//! to an attacker who can time many decryptions. Use a key made for iperf
//! authentication only.

use base64::Engine as _;
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::{Oaep, Pkcs1v15Encrypt};
use sha2::{Digest, Sha256};

pub use rsa::{RsaPrivateKey, RsaPublicKey};

/// How the token is padded before RSA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Padding {
    /// OAEP with SHA-1 (iperf3 3.17 and later).
    #[default]
    Oaep,
    /// PKCS#1 v1.5 (iperf3 before 3.17, or `--use-pkcs1-padding`).
    Pkcs1,
}

/// Why a key, token or user was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("not an RSA key in PEM (PKCS#1 or PKCS#8/SPKI): {0}")]
    Key(String),
    #[error("the token is not base64")]
    Base64,
    #[error("the token does not decrypt with this key (wrong key or padding)")]
    Decrypt,
    #[error("the token's text is not 'user: U pwd: P ts: T'")]
    Format,
    #[error(
        "the token's time {ts} is {skew} s away from the server's clock (threshold {threshold} s)"
    )]
    Skew { ts: i64, skew: i64, threshold: i64 },
    #[error("unknown user or wrong password for '{0}'")]
    Denied(String),
    #[error("no authentication token in the parameters")]
    Missing,
    #[error("encryption failed: {0}")]
    Encrypt(String),
}

impl AuthError {
    /// iperf3's `check_authentication` return code where there is one
    /// (1 time skew, 3 no such user/password), for its debug line.
    pub fn code(&self) -> i32 {
        match self {
            AuthError::Skew { .. } => 1,
            AuthError::Denied(_) => 3,
            _ => -1,
        }
    }
}

/// What a token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
    /// Unix seconds when the client made the token.
    pub ts: i64,
}

/// The text iperf3 encrypts.
pub fn token_text(user: &str, password: &str, ts: i64) -> String {
    format!("user: {user}\npwd:  {password}\nts:   {ts}")
}

/// Reads the text as iperf3's `sscanf("user: %s\npwd:  %s\nts:   %ld")`
/// does: whitespace in the format matches any run of whitespace, `%s` a
/// word.
pub fn parse_token_text(text: &str) -> Option<Credentials> {
    let mut w = text.split_whitespace();
    if w.next()? != "user:" {
        return None;
    }
    let user = w.next()?.to_string();
    if w.next()? != "pwd:" {
        return None;
    }
    let password = w.next()?.to_string();
    if w.next()? != "ts:" {
        return None;
    }
    // %ld takes the leading digits of the word.
    let t = w.next()?;
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(t.len(), |(i, _)| i);
    let ts = t[..end].parse().ok()?;
    Some(Credentials { user, password, ts })
}

/// `hex(sha256("{user}password"))`, as the users file holds it.
pub fn password_hash(user: &str, password: &str) -> String {
    let d = Sha256::digest(format!("{{{user}}}{password}").as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the users file (its text) has `user` with this password. Lines
/// as iperf3 reads them: up to the first CR/LF, skipped if empty, without a
/// comma or starting with `#`; the user is the first comma-separated field,
/// the hash the second.
pub fn users_file_accepts(text: &str, user: &str, password: &str) -> bool {
    let want = password_hash(user, password);
    text.split('\n').any(|line| {
        let line = line.split('\r').next().unwrap_or("");
        if line.is_empty() || line.starts_with('#') || !line.contains(',') {
            return false;
        }
        // strtok(",") skips empty fields.
        let mut f = line.split(',').filter(|s| !s.is_empty());
        f.next() == Some(user) && f.next() == Some(want.as_str())
    })
}

/// An RSA public key from PEM: `BEGIN PUBLIC KEY` (what `openssl rsa
/// -pubout` writes, and iperf3 reads) or `BEGIN RSA PUBLIC KEY`.
pub fn public_key_from_pem(pem: &str) -> Result<RsaPublicKey, AuthError> {
    RsaPublicKey::from_public_key_pem(pem.trim())
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(pem.trim()))
        .map_err(|e| AuthError::Key(e.to_string()))
}

/// An RSA private key from PEM: `BEGIN PRIVATE KEY` or `BEGIN RSA PRIVATE
/// KEY` (unencrypted: iperf3 has no pass phrase prompt for it either).
pub fn private_key_from_pem(pem: &str) -> Result<RsaPrivateKey, AuthError> {
    if pem.contains("ENCRYPTED") {
        return Err(AuthError::Key(
            "the key is protected by a pass phrase; write it unprotected with \
             'openssl rsa -in KEY -out KEY.plain'"
                .into(),
        ));
    }
    RsaPrivateKey::from_pkcs8_pem(pem.trim())
        .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem.trim()))
        .map_err(|e| AuthError::Key(e.to_string()))
}

/// The client's token: the text encrypted with the server's key, base64.
pub fn encode_token(
    key: &RsaPublicKey,
    user: &str,
    password: &str,
    ts: i64,
    padding: Padding,
) -> Result<String, AuthError> {
    let text = token_text(user, password, ts);
    let mut rng = rsa::rand_core::OsRng;
    let sealed = match padding {
        Padding::Oaep => key.encrypt(&mut rng, Oaep::new::<sha1::Sha1>(), text.as_bytes()),
        Padding::Pkcs1 => key.encrypt(&mut rng, Pkcs1v15Encrypt, text.as_bytes()),
    }
    .map_err(|e| AuthError::Encrypt(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
}

/// The server's side: what the token says, if it decrypts and reads.
pub fn decode_token(
    key: &RsaPrivateKey,
    token: &str,
    padding: Padding,
) -> Result<Credentials, AuthError> {
    let sealed = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| AuthError::Base64)?;
    let text = match padding {
        Padding::Oaep => key.decrypt(Oaep::new::<sha1::Sha1>(), &sealed),
        Padding::Pkcs1 => key.decrypt(Pkcs1v15Encrypt, &sealed),
    }
    .map_err(|_| AuthError::Decrypt)?;
    // iperf3 reads the plaintext as a C string.
    let text = text.split(|&b| b == 0).next().unwrap_or(&[]);
    parse_token_text(&String::from_utf8_lossy(text)).ok_or(AuthError::Format)
}

/// The whole check a server makes: token present, decrypts, time within
/// `skew_s` of `now`, user and password in the users file (its text).
pub fn check(
    key: &RsaPrivateKey,
    padding: Padding,
    token: Option<&str>,
    users_file: &str,
    now: i64,
    skew_s: i64,
) -> Result<Credentials, AuthError> {
    let c = decode_token(key, token.ok_or(AuthError::Missing)?, padding)?;
    let skew = now.saturating_sub(c.ts);
    if skew > skew_s || skew < -skew_s {
        return Err(AuthError::Skew {
            ts: c.ts,
            skew,
            threshold: skew_s,
        });
    }
    if !users_file_accepts(users_file, &c.user, &c.password) {
        return Err(AuthError::Denied(c.user));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// One 1024-bit key for all tests (made once: key generation is slow
    /// in a debug build).
    fn key() -> &'static RsaPrivateKey {
        static K: OnceLock<RsaPrivateKey> = OnceLock::new();
        K.get_or_init(|| RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap())
    }

    #[test]
    fn the_hash_is_sha256_of_braced_user_and_password() {
        // printf '{mario}rossi' | sha256sum
        assert_eq!(
            password_hash("mario", "rossi"),
            "bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b"
        );
    }

    #[test]
    fn users_file_lines_read_as_iperf3_reads_them() {
        let h = password_hash("mario", "rossi");
        let file = format!("# a comment\r\n\nnocomma\nluigi,{h}\nmario,{h}\r\n");
        assert!(users_file_accepts(&file, "mario", "rossi"));
        assert!(!users_file_accepts(&file, "mario", "verdi"));
        // luigi's line holds mario's hash: a hash is per user.
        assert!(!users_file_accepts(&file, "luigi", "rossi"));
        assert!(!users_file_accepts(
            &format!("#mario,{h}\n"),
            "mario",
            "rossi"
        ));
        assert!(users_file_accepts(
            &format!("mario,{h},extra"),
            "mario",
            "rossi"
        ));
    }

    #[test]
    fn token_text_round_trips_and_junk_is_refused() {
        let t = token_text("mario", "rossi", 1_700_000_000);
        assert_eq!(t, "user: mario\npwd:  rossi\nts:   1700000000");
        let c = parse_token_text(&t).unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_str(), c.ts),
            ("mario", "rossi", 1_700_000_000)
        );
        assert_eq!(parse_token_text("user: a\npwd: b\n"), None);
        assert_eq!(parse_token_text("usr: a\npwd: b\nts: 1"), None);
        assert_eq!(parse_token_text("user: a\npwd: b\nts: x"), None);
    }

    #[test]
    fn a_token_decrypts_with_the_padding_it_was_made_with_only() {
        let k = key();
        let pubk = RsaPublicKey::from(k);
        for (pad, other) in [
            (Padding::Oaep, Padding::Pkcs1),
            (Padding::Pkcs1, Padding::Oaep),
        ] {
            let tok = encode_token(&pubk, "mario", "rossi", 42, pad).unwrap();
            assert!(!tok.contains('\n'));
            let c = decode_token(k, &tok, pad).unwrap();
            assert_eq!(
                (c.user.as_str(), c.password.as_str(), c.ts),
                ("mario", "rossi", 42)
            );
            assert_eq!(decode_token(k, &tok, other), Err(AuthError::Decrypt));
        }
        assert_eq!(decode_token(k, "!!", Padding::Oaep), Err(AuthError::Base64));
    }

    #[test]
    fn the_server_check_refuses_skew_unknown_users_and_missing_tokens() {
        let k = key();
        let pubk = RsaPublicKey::from(k);
        let users = format!("mario,{}\n", password_hash("mario", "rossi"));
        let now = 1_000_000;
        let tok = |u: &str, p: &str, ts| encode_token(&pubk, u, p, ts, Padding::Oaep).unwrap();
        let ok = check(
            k,
            Padding::Oaep,
            Some(&tok("mario", "rossi", now - 10)),
            &users,
            now,
            10,
        );
        assert_eq!(ok.unwrap().user, "mario");
        let late = check(
            k,
            Padding::Oaep,
            Some(&tok("mario", "rossi", now - 11)),
            &users,
            now,
            10,
        );
        assert_eq!(late.unwrap_err().code(), 1);
        let early = check(
            k,
            Padding::Oaep,
            Some(&tok("mario", "rossi", now + 11)),
            &users,
            now,
            10,
        );
        assert_eq!(early.unwrap_err().code(), 1);
        let wrong = check(
            k,
            Padding::Oaep,
            Some(&tok("mario", "verdi", now)),
            &users,
            now,
            10,
        );
        assert_eq!(wrong, Err(AuthError::Denied("mario".into())));
        assert_eq!(
            check(k, Padding::Oaep, None, &users, now, 10),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn keys_load_from_both_pem_forms() {
        use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
        use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
        let k = key();
        let pubk = RsaPublicKey::from(k);
        let p8 = k.to_pkcs8_pem(LineEnding::LF).unwrap();
        let p1 = k.to_pkcs1_pem(LineEnding::LF).unwrap();
        assert_eq!(&private_key_from_pem(&p8).unwrap(), k);
        assert_eq!(&private_key_from_pem(&p1).unwrap(), k);
        let s = pubk.to_public_key_pem(LineEnding::LF).unwrap();
        let s1 = pubk.to_pkcs1_pem(LineEnding::LF).unwrap();
        assert_eq!(public_key_from_pem(&s).unwrap(), pubk);
        assert_eq!(public_key_from_pem(&s1).unwrap(), pubk);
        assert!(matches!(
            public_key_from_pem("junk"),
            Err(AuthError::Key(_))
        ));
        assert!(matches!(
            private_key_from_pem("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"),
            Err(AuthError::Key(_))
        ));
    }
}
