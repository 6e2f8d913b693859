//! OpenFlow over unix domain sockets (`punix:PATH`, `unix:PATH`), as Open
//! vSwitch offers on `/run/openvswitch/BRIDGE.mgmt`: the socket file's
//! set-up (stale file, parent directory, permissions, group) and who may
//! talk through it.
//!
//! The file permissions are the first gate (connecting needs write
//! permission on the file); the peer's credentials, read from the kernel
//! when a channel is accepted, are the second: a peer that is neither root
//! nor the switch's own user nor (when a group is configured) a member of
//! that group is refused.

use std::fs::{self, Permissions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Who may open a `punix:` socket: the file's mode and, optionally, the
/// group it belongs to (whose members may then connect).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnixPerms {
    /// Permission bits of the socket file (`0o600`: the owner only).
    pub mode: u32,
    /// Group id the socket file is given (`chown :GID`); its members are
    /// let in. `None`: the file keeps the process's group and only root
    /// and the switch's own user are let in.
    pub group: Option<u32>,
}

impl Default for UnixPerms {
    /// Owner only: mode `0o600`, no group.
    fn default() -> Self {
        UnixPerms {
            mode: 0o600,
            group: None,
        }
    }
}

impl UnixPerms {
    /// Owner and the members of group `gid`: mode `0o660`, group `gid`.
    pub fn group(gid: u32) -> Self {
        UnixPerms {
            mode: 0o660,
            group: Some(gid),
        }
    }
}

/// A socket file this process bound: removed when its listener stops,
/// unless another one has taken its place since.
#[derive(Debug)]
pub(crate) struct SocketFile {
    pub(crate) path: PathBuf,
    dev: u64,
    ino: u64,
    /// The file's owner: the switch's own (effective) user.
    pub(crate) owner: u32,
}

impl SocketFile {
    /// Removes the file if it is still the one bound.
    pub(crate) fn remove(&self) {
        let same = fs::symlink_metadata(&self.path)
            .map(|m| m.dev() == self.dev && m.ino() == self.ino)
            .unwrap_or(false);
        if same {
            if let Err(e) = fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove socket file");
            }
        }
    }
}

/// Gets `path` ready for binding: creates its parent directory if missing
/// and removes a stale socket file. Anything else in the way is an error.
pub(crate) fn prepare(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            tracing::info!(path = %path.display(), "removing stale socket file");
            fs::remove_file(path)
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Gives the freshly bound socket file at `path` its group and mode; on
/// failure the file is removed.
pub(crate) fn set_perms(path: &Path, perms: &UnixPerms) -> io::Result<SocketFile> {
    let apply = || -> io::Result<SocketFile> {
        if let Some(gid) = perms.group {
            std::os::unix::fs::chown(path, None, Some(gid))?;
        }
        fs::set_permissions(path, Permissions::from_mode(perms.mode))?;
        let m = fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            owner: m.uid(),
        })
    };
    apply().inspect_err(|_| {
        let _ = fs::remove_file(path);
    })
}

/// Whether a peer with user `uid` and primary group `gid` may use a socket
/// owned by `owner` and restricted to `group`: root, the owner, and (with
/// a group) whoever `in_group(uid, group)` says is a member (asked only
/// when the primary group is not already it).
pub(crate) fn peer_allowed(
    uid: u32,
    gid: u32,
    owner: u32,
    group: Option<u32>,
    in_group: impl FnOnce(u32, u32) -> bool,
) -> bool {
    if uid == 0 || uid == owner {
        return true;
    }
    match group {
        Some(g) => gid == g || in_group(uid, g),
        None => false,
    }
}

/// Whether user `uid` belongs to group `gid` by the system's databases:
/// its primary group in `/etc/passwd`, or listed as a member in
/// `/etc/group` (blocking file reads).
pub(crate) fn user_in_group(uid: u32, gid: u32) -> bool {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    let group = fs::read_to_string("/etc/group").unwrap_or_default();
    member_by_files(&passwd, &group, uid, gid)
}

/// [`user_in_group`] over the texts of `/etc/passwd` and `/etc/group`.
pub(crate) fn member_by_files(passwd: &str, group: &str, uid: u32, gid: u32) -> bool {
    // name:x:uid:gid:...
    let user = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        match (f.first(), f.get(2), f.get(3)) {
            (Some(name), Some(u), Some(g)) if u.parse() == Ok(uid) => Some((*name, g.parse().ok())),
            _ => None,
        }
    });
    let Some((name, primary)) = user else {
        return false;
    };
    if primary == Some(gid) {
        return true;
    }
    // name:x:gid:member,member
    group.lines().any(|l| {
        let f: Vec<&str> = l.split(':').collect();
        f.get(2).and_then(|g| g.parse().ok()) == Some(gid)
            && f.get(3)
                .is_some_and(|m| m.split(',').any(|m| m.trim() == name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_is_let_in() {
        let never = |_, _| panic!("not asked");
        assert!(peer_allowed(0, 0, 1000, None, never));
        assert!(peer_allowed(1000, 5, 1000, None, never));
        assert!(!peer_allowed(1001, 5, 1000, None, never));
        assert!(peer_allowed(1001, 42, 1000, Some(42), never));
        assert!(peer_allowed(1001, 5, 1000, Some(42), |u, g| (u, g) == (1001, 42)));
        assert!(!peer_allowed(1001, 5, 1000, Some(42), |_, _| false));
    }

    #[test]
    fn group_membership_from_files() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nalice:x:1001:100::/home/alice:/bin/sh\nbob:x:1002:1002::/:/bin/sh\n";
        let group = "root:x:0:\nusers:x:100:\nfulmar:x:42:carol,bob\nalice2:x:43:alicex\n";
        assert!(member_by_files(passwd, group, 1001, 100), "primary group");
        assert!(member_by_files(passwd, group, 1002, 42), "listed member");
        assert!(!member_by_files(passwd, group, 1001, 42));
        assert!(!member_by_files(passwd, group, 1001, 43), "no prefix match");
        assert!(!member_by_files(passwd, group, 7, 42), "unknown user");
    }
}
