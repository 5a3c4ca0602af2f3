//! Run tests (being written).
