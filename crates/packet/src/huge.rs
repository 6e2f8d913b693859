//! Transparent huge pages for the large arrays the packet path reads at
//! random (classifier slots, the IPv4 route table, compiled entries, flow
//! counters, the in-place table's lines).
//!
//! Each packet touches a few random lines of such arrays. With 4 KiB
//! pages every one of those lines is also a TLB miss, and in a VM a
//! nested page walk: with 100K rules `perf` put most of the packet path's
//! time on those loads (the prefetches issued for them stalled the core).
//! Debian's kernels enable transparent huge pages only for memory that
//! asks (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`), so
//! the arrays ask here. Where the kernel says no (THP `never`, a kernel
//! without it) nothing changes.
//!
//! The hint covers the 2 MiB-aligned part of an allocation; arrays below
//! 2 MiB are left alone. [`HugeVec`] gives it before the memory is written
//! when it fills, copies or grows an array, so the first touch of each
//! 2 MiB maps a huge page directly.

/// The huge page size on x86-64 and aarch64 with 4 KiB base pages.
pub const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the whole 2 MiB-aligned pages inside `v`'s
/// buffer (its capacity, not only its length) with huge pages. A hint:
/// it changes no byte of the memory.
fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGE_PAGE {
        return;
    }
    let start = v.as_ptr() as usize;
    let first = start.next_multiple_of(HUGE_PAGE);
    let end = start.saturating_add(bytes) / HUGE_PAGE * HUGE_PAGE;
    if end > first {
        madvise_huge(first, end - first);
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn madvise_huge(addr: usize, len: usize) {
    // SAFETY: `addr..addr + len` lies inside a live allocation the
    // caller borrows (see `advise`: rounded inward to page boundaries
    // within the buffer's capacity), so no other mapping is named.
    // MADV_HUGEPAGE only marks the range as eligible for huge pages: the
    // kernel neither reads nor changes the memory's contents, so no
    // reference to it is invalidated. A failure (THP disabled, EINVAL)
    // leaves the mapping as it was and is ignored.
    unsafe {
        libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn madvise_huge(_addr: usize, _len: usize) {}

/// An empty vector with room for `n` elements, its buffer advised.
fn with_capacity<T>(n: usize) -> Vec<T> {
    let v = Vec::with_capacity(n);
    advise(&v);
    v
}

/// `n` copies of `x` in an advised buffer.
fn filled<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = with_capacity(n);
    v.resize(n, x);
    v
}

/// A copy of `s` in an advised buffer (what `to_vec` gives, with the
/// hint given before the copy touches the pages).
fn clone_slice<T: Clone>(s: &[T]) -> Vec<T> {
    let mut v = with_capacity(s.len());
    v.extend_from_slice(s);
    v
}

/// [`HugeVec::grow`] on the vector itself.
fn grow<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    if v.len() >= n {
        return;
    }
    if v.capacity() < n {
        let cap = n.max(v.capacity().saturating_mul(2));
        let mut bigger = with_capacity(cap);
        bigger.append(v);
        *v = bigger;
    }
    v.resize(n, x);
}

/// A vector whose buffer is advised whenever it is made, cloned or grown
/// here (reads and in-place writes go through `Deref` to the `Vec`; grow
/// it with [`HugeVec::grow`], not `resize`, to keep the hint).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HugeVec<T>(Vec<T>);

impl<T> HugeVec<T> {
    /// An empty vector with room for `n` elements, its buffer advised
    /// (fill it with `extend` or `push` up to `n`: the buffer stays).
    pub fn with_capacity(n: usize) -> HugeVec<T> {
        HugeVec(with_capacity(n))
    }

    /// Advises `v`'s buffer and wraps it. For a vector from `vec![0; n]`
    /// (memory the allocator got zeroed from the kernel and nothing has
    /// touched yet) every page is then mapped huge on first use.
    pub fn from_vec(v: Vec<T>) -> HugeVec<T> {
        advise(&v);
        HugeVec(v)
    }
}

impl<T: Clone> HugeVec<T> {
    /// `n` copies of `x`.
    pub fn filled(n: usize, x: T) -> HugeVec<T> {
        HugeVec(filled(n, x))
    }

    /// A copy of `s`.
    pub fn from_slice(s: &[T]) -> HugeVec<T> {
        HugeVec(clone_slice(s))
    }

    /// Makes it at least `n` long, new elements `x`. When the buffer must
    /// grow it moves to a new advised buffer of twice the room (or `n`), so
    /// a vector grown element by element ends up huge-page backed too.
    pub fn grow(&mut self, n: usize, x: T) {
        grow(&mut self.0, n, x);
    }
}

impl<T: Clone> Clone for HugeVec<T> {
    fn clone(&self) -> Self {
        HugeVec::from_slice(&self.0)
    }
}

impl<T> std::ops::Deref for HugeVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for HugeVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_keep_contents_and_grow_by_doubling() {
        let big = HUGE_PAGE / 4 + 3;
        let v: Vec<u32> = filled(big, 7);
        assert_eq!(v.len(), big);
        assert!(v.iter().all(|&x| x == 7));
        let c = clone_slice(&v);
        assert_eq!(c, v);
        let mut g: Vec<u64> = vec![1, 2, 3];
        grow(&mut g, 5, 9);
        assert_eq!(g, [1, 2, 3, 9, 9]);
        let cap = g.capacity();
        grow(&mut g, 4, 0);
        assert_eq!((g.len(), g.capacity()), (5, cap));
        grow(&mut g, cap + 1, 0);
        assert!(g.capacity() >= 2 * cap);
        assert_eq!(&g[..5], [1, 2, 3, 9, 9]);
        // An empty or small vector is left alone.
        advise(&Vec::<u8>::new());
        advise(&vec![0u8; 10]);
        let mut h = HugeVec::from_vec(vec![0u32; 4]);
        h.grow(6, 5);
        assert_eq!(*h.clone(), vec![0, 0, 0, 0, 5, 5]);
        assert_eq!(HugeVec::filled(2, 1u8).len(), 2);
    }
}
