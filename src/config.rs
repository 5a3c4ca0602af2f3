//! Configuration (work in progress).
