//! chela command line.
fn main() {}
