//! One flow's actor (`root/flows/flow:<uid>`): owns the flow's runner, tells it what the user
//! decided (pause, resume, cancel) and when a delivery report moved one of its recipients, and
//! stops when the runner ends (failing, when the runner failed, so that its supervisor starts
//! it again after a pause).

use std::sync::Arc;

use parley_persistence::{FlowStatus, flows};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::FlowDeps;
use super::handle::Flows;
use super::recover::{Recovered, recover};
use super::run::Runner;
use crate::tree::ActorPath;

/// Behaviour of one flow's actor: owns its runner and tells it what the user decided.
pub(crate) struct FlowActor;

/// What a flow actor starts from.
pub(crate) struct FlowArgs {
    pub(crate) flow_id: Uuid,
    pub(crate) deps: FlowDeps,
    pub(crate) flows: Flows,
}

/// State of a flow actor.
pub(crate) struct FlowState {
    path: ActorPath,
    control: watch::Sender<FlowStatus>,
    reports: Arc<Notify>,
    runner: tokio::task::JoinHandle<()>,
}

/// Messages of a flow actor.
pub(crate) enum FlowMsg {
    /// The flow's status as the user set it.
    Status(FlowStatus),
    /// A delivery report moved a recipient.
    Reported,
    /// The runner finished; `Err` when it failed.
    RunnerEnded(Result<(), String>),
}

impl Actor for FlowActor {
    type Msg = FlowMsg;
    type State = FlowState;
    type Arguments = FlowArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: FlowArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let db = &args.deps.db;
        // Sends caught mid-way by the last stop (or this actor's last failure) are settled by
        // what became of their message: sent again when nothing reached Meta, taken from the
        // message when it went out, failed `interrupted` when it may have; never sent twice.
        let recovered = recover(db, args.flow_id, args.deps.started_at).await?;
        if recovered != Recovered::default() {
            tracing::warn!(
                flow_id = %args.flow_id,
                released = recovered.released,
                reconciled = recovered.reconciled,
                interrupted = recovered.interrupted,
                "recipients caught mid-send by the last stop were settled"
            );
        }
        let status = flows::find_in_any_workspace(db, args.flow_id)
            .await?
            .map_or(FlowStatus::Cancelled, |f| f.status);
        let (control, watching) = watch::channel(status);
        let reports = Arc::new(Notify::new());
        let runner = Runner::new(
            args.flow_id,
            args.deps,
            args.flows,
            watching,
            reports.clone(),
        );
        let me = myself.clone();
        let runner = tokio::spawn(async move {
            let ended = tokio::spawn(runner.run()).await;
            let outcome = match ended {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(error) => Err(format!("the runner panicked: {error}")),
            };
            let _ = me.send_message(FlowMsg::RunnerEnded(outcome));
        });
        Ok(FlowState {
            path: ActorPath::flow(args.flow_id),
            control,
            reports,
            runner,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.runner.abort();
        Ok(())
    }

    #[tracing::instrument(name = "flow", skip_all, fields(actor = %state.path))]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            FlowMsg::Status(status) => {
                state.control.send_replace(status);
            }
            FlowMsg::Reported => state.reports.notify_one(),
            FlowMsg::RunnerEnded(Ok(())) => myself.stop(None),
            FlowMsg::RunnerEnded(Err(error)) => {
                return Err(format!("{}: {error}", state.path).into());
            }
        }
        Ok(())
    }
}
