//! The toolkit's vertex programs and their entry points: PageRank, weakly connected
//! components and single-source shortest paths.

mod pagerank;
mod sssp;
mod wcc;

pub use pagerank::{PageRank, pagerank};
pub use sssp::{Sssp, sssp};
pub use wcc::{Wcc, wcc};
