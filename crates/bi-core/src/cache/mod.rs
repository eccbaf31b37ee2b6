//! Real cache instructions.
