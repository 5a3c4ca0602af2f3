//! Throughput bench (in progress).
fn main() {}
