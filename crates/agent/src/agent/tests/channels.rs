//! Unix sockets, stoppable listeners and connectors, channel status, the
//! run-time fail mode.

use super::*;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

/// A temporary directory for `what`, the path of a socket in it and an
/// agent on a memory switch (not listening yet).
fn unix_agent(what: &str) -> (TempDir, PathBuf, Arc<Agent<MemorySwitch>>) {
    let dir = TempDir::new(what);
    let path = dir.0.join("br0.mgmt");
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    (dir, path, agent)
}

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "fulmar-agent-{}-{}-{what}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn unix_client(path: &Path) -> Client<UnixStream> {
    Client::new(UnixStream::connect(path).await.unwrap()).await
}

/// Waits until `cond` holds (or fails the test after [`WAIT`]).
/// `agent` listening on the unix socket `path`, default permissions.
async fn listen_unix(agent: &Arc<Agent<MemorySwitch>>, path: &Path) -> ChannelHandle {
    agent.listen_unix(path, UnixPerms::default()).await.unwrap()
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    timeout(WAIT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for: {what}"));
}

#[tokio::test]
async fn punix_channel_is_served_from_an_owner_only_socket() {
    let dir = TempDir::new("punix");
    // The parent directory does not exist yet.
    let path = dir.0.join("run/br0.mgmt");
    let target: Target = format!("punix:{}", path.display()).parse().unwrap();
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let (addr, h) = agent.listen(&target).await.unwrap();
    assert_eq!(addr, ListenAddr::Unix(path.clone()));
    assert_eq!(addr.tcp(), None);
    assert_eq!(h.source(), target.to_string());
    let m = std::fs::symlink_metadata(&path).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.permissions().mode() & 0o7777, 0o600);

    let mut c = unix_client(&path).await;
    c.send(2, &Message::FeaturesRequest).await;
    assert!(matches!(c.reply(2).await, Message::FeaturesReply(f) if f.datapath_id == 1));
    c.send(3, &Message::FlowMod(flow(1))).await;
    c.barrier(4).await;
    assert_eq!(agent.switch().with_state(|s| s.tables.len()), 1);

    let st = agent.channel_status();
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(st[0].source, format!("punix:{}", path.display()));
    assert!(st[0].negotiated);
    assert!(
        st[0].peer.starts_with(&path.display().to_string())
            && st[0].peer.contains(&format!("pid={}", std::process::id()))
            && st[0].peer.contains(&format!("uid={}", m.uid())),
        "{}",
        st[0].peer
    );
    h.stop();
}

#[tokio::test]
async fn group_perms_give_the_socket_mode_0660_and_the_group() {
    let dir = TempDir::new("group");
    let path = dir.0.join("br0.mgmt");
    // Our own primary group: chown to it works without privileges.
    let gid = std::fs::metadata(&dir.0).unwrap().gid();
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let h = agent
        .listen_unix(&path, UnixPerms::group(gid))
        .await
        .unwrap();
    let m = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o660);
    assert_eq!(m.gid(), gid);
    let mut c = unix_client(&path).await;
    c.barrier(2).await;
    h.stop();
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced_and_other_files_are_not() {
    let dir = TempDir::new("stale");
    let path = dir.0.join("br0.mgmt");
    // What a crashed switch leaves behind: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_socket());
    assert!(std::os::unix::net::UnixStream::connect(&path).is_err());
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let h = listen_unix(&agent, &path).await;
    let mut c = unix_client(&path).await;
    c.send(2, &Message::FeaturesRequest).await;
    assert!(matches!(c.reply(2).await, Message::FeaturesReply(_)));
    h.stop();

    // A regular file is not ours to remove.
    let file = dir.0.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let err = agent
        .listen_unix(&file, UnixPerms::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[tokio::test]
async fn stopping_a_unix_listener_closes_its_channels_and_removes_the_file() {
    let (_dir, path, agent) = unix_agent("stop-unix");
    let h = listen_unix(&agent, &path).await;
    let mut c = unix_client(&path).await;
    c.barrier(2).await;
    eventually("one controller", || agent.controllers().connected() == 1).await;

    h.stop();
    // The file goes at once; the channel closes with EOF.
    assert!(!path.exists(), "socket file removed");
    assert_eq!(c.recv().await, None, "the client sees EOF");
    assert!(UnixStream::connect(&path).await.is_err());
    eventually("no channels", || agent.channel_status().is_empty()).await;
    assert_eq!(agent.controllers().connected(), 0);
}

#[tokio::test]
async fn a_stopped_listener_leaves_the_socket_of_its_replacement_alone() {
    // Live reconfiguration: the new listener binds before the old one is
    // stopped.
    let (_dir, path, agent) = unix_agent("replace");
    let old = listen_unix(&agent, &path).await;
    let new = listen_unix(&agent, &path).await;
    old.stop_and_wait().await;
    assert!(path.exists());
    let mut c = unix_client(&path).await;
    c.barrier(2).await;
    new.stop();
    assert!(!path.exists());
}

#[tokio::test]
async fn stopping_a_tcp_listener_closes_every_accepted_channel() {
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let (addr, h) = listen_tcp(&agent).await;
    let mut a = tcp_client(addr).await;
    let mut b = tcp_client(addr).await;
    // A third one that never says HELLO.
    let mut mute = TcpStream::connect(addr).await.unwrap();
    eventually("three channels", || agent.channel_status().len() == 3).await;
    assert!(!h.is_finished());
    let t0 = Instant::now();
    timeout(WAIT, h.stop_and_wait())
        .await
        .expect("listener and channels end");
    assert!(
        t0.elapsed() < STOP_GRACE,
        "the channels closed by themselves, not after the grace period"
    );
    assert_eq!(a.recv().await, None);
    assert_eq!(b.recv().await, None);
    let mut buf = vec![0; 1024];
    let mut got = 0;
    loop {
        match timeout(WAIT, mute.read(&mut buf)).await.unwrap() {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let hello = Message::Hello(Hello::default()).encode(0).len();
    assert_eq!(got, hello, "our HELLO, then EOF");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
    assert!(agent.channel_status().is_empty());
    assert_eq!(agent.controllers().connected(), 0);
}

#[tokio::test]
async fn a_dropped_handle_detaches_its_listener() {
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let (addr, h) = listen_tcp(&agent).await;
    drop(h);
    let mut c = tcp_client(addr).await;
    c.barrier(2).await;
}

#[tokio::test]
async fn stopping_a_connect_handle_closes_the_channel_and_ends_reconnecting() {
    let (listener, port) = controller_listener().await;
    let agent = reconnecting(Duration::from_millis(20), Duration::from_millis(40));
    let h = agent.connect(format!("tcp:127.0.0.1:{port}").parse().unwrap());
    assert_eq!(h.source(), format!("tcp:127.0.0.1:{port}"));
    let mut c = accept_switch(&listener).await;
    let st = agent.channel_status();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].source, format!("tcp:127.0.0.1:{port}"));
    assert_eq!(st[0].peer, format!("127.0.0.1:{port}"));

    timeout(WAIT, h.stop_and_wait()).await.unwrap();
    assert_eq!(c.recv().await, None, "the controller sees EOF");
    // No new attempt, well past the backoff.
    assert!(
        timeout(Duration::from_millis(300), listener.accept())
            .await
            .is_err(),
        "the agent reconnected after stop"
    );
    assert!(agent.channel_status().is_empty());
}

#[tokio::test]
async fn a_connect_handle_stops_while_nobody_listens() {
    let (_held, port) = closed_port().await;
    let agent = reconnecting(Duration::from_secs(30), Duration::from_secs(30));
    let h = agent.connect(format!("tcp:127.0.0.1:{port}").parse().unwrap());
    eventually("a failed attempt", || agent.stats().connect_failed == 1).await;
    // Sleeping out a 30 s backoff: the stop cuts it short (within WAIT,
    // well under the backoff; 2 s was little for a loaded machine).
    timeout(WAIT, h.stop_and_wait()).await.unwrap();
}

#[tokio::test]
async fn connect_to_a_unix_socket_controller() {
    let dir = TempDir::new("unix-connect");
    let path = dir.0.join("ctl.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let target: Target = format!("unix:{}", path.display()).parse().unwrap();
    let h = agent.connect(target.clone());
    let (s, _) = timeout(WAIT, listener.accept()).await.unwrap().unwrap();
    let mut c = Client::new(s).await;
    c.barrier(5).await;
    let st = agent.channel_status();
    assert_eq!(
        (st[0].source.as_str(), st[0].peer.as_str()),
        (
            target.to_string().as_str(),
            path.display().to_string().as_str()
        )
    );
    h.stop();
    assert_eq!(c.recv().await, None);
}

#[tokio::test]
async fn aborting_a_serving_task_closes_its_socket() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let served = Arc::clone(&agent);
    let task = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        served.serve(s).await
    });
    let mut c = tcp_client(addr).await;
    c.barrier(2).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(
        c.recv().await,
        None,
        "dropping the future closed the socket"
    );
    assert!(agent.channel_status().is_empty());
    assert_eq!(agent.controllers().connected(), 0);
}

#[tokio::test]
async fn channel_status_shows_negotiation_and_roles() {
    let (agent, addr) = listening(AgentConfig::default(), None).await;
    let before = Instant::now();
    // Connected, but no HELLO yet.
    let raw = TcpStream::connect(addr).await.unwrap();
    eventually("one channel", || agent.channel_status().len() == 1).await;
    let st = agent.channel_status();
    assert!(!st[0].negotiated);
    assert_eq!(st[0].role, ChannelRole::Equal);
    assert_eq!(st[0].source, "ptcp:0:127.0.0.1");
    assert_eq!(st[0].peer, raw.local_addr().unwrap().to_string());
    assert!(st[0].since >= before && st[0].since <= Instant::now());

    let mut a = tcp_client(addr).await;
    a.send(1, &role_request(controller_role::MASTER, 1)).await;
    assert!(matches!(a.reply(1).await, Message::RoleReply(_)));
    let st = agent.channel_status();
    assert_eq!(st.len(), 2);
    assert!(st[0].id < st[1].id, "by id");
    assert!(!st[0].negotiated);
    assert!(st[1].negotiated);
    assert_eq!(st[1].role, ChannelRole::Master);
    assert_eq!(st[1].role.to_string(), "master");

    // A second master turns the first into a slave.
    let mut b = tcp_client(addr).await;
    b.send(2, &role_request(controller_role::MASTER, 2)).await;
    b.reply(2).await;
    let roles: Vec<_> = agent
        .channel_status()
        .iter()
        .map(|c| (c.negotiated, c.role))
        .collect();
    assert_eq!(
        roles,
        [
            (false, ChannelRole::Equal),
            (true, ChannelRole::Slave),
            (true, ChannelRole::Master)
        ]
    );
    drop(a);
    eventually("two channels", || agent.channel_status().len() == 2).await;
    drop(raw);
    eventually("one channel", || agent.channel_status().len() == 1).await;
}

#[test]
fn channel_roles_map_to_and_from_openflow() {
    for (r, v, s) in [
        (ChannelRole::Equal, controller_role::EQUAL, "equal"),
        (ChannelRole::Master, controller_role::MASTER, "master"),
        (ChannelRole::Slave, controller_role::SLAVE, "slave"),
    ] {
        assert_eq!(ChannelRole::from_ofp(v), r);
        assert_eq!(r.to_ofp(), v);
        assert_eq!(r.to_string(), s);
    }
    assert_eq!(
        ChannelRole::from_ofp(controller_role::NOCHANGE),
        ChannelRole::Equal
    );
}

#[tokio::test]
async fn fail_mode_changes_at_run_time() {
    let agent = Agent::new(
        memory_switch(None),
        AgentConfig {
            fail_mode: FailMode::Standalone,
            ..AgentConfig::default()
        },
    );
    assert_eq!(agent.fail_mode(), FailMode::Standalone);
    agent.set_fail_mode(FailMode::Secure);
    assert_eq!(agent.fail_mode(), FailMode::Secure);
    agent.set_fail_mode(FailMode::Standalone);
    assert_eq!(agent.fail_mode(), FailMode::Standalone);
}

/// Runs a python client as user and group `id` that connects to `path`
/// and reports how many bytes it read (at least 8: our HELLO; 0: closed
/// at once, refused).
fn bytes_read_as(id: u32, path: &Path) -> io::Result<String> {
    use std::os::unix::process::CommandExt;
    let script = "import socket,sys\n\
        s=socket.socket(socket.AF_UNIX)\n\
        s.settimeout(10)\n\
        s.connect(sys.argv[1])\n\
        n=0\n\
        while n<8:\n    d=s.recv(4096)\n    if not d: break\n    n+=len(d)\n\
        print(n)\n";
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .uid(id)
        .gid(id)
        .current_dir("/")
        .output()?;
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        text.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    Ok(text)
}

#[tokio::test]
async fn peers_of_other_users_are_refused_unless_in_the_group() {
    let dir = TempDir::new("cred");
    if std::fs::metadata(&dir.0).unwrap().uid() != 0 {
        eprintln!("not root: cannot run a client as another user, skipping");
        return;
    }
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("/usr/bin/python3 missing: no client to run as another user, skipping");
        return;
    }
    const NOBODY: u32 = 65534;
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent = Agent::new(memory_switch(None), AgentConfig::default());
    let run = |path: PathBuf| tokio::task::spawn_blocking(move || bytes_read_as(NOBODY, &path));

    // World-writable file, no group: the file lets nobody in, the
    // credentials check does not.
    let open = dir.0.join("open.mgmt");
    let h = agent
        .listen_unix(
            &open,
            UnixPerms {
                mode: 0o666,
                group: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(run(open.clone()).await.unwrap().unwrap(), "0", "refused");
    assert_eq!(agent.stats().channels_opened, 0);
    h.stop();

    // The same socket restricted to nobody's group: let in.
    let grp = dir.0.join("group.mgmt");
    let h = agent
        .listen_unix(&grp, UnixPerms::group(NOBODY))
        .await
        .unwrap();
    let hello = Message::Hello(Hello::default()).encode(0).len();
    assert_eq!(
        run(grp.clone()).await.unwrap().unwrap(),
        hello.to_string(),
        "our HELLO"
    );
    assert_eq!(agent.stats().channels_opened, 1);
    h.stop();

    // Owner only (the default): the file refuses nobody.
    let own = dir.0.join("own.mgmt");
    let h = agent.listen_unix(&own, UnixPerms::default()).await.unwrap();
    let out = run(own.clone()).await.unwrap().unwrap();
    assert!(out.contains("PermissionError"), "{out}");
    h.stop();
}
