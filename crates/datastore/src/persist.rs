//! Writing the model back to disk so that a restart comes back with it:
//! [`write_atomic`] replaces a file so that a reader (or a crash) sees
//! either the old text or the new one, never a mix, and [`Config::save`]
//! writes the model with it.
//!
//! The new text goes to a temporary file in the same directory
//! (`.NAME.tmp-PID-N`, created exclusively, so a file left behind by a
//! crashed writer is never reused or read), which is synced and then
//! renamed over the target; the directory is synced last so the rename
//! itself survives a power cut. Temporary files left by a crash are not
//! removed (another process may be writing one); they are never read as
//! the configuration, which is only ever the target name.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::*;
use crate::Config;

/// Uniquifies temporary names within this process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// The temporary file for `path` with sequence number `n`.
fn temp_name(path: &Path, n: u64) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".into());
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// The directory `path` is in (`.` for a bare file name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Replaces `path` with `text` atomically: a temporary file in the same
/// directory is written, synced (`sync_all`) and renamed over `path`, then
/// the directory is synced. On an error before the rename the temporary
/// file is removed and `path` is as it was; an error syncing the directory
/// comes after the rename (the new text is in place but may not survive a
/// power cut). A file that exists keeps its permissions.
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let (tmp, mut file) = loop {
        let tmp = temp_name(path, NEXT_TEMP.fetch_add(1, Ordering::Relaxed));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            // Left behind by a crash (or a writer that reused our pid).
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = (|| {
        if let Ok(meta) = fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir_of(path))?.sync_all()
}

impl Config {
    /// Writes the model to `path` atomically ([`write_atomic`]) as
    /// [`to_toml_string`](Self::to_toml_string) gives it, with relative
    /// paths (pcap files, `*_file`s, TLS files) rewritten so that
    /// [`Config::load`] of `path` resolves them to the same files.
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref();
        let cwd = std::env::current_dir().unwrap_or_default();
        let text = self
            .relocated(&crate::validate::config_dir(path), &cwd)
            .to_toml_string();
        write_atomic(path, &text)
    }

    /// The model with every relative path made relative to `dir` (where
    /// the file will be) or absolute (joined to `cwd`).
    fn relocated(&self, dir: &Path, cwd: &Path) -> Config {
        let mut c = self.clone();
        let fix = |p: &mut PathBuf| *p = relocate(p, dir, cwd);
        for b in &mut c.bridges {
            for f in [
                b.flows_file.as_mut().map(|f| &mut f.path),
                b.groups_file.as_mut(),
                b.meters_file.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                fix(f);
            }
            for p in &mut b.ports {
                if let PortKind::Interface {
                    backend: Backend::Pcap(pc),
                    ..
                } = &mut p.kind
                {
                    pc.read.iter_mut().for_each(fix);
                    pc.write.iter_mut().for_each(fix);
                }
            }
        }
        if let Some(t) = &mut c.tls {
            fix(&mut t.private_key);
            fix(&mut t.certificate);
            fix(&mut t.ca_cert);
        }
        c
    }
}

/// `p` as a file in `dir` must write it: unchanged if absolute or `dir` is
/// empty, the rest if under `dir`, else joined to `cwd`.
fn relocate(p: &Path, dir: &Path, cwd: &Path) -> PathBuf {
    if p.is_absolute() || dir.as_os_str().is_empty() {
        p.to_path_buf()
    } else if let Ok(rest) = p.strip_prefix(dir) {
        rest.to_path_buf()
    } else {
        cwd.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Host;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    const HOST: Host = Host { cpus: 4 };

    /// A fresh directory, removed when dropped.
    fn tmpdir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("datastore-persist-{name}-"))
            .tempdir()
            .unwrap()
    }

    /// A scratch directory (removed when the guard drops) with
    /// `fulmar.toml` written in it by `write_atomic`: (guard, file path).
    fn written(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let scratch = tmpdir(name);
        let path = scratch.path().join("fulmar.toml");
        write_atomic(&path, text).unwrap();
        (scratch, path)
    }

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A valid configuration of about `flows` flows, different for each
    /// `seed`.
    fn config_text(seed: usize, flows: usize) -> String {
        let mut t = format!(
            "[[bridges]]\nname = \"br{seed}\"\ndpid = {}\nflows = [\n",
            seed + 1
        );
        for i in 0..flows {
            t.push_str(&format!(
                "  \"table=0,priority={},ip,nw_dst=10.{}.{}.0/24,actions=output:1\",\n",
                i + 1,
                seed % 256,
                i % 256
            ));
        }
        t.push_str("]\n[[bridges.ports]]\nport = 1\ninterface = \"eth0\"\n");
        t
    }

    #[test]
    fn writes_and_replaces() {
        let (scratch, path) = written("replace", "one");
        let dir = scratch.path();
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        write_atomic(&path, "two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(listing(dir), vec!["fulmar.toml"], "no temporary file stays");
    }

    #[cfg(unix)]
    #[test]
    fn keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_scratch, path) = written("perm", "one");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, "two").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let (scratch, path) = written("fail", "old");
        let dir = scratch.path();
        // The rename fails: the target is a non-empty directory.
        let blocked = dir.join("blocked");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("x"), "x").unwrap();
        assert!(write_atomic(&blocked, "new").is_err());
        assert!(blocked.is_dir());
        assert_eq!(listing(dir), vec!["blocked", "fulmar.toml"]);
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        // No directory: nothing created.
        assert!(write_atomic(&dir.join("none/fulmar.toml"), "new").is_err());
        assert_eq!(listing(dir), vec!["blocked", "fulmar.toml"]);
    }

    #[test]
    fn a_temporary_file_left_by_a_crash_is_not_read_or_reused() {
        let scratch = tmpdir("crash");
        let dir = scratch.path();
        let path = dir.join("fulmar.toml");
        let good = config_text(1, 3);
        write_atomic(&path, &good).unwrap();
        // A crashed writer left half a file under the names the next
        // writes would pick.
        let next = NEXT_TEMP.load(Ordering::Relaxed);
        let mut left = Vec::new();
        for n in next..next + 4 {
            let t = temp_name(&path, n);
            fs::write(&t, "[[bridges]]\nname = \"half").unwrap();
            left.push(t);
        }
        let c = Config::load_for(&path, HOST).unwrap();
        assert_eq!(c.bridges[0].name, "br1");
        let newer = config_text(2, 3);
        write_atomic(&path, &newer).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), newer);
        let c = Config::load_for(&path, HOST).unwrap();
        assert_eq!(c.bridges[0].name, "br2");
        for t in &left {
            assert_eq!(
                fs::read_to_string(t).unwrap(),
                "[[bridges]]\nname = \"half",
                "a leftover is not touched"
            );
        }
        assert_eq!(listing(dir).len(), 1 + left.len());
    }

    #[test]
    fn concurrent_readers_never_see_a_torn_file() {
        let scratch = tmpdir("torn");
        let dir = scratch.path();
        let path = dir.join("fulmar.toml");
        let texts: Vec<String> = (0..200).map(|i| config_text(i, 600 + i % 7)).collect();
        assert!(
            texts[0].len() > 32_768,
            "large enough to take several writes"
        );
        write_atomic(&path, &texts[0]).unwrap();
        let known: Arc<HashSet<String>> = Arc::new(texts.iter().cloned().collect());
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, known, done) = (path.clone(), known.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0usize;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let text = fs::read_to_string(&path).unwrap();
                    assert!(known.contains(&text), "torn read of {} bytes", text.len());
                    if reads.is_multiple_of(32) {
                        Config::from_str_for(&text, &path, HOST).unwrap();
                    }
                    reads += 1;
                    if finished {
                        return reads;
                    }
                }
            })
        };
        for t in &texts {
            write_atomic(&path, t).unwrap();
        }
        done.store(true, Ordering::Release);
        let reads = reader.join().unwrap();
        assert!(reads > 0);
        assert_eq!(fs::read_to_string(&path).unwrap(), texts[199]);
        assert_eq!(listing(dir), vec!["fulmar.toml"]);
    }

    #[test]
    fn relocate_paths() {
        let cwd = Path::new("/work");
        let r = |p: &str, d: &str| relocate(Path::new(p), Path::new(d), cwd);
        assert_eq!(r("/abs/in.pcap", "conf"), PathBuf::from("/abs/in.pcap"));
        assert_eq!(r("conf/in.pcap", "conf"), PathBuf::from("in.pcap"));
        assert_eq!(r("conf/sub/in.pcap", "conf"), PathBuf::from("sub/in.pcap"));
        assert_eq!(
            r("other/in.pcap", "conf"),
            PathBuf::from("/work/other/in.pcap")
        );
        assert_eq!(r("in.pcap", "/etc/fulmar"), PathBuf::from("/work/in.pcap"));
        assert_eq!(r("in.pcap", ""), PathBuf::from("in.pcap"));
    }

    #[test]
    fn save_then_load_gives_the_same_model() {
        let scratch = tmpdir("save");
        let dir = scratch.path();
        fs::write(dir.join("br0.flows"), "table=0,priority=1,actions=drop\n").unwrap();
        let text = "[tls]\nprivate_key = \"k.pem\"\ncertificate = \"c.pem\"\nca_cert = \"ca.pem\"\n\
            [[bridges]]\nname = \"br0\"\nflows_file = \"br0.flows\"\n\
            [[bridges.ports]]\nport = 1\ninterface = \"in\"\nbackend = \"pcap\"\npcap_read = \"in.pcap\"\npcap_write = \"/tmp/out.pcap\"\n\
            [[bridges.controllers]]\ntarget = \"tls:192.0.2.1:6653\"\n";
        let c = Config::from_str_for(text, dir.join("fulmar.toml"), HOST).unwrap();
        // Saved elsewhere: the relative paths still name the same files.
        let other_scratch = tmpdir("save-other");
        let other = other_scratch.path();
        let path = other.join("state.toml");
        c.save(&path).unwrap();
        let back = Config::load_for(&path, HOST).unwrap();
        assert_eq!(back, c);

        // A model whose paths are relative to the working directory (a
        // config loaded as `conf/fulmar.toml`), saved under `conf/`.
        let rel = Config::from_str_for(
            text.replace("br0.flows", "/dev/null").as_str(),
            "conf/fulmar.toml",
            HOST,
        )
        .unwrap();
        let PortKind::Interface {
            backend: Backend::Pcap(pc),
            ..
        } = &rel.bridges[0].ports[0].kind
        else {
            panic!("not pcap")
        };
        assert_eq!(pc.read.as_deref(), Some(Path::new("conf/in.pcap")));
        let cwd = std::env::current_dir().unwrap();
        let moved = rel.relocated(Path::new("conf"), &cwd);
        let out = moved.to_toml_string();
        assert!(out.contains("pcap_read = \"in.pcap\""), "{out}");
        assert!(out.contains("private_key = \"k.pem\""), "{out}");
        let again = Config::from_str_for(&out, "conf/fulmar.toml", HOST).unwrap();
        assert_eq!(again.bridges[0].ports, rel.bridges[0].ports);
        assert_eq!(again.tls, rel.tls);
        // Saved to an absolute place, they become absolute.
        c.save(&path).unwrap();
        rel.save(&path).unwrap();
        let back = Config::load_for(&path, HOST).unwrap();
        let PortKind::Interface {
            backend: Backend::Pcap(pc),
            ..
        } = &back.bridges[0].ports[0].kind
        else {
            panic!("not pcap")
        };
        assert_eq!(pc.read.as_deref(), Some(cwd.join("conf/in.pcap").as_path()));
    }
}
