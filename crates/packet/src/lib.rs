//! Zero-copy packet header views and in-place rewrites.
