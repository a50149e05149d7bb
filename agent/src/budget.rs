//! What one run may give the model in tool results (`[limits]`, `docs/configuration.md`
//! "Budgets"): at most `max_tool_calls_per_turn` calls run per model turn, and the result
//! text of the calls that ran counts toward a per-turn and a per-run byte budget. A result
//! is cut to the per-result cap and to what is left of the budgets, with a marker; once a
//! budget is used up, later calls are refused. The host's own refusal texts do not count.
//! [`RunBudgets`] holds the five `[limits]` a run is bounded by.

/// `[limits]` budgets of one run (one user message and everything it leads to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBudgets {
    /// Tool calls run per model turn; further calls get an error result naming the limit.
    pub max_tool_calls_per_turn: usize,
    /// Tool-result bytes given to the model per model turn.
    pub max_turn_result_bytes: usize,
    /// Tool-result bytes given to the model per run.
    pub max_run_result_bytes: usize,
    /// Bytes of one model turn from the provider (text plus tool-call arguments).
    pub max_model_turn_bytes: usize,
    /// Stored size of a conversation (its messages' JSON); past it a new message is refused.
    pub max_conversation_bytes: usize,
}

impl Default for RunBudgets {
    fn default() -> Self {
        RunBudgets {
            max_tool_calls_per_turn: 32,
            max_turn_result_bytes: 1 << 20,
            max_run_result_bytes: 2 << 20,
            max_model_turn_bytes: 2 << 20,
            max_conversation_bytes: 4 << 20,
        }
    }
}

/// A limit that refused a call or bounded a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// `max_tool_calls_per_turn`.
    CallsPerTurn,
    /// `max_turn_result_bytes`.
    TurnResultBytes,
    /// `max_run_result_bytes`.
    RunResultBytes,
}

impl Limit {
    /// The label of `rojos_tool_calls_refused_total`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Limit::CallsPerTurn => "calls_per_turn",
            Limit::TurnResultBytes => "turn_result_bytes",
            Limit::RunResultBytes => "run_result_bytes",
        }
    }
}

/// One of the two byte budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bytes {
    Turn,
    Run,
}

impl Bytes {
    fn limit(self) -> Limit {
        match self {
            Bytes::Turn => Limit::TurnResultBytes,
            Bytes::Run => Limit::RunResultBytes,
        }
    }
}

/// A call the budgets did not let run, and the text the model is given for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The limit that refused it.
    pub(super) limit: Limit,
    /// Why, and what to do instead.
    pub(super) message: String,
}

/// What is left of one run's budgets.
#[derive(Debug)]
pub(super) struct Budget {
    limits: RunBudgets,
    /// Calls the current model turn has made so far (run or not).
    calls_this_turn: usize,
    turn_bytes_left: usize,
    run_bytes_left: usize,
}

impl Budget {
    /// The budgets of a new run.
    pub(super) fn new(limits: RunBudgets) -> Budget {
        Budget {
            limits,
            calls_this_turn: 0,
            turn_bytes_left: limits.max_turn_result_bytes,
            run_bytes_left: limits.max_run_result_bytes,
        }
    }

    /// A new model turn: its call count and byte budget start again.
    pub(super) fn start_turn(&mut self) {
        self.calls_this_turn = 0;
        self.turn_bytes_left = self.limits.max_turn_result_bytes;
    }

    /// Counts the turn's next call, refused past `max_tool_calls_per_turn`: the first calls
    /// in the model's order run, whatever becomes of each.
    pub(super) fn take_call(&mut self) -> Result<(), Refusal> {
        self.calls_this_turn += 1;
        let max = self.limits.max_tool_calls_per_turn;
        if self.calls_this_turn <= max {
            return Ok(());
        }
        Err(Refusal {
            limit: Limit::CallsPerTurn,
            message: format!(
                "not run: a model turn may make at most {max} tool calls \
                 (limits.max_tool_calls_per_turn); make the remaining calls in your next turn"
            ),
        })
    }

    /// Refuses a call once a byte budget is used up (the run's first: it lasts longer).
    pub(super) fn check_bytes_left(&self) -> Result<(), Refusal> {
        let (bytes, advice) = if self.run_bytes_left == 0 {
            (
                Bytes::Run,
                "answer with what you have; the user can ask for more in a new message",
            )
        } else if self.turn_bytes_left == 0 {
            (Bytes::Turn, "make the remaining calls in your next turn")
        } else {
            return Ok(());
        };
        Err(Refusal {
            limit: bytes.limit(),
            message: format!("not run: {}; {advice}", self.reached(bytes)),
        })
    }

    /// The result text of a call that ran, cut to `max_result_bytes` and to what is left of
    /// the budgets (with a marker saying how much was left out and which limit cut it), and
    /// counted. A result cut by a budget uses that budget up.
    pub(super) fn fit(&mut self, text: String, max_result_bytes: usize) -> String {
        let (room, binding) = if self.run_bytes_left <= self.turn_bytes_left {
            (self.run_bytes_left, Bytes::Run)
        } else {
            (self.turn_bytes_left, Bytes::Turn)
        };
        let (keep, by_budget) = if max_result_bytes <= room {
            (max_result_bytes, None)
        } else {
            (room, Some(binding))
        };
        let note = by_budget.map(|bytes| self.reached(bytes));
        let cut = cut(text, keep, note.as_deref());
        self.turn_bytes_left -= cut.kept;
        self.run_bytes_left -= cut.kept;
        match by_budget {
            Some(Bytes::Turn) if cut.was_cut => self.turn_bytes_left = 0,
            Some(Bytes::Run) if cut.was_cut => self.run_bytes_left = 0,
            _ => {}
        }
        cut.text
    }

    /// `<what> reached their limit of N bytes (limits.key)`.
    fn reached(&self, bytes: Bytes) -> String {
        let (what, max, key) = match bytes {
            Bytes::Turn => (
                "this model turn's tool results",
                self.limits.max_turn_result_bytes,
                "max_turn_result_bytes",
            ),
            Bytes::Run => (
                "the tool results of this run",
                self.limits.max_run_result_bytes,
                "max_run_result_bytes",
            ),
        };
        format!("{what} reached their limit of {max} bytes (limits.{key})")
    }
}

/// A text after [`cut`].
struct Cut {
    text: String,
    /// Bytes of the original text kept (the marker not included).
    kept: usize,
    was_cut: bool,
}

/// Cuts `text` to `max_bytes` at a char boundary and adds a marker naming how much was left
/// out (and `note`, the limit that cut it). The cut text gives back its spare capacity: a
/// 1 MB result cut to 1 kB must not keep its megabyte alive in the history.
fn cut(mut text: String, max_bytes: usize, note: Option<&str>) -> Cut {
    if text.len() <= max_bytes {
        let kept = text.len();
        return Cut {
            text,
            kept,
            was_cut: false,
        };
    }
    let total = text.len();
    let mut kept = max_bytes;
    while !text.is_char_boundary(kept) {
        kept -= 1;
    }
    let note = note.map(|n| format!("; {n}")).unwrap_or_default();
    let marker = format!(
        "\n[result truncated by rojos: {} of {total} bytes left out{note}]",
        total - kept
    );
    text.truncate(kept);
    text.shrink_to(kept + marker.len());
    text.push_str(&marker);
    Cut {
        text,
        kept,
        was_cut: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(calls: usize, turn: usize, run: usize) -> Budget {
        Budget::new(RunBudgets {
            max_tool_calls_per_turn: calls,
            max_turn_result_bytes: turn,
            max_run_result_bytes: run,
            ..RunBudgets::default()
        })
    }

    #[test]
    fn a_long_result_is_cut_at_a_char_boundary_with_a_marker() {
        let text = "é".repeat(10); // 20 bytes
        let capped = cut(text, 5, None);
        assert_eq!(
            capped.text,
            "éé\n[result truncated by rojos: 16 of 20 bytes left out]"
        );
        assert_eq!(capped.kept, 4);
        assert_eq!(cut("short".into(), 5, None).text, "short");
    }

    #[test]
    fn a_cut_result_gives_back_its_capacity() {
        let big = "x".repeat(1 << 20);
        let capped = cut(big, 1000, None);
        assert!(capped.text.capacity() < 2000, "{}", capped.text.capacity());
    }

    #[test]
    fn calls_past_the_per_turn_limit_are_refused_until_the_next_turn() {
        let mut budget = budgets(2, 1000, 1000);
        assert!(budget.take_call().is_ok());
        assert!(budget.take_call().is_ok());
        let refusal = budget.take_call().unwrap_err();
        assert_eq!(refusal.limit, Limit::CallsPerTurn);
        assert_eq!(
            refusal.message,
            "not run: a model turn may make at most 2 tool calls \
             (limits.max_tool_calls_per_turn); make the remaining calls in your next turn"
        );
        assert!(budget.take_call().is_err());
        budget.start_turn();
        assert!(budget.take_call().is_ok());
    }

    #[test]
    fn results_count_toward_the_turn_and_the_run_and_the_last_one_is_cut_to_fit() {
        let mut budget = budgets(10, 100, 250);
        assert_eq!(budget.fit("a".repeat(60), 1000), "a".repeat(60));
        assert!(budget.check_bytes_left().is_ok());
        let cut = budget.fit("b".repeat(60), 1000);
        assert_eq!(
            cut,
            format!(
                "{}\n[result truncated by rojos: 20 of 60 bytes left out; this model turn's \
                 tool results reached their limit of 100 bytes (limits.max_turn_result_bytes)]",
                "b".repeat(40)
            )
        );
        let refusal = budget.check_bytes_left().unwrap_err();
        assert_eq!(refusal.limit, Limit::TurnResultBytes);
        assert_eq!(
            refusal.message,
            "not run: this model turn's tool results reached their limit of 100 bytes \
             (limits.max_turn_result_bytes); make the remaining calls in your next turn"
        );

        // 100 of the run's 250 bytes are spent; the next turn has 100 again.
        budget.start_turn();
        assert_eq!(budget.fit("c".repeat(100), 1000).len(), 100);
        budget.start_turn();
        let cut = budget.fit("d".repeat(100), 1000);
        assert!(
            cut.starts_with(&format!(
                "{}\n[result truncated by rojos: 50 of 100",
                "d".repeat(50)
            )),
            "{cut}"
        );
        assert!(
            cut.ends_with("the tool results of this run reached their limit of 250 bytes (limits.max_run_result_bytes)]"),
            "{cut}"
        );
        budget.start_turn();
        let refusal = budget.check_bytes_left().unwrap_err();
        assert_eq!(refusal.limit, Limit::RunResultBytes);
        assert_eq!(
            refusal.message,
            "not run: the tool results of this run reached their limit of 250 bytes \
             (limits.max_run_result_bytes); answer with what you have; the user can ask for \
             more in a new message"
        );
    }

    #[test]
    fn the_per_result_cap_applies_first_and_leaves_the_budgets_open() {
        let mut budget = budgets(10, 100, 1000);
        let capped = budget.fit("x".repeat(50), 30);
        assert_eq!(
            capped,
            format!(
                "{}\n[result truncated by rojos: 20 of 50 bytes left out]",
                "x".repeat(30)
            )
        );
        // 30 bytes counted, not the marker; 70 left this turn.
        assert_eq!(budget.fit("y".repeat(70), 1000), "y".repeat(70));
        assert!(budget.check_bytes_left().is_err());
    }

    #[test]
    fn a_result_that_exactly_fits_is_not_cut_and_uses_the_budget_up() {
        let mut budget = budgets(10, 100, 1000);
        assert_eq!(budget.fit("z".repeat(100), 1000), "z".repeat(100));
        assert_eq!(
            budget.check_bytes_left().unwrap_err().limit,
            Limit::TurnResultBytes
        );
    }

    #[test]
    fn a_result_cut_by_a_budget_inside_a_character_still_uses_that_budget_up() {
        // 5 bytes of room, "é" is 2 bytes: the cut keeps 4, and the 1 byte left over must
        // not let another call run.
        for (turn, run, limit) in [
            (5, 1000, Limit::TurnResultBytes),
            (1000, 5, Limit::RunResultBytes),
        ] {
            let mut budget = budgets(10, turn, run);
            let cut = budget.fit("é".repeat(10), 1000);
            assert!(
                cut.starts_with("éé\n[result truncated by rojos: 16 of 20"),
                "{cut}"
            );
            assert_eq!(budget.check_bytes_left().unwrap_err().limit, limit);
        }
    }
}
