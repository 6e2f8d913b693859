//! The SSH side (RFC 6242): russh accepts connections, authenticates
//! public keys against the authorized-keys file, and hands each "netconf"
//! subsystem channel to a task that frames messages and runs them through
//! [`rpc::Session`] on a blocking thread (datastore calls block).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use russh::keys::PrivateKey;
use russh::server::{Auth, Msg, Session as SshSession, VerifiedPublicKey};
use russh::{Channel, ChannelId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::framing::{frame, Framer, Mode};
use crate::rpc::{self, After, Shared, Store};

/// Largest NETCONF message taken (bytes).
pub const MAX_MESSAGE: usize = 4 << 20;

/// Loads the host key, or creates an Ed25519 one (mode 0600) when `path`
/// does not exist.
pub fn host_key(path: &Path) -> Result<PrivateKey, String> {
    if path.exists() {
        return russh::keys::load_secret_key(path, None)
            .map_err(|e| format!("host key {}: {e}", path.display()));
    }
    let mut seed = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .map_err(|_| "no randomness for a host key".to_string())?;
    let kp = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&seed);
    let key = PrivateKey::from(kp);
    let text = key
        .to_openssh(russh::keys::ssh_key::LineEnding::LF)
        .map_err(|e| format!("host key: {e}"))?;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("host key {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("host key {}: {e}", path.display()))?;
    Ok(key)
}

/// Reads an OpenSSH authorized_keys file (`TYPE BASE64 [COMMENT]` lines;
/// options before the type are not supported and such lines are skipped).
pub fn authorized_keys(path: &Path) -> Vec<russh::keys::PublicKey> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let _ty = f.next()?;
            russh::keys::parse_public_key_base64(f.next()?).ok()
        })
        .collect()
}

/// What every connection shares.
pub struct Server {
    pub store: Arc<dyn Store>,
    pub shared: Arc<Shared>,
    pub authorized: PathBuf,
    pub next_id: AtomicU32,
}

/// One SSH connection.
pub struct Conn {
    pub server: Arc<Server>,
    pub channels: HashMap<ChannelId, Channel<Msg>>,
}

impl russh::server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_publickey(
        &mut self,
        _user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(self.check(key.public_key))
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut SshSession,
    ) -> Result<(), Self::Error> {
        self.channels.insert(channel.id(), channel);
        reply.accept().await;
        Ok(())
    }

    async fn subsystem_request(
        &mut self,
        id: ChannelId,
        name: &str,
        session: &mut SshSession,
    ) -> Result<(), Self::Error> {
        match (name, self.channels.remove(&id)) {
            ("netconf", Some(ch)) => {
                session.channel_success(id)?;
                let server = self.server.clone();
                tokio::spawn(run_netconf(server, ch));
            }
            _ => session.channel_failure(id)?,
        }
        Ok(())
    }
}

impl Conn {
    fn check(&self, key: &russh::keys::PublicKey) -> Auth {
        let ok = authorized_keys(&self.server.authorized)
            .iter()
            .any(|k| k.key_data() == key.key_data());
        if ok {
            Auth::Accept
        } else {
            Auth::reject()
        }
    }
}

async fn run_netconf(server: Arc<Server>, ch: Channel<Msg>) {
    let id = server.next_id.fetch_add(1, Ordering::Relaxed);
    let killed = server.shared.register(id);
    let mut stream = ch.into_stream();
    if let Err(e) = serve(&server, id, &mut stream, &killed).await {
        tracing::info!("netconf session {id}: {e}");
    }
    server.shared.unregister(id);
    let _ = stream.shutdown().await;
}

async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    server: &Arc<Server>,
    id: u32,
    stream: &mut S,
    killed: &tokio::sync::Notify,
) -> Result<(), String> {
    let hello = rpc::server_hello(id);
    stream
        .write_all(&frame(Mode::EndOfMessage, hello.as_bytes()))
        .await
        .map_err(|e| e.to_string())?;
    let mut framer = Framer::new(MAX_MESSAGE);
    let mut buf = vec![0u8; 64 * 1024];
    let mut hello_seen = false;
    loop {
        let n = tokio::select! {
            r = stream.read(&mut buf) => r.map_err(|e| e.to_string())?,
            _ = killed.notified() => return Err("killed".into()),
        };
        if n == 0 {
            return Ok(());
        }
        framer.push(&buf[..n]);
        while let Some(msg) = framer.next_message()? {
            if !hello_seen {
                let mode = rpc::client_hello(&msg)?;
                framer.set_mode(mode);
                hello_seen = true;
                continue;
            }
            let srv = server.clone();
            let (reply, after) = tokio::task::spawn_blocking(move || {
                rpc::Session {
                    id,
                    store: srv.store.as_ref(),
                    shared: &srv.shared,
                }
                .handle(&msg)
            })
            .await
            .map_err(|e| e.to_string())?;
            stream
                .write_all(&frame(framer.mode(), reply.as_bytes()))
                .await
                .map_err(|e| e.to_string())?;
            stream.flush().await.map_err(|e| e.to_string())?;
            if after == After::Close {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn host_key_is_created_0600_then_loaded() {
        let dir = std::env::temp_dir().join(format!("ofconfig-hk-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("host_key");
        let _ = std::fs::remove_file(&path);
        let k1 = host_key(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let k2 = host_key(&path).unwrap();
        assert_eq!(k1.public_key().key_data(), k2.public_key().key_data());
        std::fs::write(dir.join("bad"), "not a key").unwrap();
        assert!(host_key(&dir.join("bad")).is_err());
        // authorized_keys: comments, blank and broken lines are skipped.
        let pubkey = k1.public_key().to_openssh().unwrap();
        std::fs::write(
            dir.join("ak"),
            format!("# comment\n\nssh-ed25519 !!!broken\n{pubkey} me@host\n"),
        )
        .unwrap();
        let keys = authorized_keys(&dir.join("ak"));
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].key_data(), k1.public_key().key_data());
        assert!(authorized_keys(&dir.join("missing")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
