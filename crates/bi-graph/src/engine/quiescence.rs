//! The periodic mode's background quiescence, as the runtime's passes.

use super::worker::SyncPlan;
use crate::error::GraphError;
use bi_core::mem::MemView;
use bi_core::region::Layout;
use bi_core::runtime::{Background, Clock, NodeRuntime, Policy, RuntimeConfig, TickClock};
use std::sync::Arc;
use std::time::Duration;

/// The background passes of one or more nodes: each node's runtime, whose pass (every
/// period) writes back the node's own value (both banks) and partial slots and invalidates the remote
/// ones its partition reads ([`Policy::Callback`]).
pub(crate) struct Passes {
    nodes: Vec<Background>,
}

impl Passes {
    pub fn new() -> Self {
        Passes { nodes: Vec::new() }
    }

    /// Starts node `p`'s passes over `view`.
    pub fn start<V: MemView + 'static>(
        &mut self,
        view: V,
        layout: Layout,
        p: usize,
        plan: &SyncPlan,
        period: Duration,
    ) -> Result<(), GraphError> {
        let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
        let runtime = NodeRuntime::new(view, layout, p, RuntimeConfig::default(), clock)?;
        let plan = plan.clone();
        runtime.set_policy(Policy::Callback(Arc::new(move |view: &V| {
            for &(o, l) in plan.own_values.iter().chain([&plan.own_partials]) {
                view.writeback(o, l)?;
            }
            view.fence();
            let remote_values = plan.remote_values.iter().flatten();
            for &(o, l) in remote_values.chain(&plan.remote_partials) {
                view.invalidate(o, l)?;
            }
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
