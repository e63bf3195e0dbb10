//! One visible line in `cargo test`'s output saying whether the wire-mode tests against the
//! official SDKs run or are skipped (a plain `cargo test` without `.venv` skips them; the
//! README's test command, `scripts/test.sh`, installs the SDKs and makes them mandatory).
//! It runs without the test harness, so its output is never captured.

fn main() {
    // Test runners that list tests first (`cargo nextest`) get an empty list: there is no test
    // here, only the notice.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        println!("SDK tests: running with {} (openai, anthropic, google-genai)", venv.display());
    } else {
        println!(
            "SDK tests: SKIPPED — no .venv with the official SDKs; `bash scripts/test.sh` installs them and runs every test"
        );
    }
}
