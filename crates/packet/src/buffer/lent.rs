//! Lent storage: a region of memory a packet I/O backend owns (a DPDK
//! mbuf's data room, a ring slot shared with the kernel) that a
//! [`PacketBuf`](super::PacketBuf) uses in place of an owned vector until
//! it gives the region back. See the parent module's "Lent storage".
//!
//! Who takes a region back is one thin pointer (an owner word): the
//! address of a `static` [`LentOwner`], or, with the low bit [`SHARED`]
//! set, the address a [`SharedLender`]'s `Arc::into_raw` gave, holding one
//! count of it. One word, not a fat `Arc<dyn _>` and a tag, so that a
//! [`PacketBuf`](super::PacketBuf) over a region fits in a cache line.

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
///
/// [`PacketBuf`]: super::PacketBuf
pub trait BufferLender: Send + Sync {
    /// Called exactly once for each region lent with this lender
    /// ([`PacketBuf::from_slot`](super::PacketBuf::from_slot)), when it is
    /// dropped. After this call the buffer never touches the memory again.
    fn release(&self, token: usize);
}

/// A reference-counted [`BufferLender`] behind one thin pointer: what a
/// buffer over a ring slot holds of its lender (one word, where an
/// `Arc<dyn BufferLender>` would take two). Made once per ring (one
/// allocation), cloned for each slot lent (a count, no allocation).
#[derive(Clone)]
pub struct SharedLender(Arc<Arc<dyn BufferLender>>);

impl SharedLender {
    /// A thin handle on `lender`.
    pub fn new(lender: Arc<dyn BufferLender>) -> Self {
        SharedLender(Arc::new(lender))
    }
}

impl fmt::Debug for SharedLender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedLender")
    }
}

/// The owner word's bit that marks a [`SharedLender`] (clear: a static
/// [`LentOwner`]).
pub(super) const SHARED: usize = 1;

/// The owner word's low bits that are not part of the address: both kinds
/// of owner are aligned to at least 4 bytes (checked below), so the two low
/// bits of their addresses are 0. Bit 0 is [`SHARED`]; bit 1 is left to
/// the [`PacketBuf`](super::PacketBuf) that stores the word.
pub(super) const LOW_BITS: usize = 3;

const _: () = assert!(
    core::mem::align_of::<LentOwner>() > LOW_BITS
        && core::mem::align_of::<Arc<dyn BufferLender>>() > LOW_BITS
);

/// The owner word of a static owner.
#[inline(always)]
pub(super) fn static_owner(owner: &'static LentOwner) -> NonNull<u8> {
    NonNull::from(owner).cast()
}

/// What a shared owner word points to (the word without [`SHARED`]).
#[inline]
fn shared_ptr(owner: NonNull<u8>) -> *const Arc<dyn BufferLender> {
    owner.as_ptr().wrapping_sub(SHARED).cast_const().cast()
}

/// Gives the region `token` back to the owner `owner` names (and, for a
/// shared lender, gives up the count the word holds).
///
/// # Safety
///
/// `owner` is an owner word made by [`Lent::new`] or [`Lent::shared`],
/// and this call takes its duty: it is not released or forgotten again.
#[inline]
unsafe fn release(owner: NonNull<u8>, token: usize) {
    if owner.as_ptr() as usize & SHARED == 0 {
        // SAFETY: a word without SHARED is the address of a
        // `&'static LentOwner` (`static_owner`).
        let o = unsafe { &*owner.as_ptr().cast_const().cast::<LentOwner>() };
        (o.release)(token);
    } else {
        // SAFETY: a word with SHARED is `Arc::into_raw` of a SharedLender's
        // Arc plus SHARED, holding one count that the caller hands to us:
        // the lender is alive while we call it, and the count is given up
        // once.
        unsafe {
            let l = shared_ptr(owner);
            (**l).release(token);
            drop(Arc::from_raw(l));
        }
    }
}

/// Gives up the owner word `owner` without releasing a region (a shared
/// lender's count goes down).
///
/// # Safety
///
/// As [`release`].
#[inline]
unsafe fn forget(owner: NonNull<u8>) {
    if owner.as_ptr() as usize & SHARED != 0 {
        // SAFETY: as in `release`.
        drop(unsafe { Arc::from_raw(shared_ptr(owner)) });
    }
}

/// A region of memory a packet I/O backend lends a [`PacketBuf`] (a DPDK
/// mbuf's data room, a ring slot), and the token that gives it back to its
/// owner when the `Lent` is dropped.
///
/// [`PacketBuf`]: super::PacketBuf
pub struct Lent {
    base: NonNull<u8>,
    cap: usize,
    token: usize,
    /// Who takes the region back: an owner word (see the module comment)
    /// whose duty (and, for a shared lender, count) this value holds.
    owner: NonNull<u8>,
}

// SAFETY: `Lent::new`'s (and `Lent::shared`'s) contract makes the region
// exclusively this value's until release, and the owner's `release` may be
// called from any thread (a `BufferLender` is `Send + Sync`, and the count
// of its `Arc` can be given up on any thread); nothing in a `Lent` is tied
// to the thread that made it.
unsafe impl Send for Lent {}
// SAFETY: shared references only read the region (`bytes`) and the
// owner; writing needs `&mut self`.
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
            owner: static_owner(owner),
        }
    }

    /// Lends the `cap` bytes at `base`, identified to the reference-counted
    /// `lender` by `token`.
    ///
    /// # Safety
    ///
    /// As [`Lent::new`], with `lender`'s `release(token)` giving it back.
    pub unsafe fn shared(
        base: NonNull<u8>,
        cap: usize,
        token: usize,
        lender: SharedLender,
    ) -> Lent {
        let raw = Arc::into_raw(lender.0);
        // SAFETY: `Arc::into_raw` is never null, and the address is
        // aligned to more than SHARED (the assertion above), so adding
        // SHARED stays in the allocation's first bytes, not null; the
        // word holds the count `into_raw` leaked, given up by `release` or
        // `forget`.
        let owner =
            unsafe { NonNull::new_unchecked(raw.cast_mut().cast::<u8>().wrapping_add(SHARED)) };
        Lent {
            base,
            cap,
            token,
            owner,
        }
    }

    /// Whether a reference-counted [`BufferLender`] lent this region (a
    /// ring slot) rather than a static owner.
    #[inline]
    pub fn is_shared(&self) -> bool {
        self.owner.as_ptr() as usize & SHARED != 0
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

    /// Whether `owner` lent this region (compares the statics' addresses;
    /// a shared lender's owner word, its low bit set, is never one).
    #[inline]
    pub fn is_from(&self, owner: &'static LentOwner) -> bool {
        self.owner == static_owner(owner)
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
        let (_, _, token, owner) = self.into_raw();
        // SAFETY: `into_raw` handed us the owner word's duty, given up
        // here once (a shared lender's count goes down without a release).
        unsafe { forget(owner) };
        token
    }

    /// The parts (base, capacity, token, owner word), the duty to give the
    /// region back now the caller's ([`Lent::from_raw`] takes them back).
    #[inline(always)]
    pub(super) fn into_raw(self) -> (NonNull<u8>, usize, usize, NonNull<u8>) {
        let me = core::mem::ManuallyDrop::new(self);
        (me.base, me.cap, me.token, me.owner)
    }

    /// A `Lent` from the parts [`Lent::into_raw`] gave.
    ///
    /// # Safety
    ///
    /// The parts came from one [`Lent::into_raw`] (or from [`Lent::new`]'s
    /// arguments, `owner` as [`static_owner`] makes it, under
    /// [`Lent::new`]'s contract), with a capacity no larger than it gave,
    /// and no other `Lent` is made from them.
    #[inline(always)]
    pub(super) unsafe fn from_raw(
        base: NonNull<u8>,
        cap: usize,
        token: usize,
        owner: NonNull<u8>,
    ) -> Lent {
        Lent {
            base,
            cap,
            token,
            owner,
        }
    }
}

impl Drop for Lent {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the owner word is this value's (made by `new`/`shared`
        // or handed over with `from_raw`), dropped once.
        unsafe { release(self.owner, self.token) }
    }
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let owner = if self.is_shared() {
            "shared lender"
        } else {
            // SAFETY: a word without SHARED is a `&'static LentOwner`.
            unsafe { (*self.owner.as_ptr().cast_const().cast::<LentOwner>()).name }
        };
        f.debug_struct("Lent")
            .field("owner", &owner)
            .field("cap", &self.cap)
            .field("token", &self.token)
            .finish()
    }
}
