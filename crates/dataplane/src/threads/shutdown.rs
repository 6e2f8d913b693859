//! Shutdown: stopping the stages in order, and dropping what a thread
//! held together.

use super::registry::Threads;

impl Drop for Threads {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The items of `it`, each boxed as something to drop.
pub(super) fn boxed<T: Send + 'static>(it: impl Iterator<Item = T>) -> Vec<Box<dyn Send>> {
    it.map(|x| Box::new(x) as Box<dyn Send>).collect()
}

/// Drops `items` each on its own thread, all at once, and returns when all
/// are dropped. A stopping thread's ports go this way: the kernel waits for
/// an RCU grace period when it releases a packet socket (milliseconds
/// each), so ports closed one after the other add up their waits, all of
/// it forwarding lost in a restart. (A thread that cannot be spawned
/// drops its item here.)
pub(super) fn drop_together(items: Vec<Box<dyn Send>>) {
    if items.len() < 2 {
        return;
    }
    std::thread::scope(|s| {
        for it in items {
            let _ = std::thread::Builder::new()
                .name("fulmar-close".into())
                .spawn_scoped(s, move || drop(it));
        }
    });
}
