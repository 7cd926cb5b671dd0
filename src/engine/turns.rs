//! A multi-turn session's timing, without I/O: at which turn one of the first users joins
//! its session, when each turn is sent, when it was due, and when the place the session
//! held under the concurrency cap is due for the next session. The shard's session task
//! sends the turns and says when each was sent and ended; the tests here step it through
//! made-up times.

use crate::plan::load::UserCentric;

/// One session's clock.
#[derive(Debug)]
pub(super) struct Turns {
    /// With user-centric timing, the time between a user's sends (ns).
    gap: Option<u64>,
    /// When the next turn is due: the dispatcher's due time for the first; after a turn, the
    /// user's next slot, or the answer plus the next turn's delay.
    due: Option<u64>,
    /// When the last turn ended (or the session began).
    end: u64,
    /// With user-centric timing, when the user may send next: a gap after its last send, or
    /// its last answer when that came later.
    next_slot: Option<u64>,
}

impl Turns {
    /// A session that begins at `now`, its first turn `due` as the dispatcher said.
    pub(super) fn new(users: Option<UserCentric>, due: Option<u64>, now: u64) -> Self {
        Turns {
            gap: users.map(|u| u.gap_ns()),
            due,
            end: now,
            next_slot: None,
        }
    }

    /// The turn a session of `turns` starts at. The run's first users join their sessions
    /// part-way, as if the run had been going on: user `g` of `U` has done about `g/U` of its
    /// turns, and every user has at least one turn left. Everyone else starts at the first.
    pub(super) fn first_turn(
        first_user: Option<u64>,
        users: Option<UserCentric>,
        turns: usize,
    ) -> usize {
        match (first_user, users) {
            (Some(g), Some(u)) if turns > 0 => {
                let n = turns as u64;
                (n - (n * (g + 1)).div_ceil(u.users).clamp(1, n)) as usize
            }
            _ => 0,
        }
    }

    /// When the first turn may go: with user-centric timing, the time it was due; else at
    /// once.
    pub(super) fn start_at(&self) -> Option<u64> {
        self.gap.and(self.due)
    }

    /// When a turn after the first goes: at the user's next slot, or `delay_ns` (the turn's
    /// `--session-turn-delay`) after the previous answer.
    pub(super) fn next_at(&self, delay_ns: u64) -> u64 {
        self.next_slot.unwrap_or(self.end + delay_ns)
    }

    /// When the turn about to be sent was due.
    pub(super) fn due(&self) -> Option<u64> {
        self.due
    }

    /// A turn sent at `start` ended at `end`; the turn after it (if any) waits `next_delay`
    /// after the answer.
    pub(super) fn on_turn(&mut self, start: u64, end: u64, next_delay: Option<u64>) {
        self.end = end;
        self.next_slot = self.gap.map(|g| (start + g).max(end));
        self.due = self.next_slot.or(Some(end + next_delay.unwrap_or(0)));
    }

    /// A turn was not sent: sending stopped at `now` while it waited.
    pub(super) fn unsent(&mut self, now: u64) {
        self.end = now;
    }

    /// When the place the session held is free for the next session: the user's next slot
    /// (the next user takes this one's place at its time), or the session's end when that is
    /// later.
    pub(super) fn release_at(&self) -> u64 {
        self.next_slot.unwrap_or(self.end).max(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// 4 users sending 2 requests a second between them: each user's turns are 2 s apart.
    fn users() -> Option<UserCentric> {
        Some(UserCentric {
            rate: 2.0,
            users: 4,
        })
    }

    #[test]
    fn turns_wait_their_delay_after_each_answer_and_free_the_place_at_the_end() {
        let mut t = Turns::new(None, Some(5 * S), 5 * S);
        assert_eq!(
            t.start_at(),
            None,
            "a closed loop's first turn goes at once"
        );
        assert_eq!(t.due(), Some(5 * S), "and was due when the dispatcher said");
        t.on_turn(5 * S, 7 * S, Some(S / 2));
        assert_eq!(t.next_at(S / 2), 7 * S + S / 2);
        assert_eq!(
            t.due(),
            Some(7 * S + S / 2),
            "the next turn is due after its delay"
        );
        t.on_turn(8 * S, 9 * S, None);
        assert_eq!(t.due(), Some(9 * S), "no turn follows: due at the answer");
        assert_eq!(t.release_at(), 9 * S);
    }

    #[test]
    fn a_user_sends_a_gap_apart_or_at_its_answer_when_that_came_later() {
        let mut t = Turns::new(users(), Some(10 * S), 3 * S);
        assert_eq!(
            t.start_at(),
            Some(10 * S),
            "a user's first turn waits for its time"
        );
        t.on_turn(10 * S, 11 * S, Some(S / 2));
        assert_eq!(t.next_at(S / 2), 12 * S, "the gap, not the turn delay");
        assert_eq!(t.due(), Some(12 * S));
        assert_eq!(
            t.release_at(),
            12 * S,
            "the next user takes the place at the slot"
        );
        t.on_turn(12 * S, 15 * S, None);
        assert_eq!(
            t.next_at(0),
            15 * S,
            "an answer later than the gap sets the slot"
        );
        assert_eq!(t.release_at(), 15 * S);
    }

    #[test]
    fn a_turn_left_unsent_frees_the_place_when_sending_stopped() {
        let mut t = Turns::new(users(), Some(10 * S), 3 * S);
        t.unsent(4 * S);
        assert_eq!(t.release_at(), 4 * S);
        // Sending stopped after the user's slot: the place is free from then.
        let mut t = Turns::new(users(), Some(10 * S), 3 * S);
        t.on_turn(10 * S, 11 * S, None);
        t.unsent(13 * S);
        assert_eq!(t.release_at(), 13 * S);
        let mut t = Turns::new(None, None, 3 * S);
        t.on_turn(3 * S, 6 * S, Some(S));
        t.unsent(7 * S);
        assert_eq!(t.release_at(), 7 * S);
    }

    #[test]
    fn the_first_users_join_their_sessions_part_way_and_keep_a_turn() {
        // User g of 4 has done about g/4 of 8 turns: 6, 4, 2 and 0 turns left to skip.
        let skips: Vec<usize> = (0..4)
            .map(|g| Turns::first_turn(Some(g), users(), 8))
            .collect();
        assert_eq!(skips, [6, 4, 2, 0]);
        // Fewer turns than users: every one of them still sends the last.
        let many = Some(UserCentric {
            rate: 1.0,
            users: 100,
        });
        assert_eq!(Turns::first_turn(Some(0), many, 3), 2);
        assert_eq!(Turns::first_turn(Some(99), many, 3), 0);
        assert_eq!(Turns::first_turn(Some(0), users(), 1), 0);
        assert_eq!(
            Turns::first_turn(None, users(), 8),
            0,
            "a later user starts"
        );
        assert_eq!(
            Turns::first_turn(Some(0), None, 8),
            0,
            "no user-centric timing"
        );
        assert_eq!(Turns::first_turn(Some(0), users(), 0), 0);
    }
}
