//! The hardware view.
/// The real memory.
#[derive(Clone, Debug)]
pub struct Hardware;
