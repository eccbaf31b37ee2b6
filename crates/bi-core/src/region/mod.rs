//! Shared regions.
