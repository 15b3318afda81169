//! Who may use the web page. One secret (the token, 32 random bytes in a 0600 file under
//! the config folder) signs every session cookie and CSRF token, so sessions survive a
//! daemon restart and `task web --revoke` ends them all by replacing it. A person gets in
//! with a one-time login code from `task web --url`: a file named by the code's hash,
//! redeemed by removing it (only one remover can win) within [`CODE_TTL`].
//!
//! The signing and checking are plain functions of the key; the files are the thin edge.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::core::error::{Error, Result};

/// How long a login code may wait to be used.
pub const CODE_TTL: Duration = Duration::minutes(10);
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::days(30);
/// Failed logins allowed per address (and in all) within [`FAIL_WINDOW`].
pub const FAILS_ALLOWED: usize = 5;
/// The window failed logins are counted in.
pub const FAIL_WINDOW: Duration = Duration::minutes(1);
/// The login code's letters: no 0/o, 1/l/i, so it can be read off a screen and typed.
const CODE_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
const CODE_LEN: usize = 10;

/// Bytes as lower-case hex digits.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random(n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Environment(format!("no random numbers from the system ({e}); cannot make a secret")))?;
    Ok(buf)
}

fn mac(key: &[u8], what: &str, value: &str) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(what.as_bytes());
    m.update(b"|");
    m.update(value.as_bytes());
    m
}

fn sign(key: &[u8], what: &str, value: &str) -> String {
    hex(&mac(key, what, value).finalize().into_bytes())
}

/// Whether `sig` (hex) is `value`'s signature for `what`, compared in constant time.
fn verify(key: &[u8], what: &str, value: &str, sig: &str) -> bool {
    if sig.len() != 64 || !sig.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let bytes: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&sig[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect();
    mac(key, what, value).verify_slice(&bytes).is_ok()
}

/// A new session's cookie value, `<issued unix seconds>-<random>.<signature>`; the part
/// before the dot is the session's id, which names it in the events it records.
pub fn new_session(key: &[u8], now: DateTime<Utc>) -> Result<String> {
    let sid = format!("{}-{}", now.timestamp(), hex(&random(12)?));
    Ok(format!("{sid}.{}", sign(key, "session", &sid)))
}

/// The session id in `cookie` when it is signed with `key` and not expired.
pub fn check_session(key: &[u8], cookie: &str, now: DateTime<Utc>) -> Option<String> {
    let (sid, sig) = cookie.split_once('.')?;
    if !verify(key, "session", sid, sig) {
        return None;
    }
    let issued: i64 = sid.split_once('-')?.0.parse().ok()?;
    let issued = DateTime::<Utc>::from_timestamp(issued, 0)?;
    (now >= issued && now - issued < SESSION_TTL).then(|| sid.to_string())
}

/// The short name of a session in events and logs (`web:` and its first random digits).
pub fn session_label(sid: &str) -> String {
    let random = sid.split_once('-').map_or(sid, |(_, r)| r);
    format!("web:{}", &random[..random.len().min(8)])
}

/// The CSRF token of a session: forms carry it, and a state-changing request without the
/// right one is refused (a page elsewhere cannot know it).
pub fn csrf(key: &[u8], sid: &str) -> String {
    sign(key, "csrf", sid)
}

/// Whether `given` is the CSRF token of session `sid`.
pub fn check_csrf(key: &[u8], sid: &str, given: &str) -> bool {
    verify(key, "csrf", sid, given)
}

/// The name of a login code's file: its hash, so a listing of the folder gives no code away.
fn code_file(code: &str) -> String {
    hex(&Sha256::digest(code.trim().to_ascii_lowercase().as_bytes()))
}

/// Failed logins, per address and in all: past [`FAILS_ALLOWED`] in [`FAIL_WINDOW`], more
/// tries are refused until the window has moved on.
#[derive(Debug, Default)]
pub struct Limiter {
    fails: BTreeMap<IpAddr, Vec<DateTime<Utc>>>,
    all: Vec<DateTime<Utc>>,
}

impl Limiter {
    fn prune(&mut self, now: DateTime<Utc>) {
        let keep = |t: &DateTime<Utc>| now - *t < FAIL_WINDOW;
        self.all.retain(keep);
        for v in self.fails.values_mut() {
            v.retain(keep);
        }
        self.fails.retain(|_, v| !v.is_empty());
    }

    /// Whether `from` may try a login now. The global bound is four times the per-address
    /// one, so one noisy address does not lock everyone out, and many cannot guess freely.
    pub fn allows(&mut self, from: IpAddr, now: DateTime<Utc>) -> bool {
        self.prune(now);
        self.fails.get(&from).map_or(0, Vec::len) < FAILS_ALLOWED && self.all.len() < 4 * FAILS_ALLOWED
    }

    /// Count a failed login from `from`.
    pub fn failed(&mut self, from: IpAddr, now: DateTime<Utc>) {
        self.fails.entry(from).or_default().push(now);
        self.all.push(now);
    }
}

/// The web page's secrets on disk: `<config>/agent-orchestrator/web/` (0700) with `token`
/// (0600) and `codes/` (one file per login code not used yet).
#[derive(Debug, Clone)]
pub struct Keys {
    dir: PathBuf,
}

impl Keys {
    /// The user's keys (in the config folder, beside config.toml).
    pub fn of_user() -> Result<Keys> {
        let config = crate::io::config::path().ok_or_else(|| {
            Error::Environment("no config folder (set HOME or XDG_CONFIG_HOME) to keep the web page's token in".into())
        })?;
        Ok(Keys::at(config.parent().unwrap_or(Path::new(".")).join("web")))
    }

    /// Keys kept in `dir`.
    pub fn at(dir: PathBuf) -> Keys {
        Keys { dir }
    }

    fn token_path(&self) -> PathBuf {
        self.dir.join("token")
    }

    fn codes(&self) -> PathBuf {
        self.dir.join("codes")
    }

    fn prepare(&self) -> Result<()> {
        let codes = self.codes();
        crate::store::fsutil::create_dir_all(&codes)?;
        for d in [&self.dir, &codes] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::io("restrict", d, e))?;
        }
        Ok(())
    }

    /// The signing key, made at first use. A token file that is not 64 hex digits is an
    /// error to fix (or revoke), never silently replaced: that would log everyone out.
    pub fn token(&self) -> Result<Vec<u8>> {
        let p = self.token_path();
        match std::fs::read_to_string(&p) {
            Ok(s) => {
                let s = s.trim();
                if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Error::Environment(format!(
                        "{} is not a web token (64 hex digits); make a new one with `task web --revoke`",
                        p.display()
                    )));
                }
                Ok(s.as_bytes().to_vec())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.prepare()?;
                let token = hex(&random(32)?);
                // Two first uses at once: the first file wins and both read it.
                crate::store::fsutil::atomic_create(&p, token.as_bytes())?;
                self.token()
            }
            Err(e) => Err(Error::io("read", &p, e)),
        }
    }

    /// A new token (every session ends) and no login code left.
    pub fn revoke(&self) -> Result<()> {
        self.prepare()?;
        crate::store::fsutil::atomic_write(&self.token_path(), hex(&random(32)?).as_bytes())?;
        if let Ok(rd) = std::fs::read_dir(self.codes()) {
            for e in rd.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(())
    }

    /// A new one-time login code, good for [`CODE_TTL`].
    pub fn new_code(&self) -> Result<String> {
        self.token()?;
        self.prepare()?;
        let bytes = random(CODE_LEN)?;
        let code: String = bytes
            .iter()
            .map(|b| CODE_ALPHABET[*b as usize % CODE_ALPHABET.len()] as char)
            .collect();
        crate::store::fsutil::atomic_write(&self.codes().join(code_file(&code)), b"")?;
        Ok(code)
    }

    /// Use `code` up: true when it existed, was not used before and is not expired. Removing
    /// its file is the use, so two logins with one code cannot both succeed.
    pub fn redeem(&self, code: &str, now: DateTime<Utc>) -> bool {
        let code = code.trim();
        if code.is_empty() || code.len() > 64 || !code.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return false;
        }
        let p = self.codes().join(code_file(code));
        let made = std::fs::symlink_metadata(&p)
            .and_then(|m| m.modified())
            .ok()
            .map(DateTime::<Utc>::from);
        let Some(made) = made else { return false };
        if std::fs::remove_file(&p).is_err() {
            return false;
        }
        now - made < CODE_TTL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_session_is_good_with_its_key_until_it_expires() {
        let key = b"k".repeat(64);
        let c = new_session(&key, at(0)).unwrap();
        let sid = check_session(&key, &c, at(60)).unwrap();
        assert!(c.starts_with(&sid));
        assert_eq!(
            check_session(&b"x".repeat(64), &c, at(60)),
            None,
            "another key (revoked)"
        );
        assert_eq!(check_session(&key, &c, at(0) + SESSION_TTL), None, "expired");
        let forged = format!("{}-00.{}", at(0).timestamp(), c.split_once('.').unwrap().1);
        assert_eq!(
            check_session(&key, &forged, at(60)),
            None,
            "another id, the old signature"
        );
        assert_eq!(check_session(&key, "garbage", at(60)), None);
        assert_eq!(check_session(&key, &format!("{sid}.zz"), at(60)), None);
    }

    #[test]
    fn csrf_belongs_to_one_session() {
        let key = b"k".repeat(64);
        let t = csrf(&key, "1-aa");
        assert!(check_csrf(&key, "1-aa", &t));
        assert!(!check_csrf(&key, "1-ab", &t));
        assert!(!check_csrf(&key, "1-aa", ""));
        assert!(!check_csrf(&key, "1-aa", &t.to_uppercase().replace('A', "B")));
    }

    #[test]
    fn a_code_works_once_and_not_after_revoke() {
        let d = tempfile::tempdir().unwrap();
        let k = Keys::at(d.path().join("web"));
        let code = k.new_code().unwrap();
        assert_eq!(code.len(), CODE_LEN);
        let now = Utc::now();
        assert!(!k.redeem("wrong", now));
        assert!(k.redeem(&code, now));
        assert!(!k.redeem(&code, now), "used once");
        let token = k.token().unwrap();
        let code = k.new_code().unwrap();
        k.revoke().unwrap();
        assert_ne!(k.token().unwrap(), token);
        assert!(!k.redeem(&code, now), "revoke drops the codes");
        let code = k.new_code().unwrap();
        assert!(!k.redeem(&code, Utc::now() + CODE_TTL), "expired");
        let mode = std::fs::metadata(d.path().join("web/token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn failed_logins_are_limited_per_address_and_in_all() {
        let mut l = Limiter::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..FAILS_ALLOWED {
            assert!(l.allows(a, at(0)));
            l.failed(a, at(0));
        }
        assert!(!l.allows(a, at(1)));
        assert!(
            l.allows("127.0.0.2".parse().unwrap(), at(1)),
            "another address may still try"
        );
        assert!(l.allows(a, at(0) + FAIL_WINDOW), "the window moved on");
        for i in 0..4 * FAILS_ALLOWED {
            l.failed(IpAddr::from([10, 0, 0, i as u8]), at(100));
        }
        assert!(!l.allows("127.0.0.3".parse().unwrap(), at(100)), "too many in all");
    }
}
