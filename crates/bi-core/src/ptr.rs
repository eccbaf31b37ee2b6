//! Offset pointers.
