//! `--mpi`: this process as one rank of an MPI job, one partition each.

use crate::Failure;
use bi_graph::Mode;
use mpi::environment::Universe;
use mpi::topology::Communicator;

/// MPI, initialised for the whole run (finalised when dropped).
pub struct Ranks {
    universe: Universe,
}

impl Ranks {
    /// Initialises MPI; only the stock mode runs over it.
    pub fn start(modes: &[Mode]) -> Result<Ranks, Failure> {
        if modes.iter().any(|&m| m != Mode::Stock) {
            return Err(Failure::Message(
                "--mpi runs the stock mode (--mode stock): the BI modes need memory the \
                 partitions share"
                    .to_owned(),
            ));
        }
        let universe = mpi::initialize()
            .ok_or_else(|| Failure::Message("MPI was already initialised".to_owned()))?;
        Ok(Ranks { universe })
    }

    /// Ranks in the job: the run's partitions.
    pub fn size(&self) -> usize {
        self.universe.world().size() as usize
    }

    /// Whether this is rank 0, which writes the values and the summary.
    pub fn is_root(&self) -> bool {
        self.universe.world().rank() == 0
    }
}
