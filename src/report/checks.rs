//! The checklist of an `exec` run (a user's own agent against the mocks) as the reports show
//! it: each check passed, failed with its findings, or did not apply and why; the runs'
//! outcome line; requests that went elsewhere.

/// How one check came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    Pass,
    Fail(Vec<String>),
    /// The check does not apply to this agent, for the reason given.
    NotApplicable(String),
}

impl CheckStatus {
    pub fn word(&self) -> &'static str {
        match self {
            CheckStatus::Pass => "PASS",
            CheckStatus::Fail(_) => "FAIL",
            CheckStatus::NotApplicable(_) => "N/A",
        }
    }

    /// The findings of a failed check, or the reason a check did not apply.
    pub fn details(&self) -> Vec<&str> {
        match self {
            CheckStatus::Pass => Vec::new(),
            CheckStatus::Fail(d) => d.iter().map(String::as_str).collect(),
            CheckStatus::NotApplicable(why) => vec![why.as_str()],
        }
    }
}

/// One check of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRow {
    pub title: &'static str,
    pub status: CheckStatus,
}

/// What `exec` adds to the report set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checklist {
    /// The agent's command line, credentials redacted.
    pub agent: String,
    /// `answered 4/5 · gave up 1 · …`.
    pub outcome: String,
    pub checks: Vec<CheckRow>,
    pub notes: Vec<String>,
    /// Requests the agent sent to hosts other than the mocks (`host path`).
    pub elsewhere: Vec<String>,
}

impl Checklist {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| !matches!(c.status, CheckStatus::Fail(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::checklist;

    #[test]
    fn each_status_has_its_word_and_details() {
        assert_eq!((CheckStatus::Pass.word(), CheckStatus::Pass.details()), ("PASS", Vec::<&str>::new()));
        let fail = CheckStatus::Fail(vec!["a".into(), "b".into()]);
        assert_eq!((fail.word(), fail.details()), ("FAIL", vec!["a", "b"]));
        let na = CheckStatus::NotApplicable("why".into());
        assert_eq!((na.word(), na.details()), ("N/A", vec!["why"]));
    }

    #[test]
    fn a_list_passes_unless_a_check_failed() {
        let mut c = checklist();
        assert!(!c.passed(), "one check failed");
        c.checks.retain(|r| !matches!(r.status, CheckStatus::Fail(_)));
        assert!(c.passed(), "passed and not applicable");
        assert!(Checklist::default().passed(), "no checks");
    }
}
