//! The periodic mode's background quiescence, as the runtime's passes.

use super::tracked::{Marks, ReaderLog, WriterLog};
use super::worker::SyncPlan;
use crate::error::GraphError;
use bi_core::mem::MemView;
use bi_core::region::Layout;
use bi_core::runtime::{Background, Clock, Faults, NodeRuntime, Policy, RuntimeConfig, TickClock};
use std::sync::Arc;
use std::time::Duration;

/// The background passes of one or more nodes: each node's runtime, whose pass (every
/// period) writes back the lines its partition stored into since the last pass and drops
/// the lines it reads that the others wrote back since ([`Policy::Callback`], `tracked`).
pub(crate) struct Passes {
    nodes: Vec<Background>,
}

impl Passes {
    pub fn new() -> Self {
        Passes { nodes: Vec::new() }
    }

    /// Starts node `p`'s passes over `view`: they write back what its partition marked
    /// in `marks` and drop what `plan` says it reads of the others' lines.
    #[allow(clippy::too_many_arguments)]
    pub fn start<V: MemView + 'static>(
        &mut self,
        view: V,
        layout: Layout,
        p: usize,
        plan: &SyncPlan,
        marks: Arc<Marks>,
        faults: Faults,
        period: Duration,
    ) -> Result<(), GraphError> {
        let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
        let runtime = NodeRuntime::new(view, layout, p, RuntimeConfig::default(), clock)?;
        let writer = WriterLog::new(marks);
        let reader = ReaderLog::new(plan.remote_logs.clone(), plan.watches.clone(), faults);
        runtime.set_policy(Policy::Callback(Arc::new(move |view: &V| {
            writer.write_back(view)?;
            reader.drop_written(view)?;
            Ok(())
        })));
        // The background thread keeps the node's runtime alive.
        self.nodes.push(runtime.start_background(period));
        Ok(())
    }

    /// Stops every node's passes; an error if any pass failed.
    pub fn stop(self) -> Result<(), GraphError> {
        let failed: u64 = self.nodes.into_iter().map(Background::stop).sum();
        if failed > 0 {
            return Err(GraphError::QuiescenceFailed { passes: failed });
        }
        Ok(())
    }
}
