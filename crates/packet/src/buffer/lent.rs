//! Lent storage: a region of memory a packet I/O backend owns (a DPDK
//! mbuf's data room, a ring slot shared with the kernel) that a
//! [`PacketBuf`](super::PacketBuf) uses in place of an owned vector until
//! it gives the region back. See the parent module's "Lent storage".

use core::fmt;
use core::ptr::NonNull;
use std::sync::Arc;

/// Who takes [`Lent`] regions back: one `static` per kind of backend
/// buffer (its address tells the kinds apart, see [`Lent::is_from`]).
#[derive(Debug)]
pub struct LentOwner {
    /// What lends (for messages).
    pub name: &'static str,
    /// Gives the region with this token back. Called exactly once per
    /// [`Lent`] that is dropped, from whichever thread drops it.
    pub release: fn(usize),
}

/// Something reference counted that lends memory to [`PacketBuf`]s and
/// wants it back: a port's ring of slots shared with the kernel (an
/// AF_PACKET RX ring, an AF_XDP UMEM). The count keeps the memory mapped
/// while any buffer holds a slot, even after the port is gone.
pub trait BufferLender: Send + Sync {
    /// Called exactly once for each region lent with this lender
    /// ([`PacketBuf::from_slot`]), when it is dropped. After this call the
    /// buffer never touches the memory again.
    fn release(&self, token: usize);
}

/// Who takes a [`Lent`] region back.
enum Owner {
    /// A static owner (a DPDK mbuf pool).
    Static(&'static LentOwner),
    /// A reference-counted lender (a ring slot).
    Shared(Arc<dyn BufferLender>),
}

/// A region of memory a packet I/O backend lends a [`PacketBuf`] (a DPDK
/// mbuf's data room, a ring slot), and the token that gives it back to its
/// owner when the `Lent` is dropped.
pub struct Lent {
    base: NonNull<u8>,
    cap: usize,
    token: usize,
    owner: Owner,
}

// SAFETY: `Lent::new`'s (and `Lent::shared`'s) contract makes the region
// exclusively this value's until release, and the owner's `release` may be
// called from any thread (a `BufferLender` is `Send + Sync`); nothing in a
// `Lent` is tied to the thread that made it.
unsafe impl Send for Lent {}
// SAFETY: shared references only read the region (`bytes`); writing needs
// `&mut self`.
unsafe impl Sync for Lent {}

impl Lent {
    /// Lends the `cap` bytes at `base`, identified to `owner` by `token`.
    ///
    /// # Safety
    ///
    /// `base..base + cap` is valid for reads and writes, and nothing else
    /// reads or writes it, until `(owner.release)(token)` is called (which
    /// the `Lent` does once, when dropped) or [`Lent::into_token`] hands
    /// the duty back; `owner.release` may run on any thread.
    #[inline]
    pub unsafe fn new(
        base: NonNull<u8>,
        cap: usize,
        token: usize,
        owner: &'static LentOwner,
    ) -> Lent {
        Lent {
            base,
            cap,
            token,
            owner: Owner::Static(owner),
        }
    }

    /// Lends the `cap` bytes at `base`, identified to the reference-counted
    /// `lender` by `token`.
    ///
    /// # Safety
    ///
    /// As [`Lent::new`], with `lender.release(token)` giving it back.
    pub unsafe fn shared(
        base: NonNull<u8>,
        cap: usize,
        token: usize,
        lender: Arc<dyn BufferLender>,
    ) -> Lent {
        Lent {
            base,
            cap,
            token,
            owner: Owner::Shared(lender),
        }
    }

    /// Whether a reference-counted [`BufferLender`] lent this region (a
    /// ring slot) rather than a static owner.
    #[inline]
    pub fn is_shared(&self) -> bool {
        matches!(self.owner, Owner::Shared(_))
    }

    /// Bytes in the region.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The owner's token for the region.
    #[inline]
    pub fn token(&self) -> usize {
        self.token
    }

    /// Whether `owner` lent this region (compares the statics' addresses).
    #[inline]
    pub fn is_from(&self, owner: &'static LentOwner) -> bool {
        match self.owner {
            Owner::Static(o) => core::ptr::eq(o, owner),
            Owner::Shared(_) => false,
        }
    }

    /// The whole region.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract: the region is valid and ours until
        // release, which only happens when `self` is dropped.
        unsafe { core::slice::from_raw_parts(self.base.as_ptr(), self.cap) }
    }

    /// The whole region, writable.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only live
        // reference into the region.
        unsafe { core::slice::from_raw_parts_mut(self.base.as_ptr(), self.cap) }
    }

    /// Ends the loan without releasing the region: the caller now holds
    /// the token and the duty to give the region back (a backend handing
    /// the buffer to its device).
    #[inline]
    pub fn into_token(self) -> usize {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the owner is
        // read out exactly once (a shared lender's count goes down here
        // without a release).
        drop(unsafe { core::ptr::read(&me.owner) });
        me.token
    }
}

impl Drop for Lent {
    #[inline]
    fn drop(&mut self) {
        match &self.owner {
            Owner::Static(o) => (o.release)(self.token),
            Owner::Shared(l) => l.release(self.token),
        }
    }
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent")
            .field(
                "owner",
                &match &self.owner {
                    Owner::Static(o) => o.name,
                    Owner::Shared(_) => "shared lender",
                },
            )
            .field("cap", &self.cap)
            .field("token", &self.token)
            .finish()
    }
}
