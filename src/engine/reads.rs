//! Which of a response's content events share an arrival stamp, decided without I/O.
//!
//! Every event in one read gets that read's stamp. A read that fills the buffer leaves the
//! rest of the same queue for the next read, so the two carry one arrival stamp between them:
//! they form one group. All but a group's newest event therefore carry a later event's stamp.
//! The driver tells [`ReadGroups`] about each read of a measured response; it answers how many
//! events shared a stamp, and how late that can have made them look.

/// One response's reads, grouped by the stamp their events share.
#[derive(Debug, Default)]
pub(crate) struct ReadGroups {
    /// When the previous read emptied the socket (its `now`): what the next read takes
    /// arrived after it.
    drained_at: Option<u64>,
    /// Whether the previous read filled the buffer (the next one continues its group).
    full: bool,
    /// Content events of the current group.
    group: usize,
    /// Whether the current group holds the response's first content event.
    group_first: bool,
    /// When the read before the current group emptied the socket.
    group_since: Option<u64>,
    /// The arrival stamp of the last read that emptied the socket.
    emptied_stamp: Option<u64>,
    /// The arrival stamp of the read before the current group: every byte of the group
    /// arrived after it (none yet: the request's send).
    group_after: Option<u64>,
}

/// What one read's events shared.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Shared {
    /// Events that carry a later event's arrival stamp.
    pub events: u64,
    /// The response's first content event is one of them: the longest it can have come
    /// before its stamp (ns since the read before its group, at least 1).
    pub first_token_ns: Option<u64>,
    /// Later events are: the longest the group's older events can have waited unseen (ns
    /// since the read before the group emptied the socket).
    pub wait_ns: Option<u64>,
}

impl ReadGroups {
    /// A read stamped `t` (its arrival) and parsed by `now`, which took `events` content
    /// events and filled the buffer when `filled`. `had_first`: the response's first content
    /// event came in an earlier read; `start_ns`: when the request went out.
    #[inline]
    pub(crate) fn on_read(
        &mut self,
        t: u64,
        now: u64,
        filled: bool,
        events: usize,
        had_first: bool,
        start_ns: u64,
    ) -> Shared {
        let mut out = Shared::default();
        if !self.full {
            (self.group, self.group_first, self.group_since) = (0, false, self.drained_at);
            self.group_after = self.emptied_stamp;
        }
        if events > 0 {
            let shared = if self.group > 0 { events } else { events - 1 };
            self.group += events;
            self.group_first |= !had_first;
            if shared > 0 {
                out.events = shared as u64;
                if self.group_first {
                    let after = self.group_after.unwrap_or(start_ns);
                    out.first_token_ns = Some(t.saturating_sub(after).max(1));
                } else if let Some(d) = self.group_since.take() {
                    out.wait_ns = Some(now.saturating_sub(d));
                }
            }
        }
        self.full = filled;
        self.drained_at = (!filled).then_some(now);
        if !filled {
            self.emptied_stamp = Some(t);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: u64 = 1_000;

    #[test]
    fn events_read_one_at_a_time_share_nothing() {
        let mut g = ReadGroups::default();
        for (i, t) in [2_000u64, 3_000, 4_000].into_iter().enumerate() {
            assert_eq!(
                g.on_read(t, t + 10, false, 1, i > 0, START),
                Shared::default()
            );
        }
    }

    #[test]
    fn a_first_token_read_with_later_ones_shares_their_stamp_since_the_send() {
        let mut g = ReadGroups::default();
        let s = g.on_read(5_000, 5_050, false, 3, false, START);
        assert_eq!(
            s,
            Shared {
                events: 2,
                first_token_ns: Some(4_000),
                wait_ns: None
            }
        );
        // A first token read after an empty read (headers only) is counted from that read.
        let mut g = ReadGroups::default();
        g.on_read(2_000, 2_010, false, 0, false, START);
        let s = g.on_read(5_000, 5_050, false, 2, false, START);
        assert_eq!((s.events, s.first_token_ns), (1, Some(3_000)));
    }

    #[test]
    fn a_read_after_a_full_one_continues_its_group() {
        let mut g = ReadGroups::default();
        // The first token and one more fill the buffer: one shares the stamp.
        let s = g.on_read(5_000, 5_050, true, 2, false, START);
        assert_eq!((s.events, s.first_token_ns), (1, Some(4_000)));
        // The rest of the queue: every event carries this later stamp, the first token too.
        let s = g.on_read(5_100, 5_150, false, 1, true, START);
        assert_eq!((s.events, s.first_token_ns), (1, Some(4_100)));
        // A new group after the socket emptied: one event, nothing shared.
        assert_eq!(
            g.on_read(9_000, 9_010, false, 1, true, START),
            Shared::default()
        );
    }

    #[test]
    fn later_events_read_together_may_have_waited_since_the_socket_emptied() {
        let mut g = ReadGroups::default();
        g.on_read(2_000, 2_040, false, 1, false, START);
        // Three events in one read: two carry the third's stamp, and can have waited since
        // the previous read emptied the socket (its `now`).
        let s = g.on_read(6_000, 6_100, false, 3, true, START);
        assert_eq!(
            s,
            Shared {
                events: 2,
                first_token_ns: None,
                wait_ns: Some(6_100 - 2_040)
            }
        );
        // The wait is said once per group: a read continuing a full one adds events only.
        let mut g = ReadGroups::default();
        g.on_read(2_000, 2_040, false, 1, false, START);
        assert_eq!(
            g.on_read(6_000, 6_100, true, 2, true, START).wait_ns,
            Some(4_060)
        );
        let s = g.on_read(6_200, 6_300, false, 2, true, START);
        assert_eq!((s.events, s.wait_ns), (2, None));
    }

    #[test]
    fn a_stamp_before_the_send_is_at_least_a_nanosecond() {
        let mut g = ReadGroups::default();
        let s = g.on_read(START - 5, START, false, 2, false, START);
        assert_eq!(s.first_token_ns, Some(1));
    }
}
