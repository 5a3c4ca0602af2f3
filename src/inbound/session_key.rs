//! Session keys (work in progress).
