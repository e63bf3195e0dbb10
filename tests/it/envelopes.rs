//! `tracefault envelopes`: snapshot of what every strategy renders in every format, and the
//! portability checks.

use crate::tracefault;

fn stdout(args: &[&str]) -> String {
    let out = tracefault().arg("envelopes").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn envelopes_503() {
    insta::assert_snapshot!(stdout(&[]));
}

#[test]
fn envelopes_400_with_param() {
    insta::assert_snapshot!(stdout(&["--fault", "400"]));
}

#[test]
fn envelopes_429_and_ambiguous() {
    insta::assert_snapshot!(stdout(&["--fault", "429"]));
    insta::assert_snapshot!(stdout(&["--fault", "ambiguous"]));
}

#[test]
fn bad_fault_is_a_usage_error() {
    tracefault().args(["envelopes", "--fault", "418"]).assert().code(2);
    tracefault().args(["envelopes", "--fault", "explode"]).assert().code(2);
}
