//! A run's (or a sweep point's) one verdict: a short label that the console, the JSON, the
//! HTML pages, the sweep table and `compare` all show the same, built from the client's
//! verdict (`health`) and the server's account (`server`). The evidence stays with each.

use serde::{Deserialize, Serialize};

use super::server::{ServerHealth, State};
use super::Health;

/// The label, most serious first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// The client provably moved some figures.
    Distorted,
    /// ringperf's simulator served later than it was told: a slower server was measured.
    SimulatorStalled,
    /// Most requests failed, or the server stopped answering: the figures describe the few
    /// that survived.
    ServerFailing,
    /// The client may have limited the load.
    Limited,
    /// The client kept up, with a caveat that moves no reported figure.
    Caveat,
    /// The client kept up and had room to spare.
    Headroom,
}

impl Label {
    /// The label of a run whose client was judged `client` and whose server `server`. A
    /// client that moved figures is said first; then a failing server, before whatever the
    /// client's own limits were (a failure is never the client's).
    pub fn of(client: &Health, server: &ServerHealth) -> Label {
        if client.distorted.is_some() {
            Label::Distorted
        } else if client.simulator_stalled.is_some() {
            Label::SimulatorStalled
        } else if server.failing() {
            Label::ServerFailing
        } else if client.limited {
            Label::Limited
        } else if client.caveat {
            Label::Caveat
        } else {
            Label::Headroom
        }
    }

    /// As people read it (and the sweep table shows it).
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Distorted => "distorted",
            Label::SimulatorStalled => "simulator stalled",
            Label::ServerFailing => "server failing",
            Label::Limited => "limited",
            Label::Caveat => "caveat",
            Label::Headroom => "headroom",
        }
    }

    /// Every label, most serious first.
    pub const ALL: [Label; 6] = [
        Label::Distorted,
        Label::SimulatorStalled,
        Label::ServerFailing,
        Label::Limited,
        Label::Caveat,
        Label::Headroom,
    ];

    /// The label `text` names ([`Label::as_str`], or the JSON's snake case).
    pub fn parse(text: &str) -> Option<Label> {
        Label::ALL
            .into_iter()
            .find(|l| l.as_str() == text || l.as_str().replace(' ', "_") == text)
    }

    /// True when the figures can be taken as the server's at the load asked: a knee, a
    /// search, a Pareto front or a significant change may rest on them.
    pub fn trusted(self) -> bool {
        matches!(self, Label::Headroom | Label::Caveat)
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The console's last line: the label, and, where requests failed, how many and of what
/// kind (so that the last thing a user reads before the artifacts says it).
pub fn line(label: Label, server: &ServerHealth) -> String {
    let failed = format!(
        "{} of {} measured requests failed ({:.1}%)",
        server.failed,
        server.judged,
        server.share * 100.0
    );
    let when = match (server.state, server.all_failed_from_s) {
        _ if server.failed == server.judged => String::new(),
        (State::Stopped, Some(t)) => format!(": the server stopped answering {t:.2} s in"),
        (_, Some(t)) if t > 0.0 => format!(", every one from {t:.2} s on"),
        _ => String::new(),
    };
    match label {
        Label::ServerFailing => format!("Verdict: {label}: {failed}{when}"),
        _ if server.failed > 0 => format!("Verdict: {label} (client); {failed}{when}"),
        _ => format!("Verdict: {label}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(state: State, failed: u64) -> ServerHealth {
        ServerHealth {
            state,
            failed,
            judged: 10,
            share: failed as f64 / 10.0,
            line: format!("{failed} failed"),
            ..ServerHealth::unknown()
        }
    }

    #[test]
    fn the_label_puts_a_distorting_client_first_then_a_failing_server() {
        let mut h = Health::merged("kept up".into(), None, false);
        let ok = server(State::Answered, 0);
        assert_eq!(Label::of(&h, &ok), Label::Headroom);
        h.caveat = true;
        assert_eq!(Label::of(&h, &ok), Label::Caveat);
        h.limited = true;
        assert_eq!(Label::of(&h, &ok), Label::Limited);
        // A failing server out-ranks the client's own limits: they are not what failed.
        assert_eq!(
            Label::of(&h, &server(State::Failing, 6)),
            Label::ServerFailing
        );
        assert_eq!(
            Label::of(&h, &server(State::Stopped, 6)),
            Label::ServerFailing
        );
        assert_eq!(Label::of(&h, &server(State::Erroring, 2)), Label::Limited);
        h.simulator_stalled = Some("stalled".into());
        assert_eq!(
            Label::of(&h, &server(State::Failing, 6)),
            Label::SimulatorStalled
        );
        h.distorted = Some(crate::report::Distortion {
            reasons: Vec::new(),
        });
        assert_eq!(Label::of(&h, &server(State::Failing, 6)), Label::Distorted);
    }

    #[test]
    fn labels_read_back_and_only_a_kept_up_client_and_server_are_trusted() {
        for l in Label::ALL {
            assert_eq!(Label::parse(l.as_str()), Some(l));
            let json = serde_json::to_value(l).unwrap();
            assert_eq!(Label::parse(json.as_str().unwrap()), Some(l));
            assert_eq!(l.trusted(), matches!(l, Label::Headroom | Label::Caveat));
        }
        assert_eq!(Label::parse("fine"), None);
    }

    #[test]
    fn the_last_line_says_what_failed() {
        assert_eq!(
            line(Label::Headroom, &server(State::Answered, 0)),
            "Verdict: headroom"
        );
        assert_eq!(
            line(Label::Headroom, &server(State::Erroring, 2)),
            "Verdict: headroom (client); 2 of 10 measured requests failed (20.0%)"
        );
        assert_eq!(
            line(Label::ServerFailing, &server(State::Failing, 6)),
            "Verdict: server failing: 6 of 10 measured requests failed (60.0%)"
        );
        let stopped = ServerHealth {
            all_failed_from_s: Some(0.16),
            ..server(State::Stopped, 7)
        };
        assert_eq!(
            line(Label::ServerFailing, &stopped),
            "Verdict: server failing: 7 of 10 measured requests failed (70.0%): the server \
             stopped answering 0.16 s in"
        );
    }
}
