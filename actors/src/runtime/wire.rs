//! Wiring the tree: every handle built once on the supervisors' slots, with the one
//! placement, announcer and routes the runtime's dependencies carry, and what the root hands
//! each supervisor when it starts it.

use std::sync::Arc;

use parley_persistence::identities::ContactLookups;

use super::RuntimeDeps;
use super::root::{RootArgs, Slots};
use crate::changes::Announcer;
use crate::channel::Channels;
use crate::conversation::Conversations;
use crate::events::{Events, RoutesListener};
use crate::flow::{FlowDeps, Flows};
use crate::inbound::Inbound;
use crate::inbound::InboundDeps;
use crate::outbound::{Outbox, Reports};
use crate::scheduler::{Scheduler, TaskDeps};
use crate::store::Store;

/// The handles of the running tree, each reaching its supervisor's successor after a restart.
#[derive(Clone, Debug)]
pub(super) struct Handles {
    pub(super) conversations: Conversations,
    pub(super) channels: Channels,
    pub(super) inbound: Inbound,
    pub(super) flows: Flows,
    pub(super) scheduler: Scheduler,
    pub(super) outbox: Outbox,
    pub(super) store: Store,
    pub(super) changes: Announcer,
    pub(super) reports: Reports,
    pub(super) events: Events,
}

/// Builds every handle on `slots` and what the root hands each supervisor when it starts it.
pub(super) fn wire(deps: &RuntimeDeps, slots: &Slots) -> (Handles, RootArgs) {
    let db = deps.conversations.db.clone();
    let settings = &deps.conversations.settings;
    let (changes, placement) = (deps.changes.clone(), deps.placement.clone());
    let channels = Channels::new(slots.channels.clone(), placement.clone());
    let conversations = Conversations::new(
        slots.conversations.clone(),
        deps.conversations.live.clone(),
        settings.turn_timeout,
        deps.conversations.announced.clone(),
        placement.clone(),
    );
    changes.listen(Arc::new(conversations.clone()));
    changes.listen(Arc::new(channels.clone()));
    changes.listen(Arc::new(RoutesListener::new(
        deps.events.events.clone(),
        db.clone(),
    )));
    let outbox = Outbox::new(
        db.clone(),
        deps.conversations.writer.clone(),
        channels.clone(),
        changes.clone(),
        settings.idle_after,
        deps.conversations.events.clone(),
        deps.conversations.quotas.clone(),
    );
    let flows = Flows::new(
        slots.flows.clone(),
        db.clone(),
        deps.conversations.writer.clone(),
        placement.clone(),
        deps.events.events.clone(),
    );
    let store = Store::new(
        db.clone(),
        changes.clone(),
        deps.conversations.mcp.clone(),
        deps.events.events.clone(),
    );
    let handles = Handles {
        conversations,
        inbound: Inbound::new(
            slots.inbound.clone(),
            deps.conversations.writer.clone(),
            placement.clone(),
        ),
        scheduler: Scheduler::new(slots.scheduler.clone(), placement.clone()),
        reports: Reports::start(
            db.clone(),
            deps.conversations.writer.clone(),
            Arc::new(flows.clone()),
            deps.conversations.events.clone(),
            changes.clone(),
        ),
        channels,
        outbox,
        store,
        changes,
        flows,
        events: deps.events.events.clone(),
    };
    let args = root_args(deps, slots, &handles);
    (handles, args)
}

/// What the root hands each supervisor when it starts it: the narrow dependencies of its
/// actors, on the handles just built.
fn root_args(deps: &RuntimeDeps, slots: &Slots, handles: &Handles) -> RootArgs {
    let db = deps.conversations.db.clone();
    let placement = deps.placement.clone();
    let Handles {
        conversations,
        outbox,
        flows,
        store,
        ..
    } = handles.clone();
    RootArgs {
        slots: slots.clone(),
        conversations: Arc::new(deps.conversations.clone()),
        channels: Arc::new(deps.channels.clone()),
        inbound_settings: deps.inbound.clone(),
        inbound: InboundDeps {
            db: db.clone(),
            writer: deps.conversations.writer.clone(),
            lookups: ContactLookups::start(db.clone()),
            conversations: conversations.clone(),
            outbox: outbox.clone(),
            stop_words: deps.inbound.stop_words.clone().into(),
            placement: placement.clone(),
        },
        flows: FlowDeps {
            db: db.clone(),
            outbox: outbox.clone(),
            started_at: parley_persistence::clock::now(),
            placement: placement.clone(),
        },
        flows_handle: flows.clone(),
        tasks: TaskDeps {
            db,
            outbox,
            conversations,
            flows,
            store,
            runs_kept: deps.scheduler_runs_kept,
            placement,
        },
        scheduler_sweep: deps.scheduler_sweep,
        events: Arc::new(deps.events.clone()),
        media: Arc::new(deps.media.clone()),
    }
}
