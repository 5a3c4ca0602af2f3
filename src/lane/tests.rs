//! Lane tests (being written).
