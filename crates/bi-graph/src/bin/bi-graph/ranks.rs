//! `--mpi`: this process as one rank of an MPI job, one partition each.

use crate::Failure;
use bi_graph::Mode;
use mpi::environment::Universe;
use mpi::topology::Communicator;
use mpi::traits::Root;

/// MPI, initialised for the whole run (finalised when dropped).
pub struct Ranks {
    universe: Universe,
}

impl Ranks {
    /// Initialises MPI: the stock mode runs over it, and with pools the on-demand mode.
    pub fn start(modes: &[Mode], pools: bool) -> Result<Ranks, Failure> {
        let (mode, why) = if pools {
            (Mode::BiOnDemand, "--pool-ranks runs the bi-on-demand mode")
        } else {
            (
                Mode::Stock,
                "--mpi runs the stock mode (--mode stock), or with --pool-ranks the \
                 bi-on-demand mode: the BI modes need memory the partitions share",
            )
        };
        if modes.iter().any(|&m| m != mode) {
            return Err(Failure::Message(why.to_owned()));
        }
        let universe = mpi::initialize()
            .ok_or_else(|| Failure::Message("MPI was already initialised".to_owned()))?;
        Ok(Ranks { universe })
    }

    /// Ranks in the job: the run's partitions.
    pub fn size(&self) -> usize {
        self.universe.world().size() as usize
    }

    /// A number every rank of this job agrees on (rank 0's process id), for file names.
    pub fn job_id(&self) -> u32 {
        let mut id = std::process::id();
        self.universe
            .world()
            .process_at_rank(0)
            .broadcast_into(&mut id);
        id
    }

    /// The communicator of every rank.
    pub fn world(&self) -> mpi::topology::SimpleCommunicator {
        self.universe.world()
    }

    /// Whether this is rank 0, which writes the values and the summary.
    pub fn is_root(&self) -> bool {
        self.universe.world().rank() == 0
    }
}
