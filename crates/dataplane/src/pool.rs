//! Recycled packet storage: the pool of [`packet::buffer::pool`], which
//! the one packet buffer type ([`crate::PacketBuf`], defined in `packet`)
//! recycles its owned vectors into. Re-exported here for the backends
//! that copy frames into pooled storage.

pub use packet::buffer::pool::*;
