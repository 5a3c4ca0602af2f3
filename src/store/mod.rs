//! The sled store (work in progress).
