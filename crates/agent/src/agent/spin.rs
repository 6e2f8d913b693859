//! Adaptive busy polling of a channel's socket (see [`Spin`]).

use std::io;
use std::time::{Duration, Instant};

/// Adaptive busy polling of a channel's socket. A controller that sends
/// its next request as soon as it has the reply to the last (ovs-ofctl's
/// flow-mod + BARRIER, one at a time) makes each round trip pay for this
/// side going to sleep in the reactor and being woken again, which costs
/// more than the work here on a virtual machine. After a reply, when the
/// previous reply was answered within `window`, the channel polls its
/// socket (a non-blocking peek, no bytes taken) for up to `window`
/// before it waits in the reactor as usual (a window that passes with no
/// input stops the polling until the peer answers a reply within the
/// window again); the bytes are then read by
/// the normal path, whose readiness event is already queued, so the
/// reactor's wait returns at once instead of sleeping. A controller
/// slower than `window` is never polled for. (Reading the bytes in the
/// poll itself, on plain sockets, measured no faster.)
pub(super) struct Spin {
    /// A second handle on the channel's socket (`None`: in-memory I/O).
    sock: Option<socket2::Socket>,
    window: Duration,
    /// When the last reply was written.
    replied_at: Option<Instant>,
    /// Whether the peer answered the last reply within `window`.
    quick: bool,
    /// A reply was written since the last read.
    armed: bool,
}

impl Spin {
    /// A handle on `stream`'s socket to peek at (`None` when the system
    /// gives no second descriptor).
    pub(super) fn handle<S: std::os::fd::AsFd>(stream: &S) -> Option<socket2::Socket> {
        socket2::SockRef::from(stream).try_clone().ok()
    }

    pub(super) fn new(sock: Option<socket2::Socket>, window: Duration) -> Spin {
        Spin {
            sock: sock.filter(|_| !window.is_zero()),
            window,
            replied_at: None,
            quick: true,
            armed: false,
        }
    }

    pub(super) fn replied(&mut self) {
        self.replied_at = Some(Instant::now());
        self.armed = true;
    }

    pub(super) fn received(&mut self) {
        if let Some(t) = self.replied_at.take() {
            self.quick = t.elapsed() <= self.window;
        }
        self.armed = false;
    }

    /// Polls for input up to the window after a reply to a quick peer.
    pub(super) fn wait_for_input(&mut self) {
        let Some(sock) = self.sock.as_ref().filter(|_| self.armed && self.quick) else {
            return;
        };
        self.armed = false;
        let start = Instant::now();
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        // The descriptor is a duplicate of the runtime's, which is
        // non-blocking, and the flag belongs to the open file both share:
        // the peek never blocks.
        loop {
            match sock.peek(&mut byte) {
                // Input, or the peer's close: the normal path reads it.
                Ok(_) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
            if start.elapsed() >= self.window {
                // Not answered within the window this time (or what was
                // written needs no answer: a packet-in, a port status):
                // no more polling until the peer is quick again.
                self.quick = false;
                return;
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spin;
    use std::io::Write;
    use std::time::{Duration, Instant};

    /// The polling window the tests use.
    const WINDOW: Duration = Duration::from_millis(400);

    fn pair(window: Duration) -> (Spin, std::os::unix::net::UnixStream) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        (Spin::new(Spin::handle(&ours), window), theirs)
    }

    /// How long one [`Spin::wait_for_input`] took.
    fn waited(spin: &mut Spin) -> Duration {
        let t = Instant::now();
        spin.wait_for_input();
        t.elapsed()
    }

    /// Polls only after a reply, returns as soon as input is there, and
    /// gives up after its window.
    #[test]
    fn polls_after_a_reply_until_input_or_the_window() {
        // Windows are long and "at once" means under half of one, so
        // that a loaded machine's scheduling delays cannot pass for a
        // poll (or hide one).
        let (mut spin, mut peer) = pair(WINDOW);
        // No reply yet: no polling at all.
        assert!(waited(&mut spin) < WINDOW / 2);
        // After a reply, input already there: at once.
        spin.replied();
        peer.write_all(b"x").unwrap();
        assert!(waited(&mut spin) < WINDOW / 2);
        // After a reply with no input: the whole window...
        let (mut spin, _peer) = pair(WINDOW);
        spin.replied();
        assert!(waited(&mut spin) >= WINDOW);
        // ...and then no polling after further replies (asynchronous
        // messages, say) until the peer answers one within the window.
        spin.replied();
        assert!(waited(&mut spin) < WINDOW / 2);
        spin.received();
        spin.replied();
        assert!(waited(&mut spin) >= WINDOW);
    }

    /// A peer slower than the window is not polled for again until it
    /// answers a reply within the window.
    #[test]
    fn a_slow_peer_is_not_polled_for() {
        let (mut spin, _peer) = pair(WINDOW);
        spin.replied();
        std::thread::sleep(WINDOW * 2);
        spin.received();
        spin.replied();
        assert!(waited(&mut spin) < WINDOW / 2);
        // Quick again: polled.
        spin.received();
        spin.replied();
        spin.received();
        spin.replied();
        assert!(waited(&mut spin) >= WINDOW);
    }

    /// A zero window (busy polling off) never polls.
    #[test]
    fn a_zero_window_never_polls() {
        let (mut spin, _peer) = pair(Duration::ZERO);
        spin.replied();
        assert!(waited(&mut spin) < WINDOW / 2);
    }
}
