//! Where rows kept out of Silver go: the kinds of dq_error files.

/// Where rows kept out of Silver go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetAside {
    /// A critical rule failed: fix and replay.
    Quarantine,
    /// A drop rule failed: recorded, not deleted.
    Dropped,
    /// A reference rule missed: replayed once the reference catches up.
    Pending,
}

impl SetAside {
    /// Every kind, in order.
    pub(crate) const ALL: [SetAside; 3] =
        [SetAside::Quarantine, SetAside::Dropped, SetAside::Pending];

    /// The dq_error folder of this destination.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            SetAside::Quarantine => "quarantine",
            SetAside::Dropped => "dropped",
            SetAside::Pending => "pending",
        }
    }
}
