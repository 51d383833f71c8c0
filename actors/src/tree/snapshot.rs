//! What the root reports about each of its supervisors (`GET /admin/actors`).

/// What a supervisor reports about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisorSnapshot {
    /// Actor path, e.g. `root/flows`.
    pub path: String,
    /// How many actors it supervises now.
    pub live_children: usize,
    /// For `root/conversations`: how many identities rest, their cache kept without an actor.
    pub resting: Option<usize>,
}
