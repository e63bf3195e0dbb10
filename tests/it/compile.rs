//! Compiling recorded traces into tasks keeps the recording's turns: every step is the new
//! work of one recorded turn (parallel calls stay parallel, in their order), and every other
//! recorded call is sent in place of a failed (or partial) call of the same tool from an
//! earlier turn, never fixed by a sibling. Checked on every bundled trace and every
//! conversation of the tau-bench file.

use std::path::Path;

use tracefault::engine::task::canonical_json;
use tracefault::provider::Format;
use tracefault::trace::compile::{Issue, compile};
use tracefault::trace::import::{ImportOptions, SourceFormat, import_path};
use tracefault::trace::{Trace, TraceEvent};

use crate::{corpus, root};

fn traces(path: &Path, format: SourceFormat) -> Vec<Trace> {
    import_path(path, &ImportOptions { format, ..ImportOptions::default() }).unwrap().traces
}

/// One recorded turn: its number and its calls (tool, canonical arguments, failed).
type Turn = (u32, Vec<(String, String, bool)>);

/// The tool calls of a trace, per recorded turn.
fn recorded_turns(t: &Trace) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::new();
    let mut ids: Vec<(String, usize, usize)> = Vec::new();
    for ev in &t.events {
        match ev {
            TraceEvent::ToolCall { turn, call_id, name, args } => {
                if out.last().is_none_or(|l| l.0 != *turn) {
                    out.push((*turn, Vec::new()));
                }
                let t = out.len() - 1;
                ids.push((call_id.clone(), t, out[t].1.len()));
                out[t].1.push((name.clone(), canonical_json(&args.value()), false));
            }
            TraceEvent::ToolResult { call_id, ok, error_class, .. } => {
                if let Some(&(_, t, i)) = ids.iter().rev().find(|x| &x.0 == call_id) {
                    out[t].1[i].2 = !ok || error_class.is_some();
                }
            }
            _ => {}
        }
    }
    out
}

/// The properties the issue names, checked on one trace.
fn check_turns(t: &Trace) {
    let c = compile(t);
    let turns = recorded_turns(t);
    let steps: Vec<Vec<(String, String)>> = c
        .task
        .steps
        .iter()
        .map(|s| {
            s.iter()
                .map(|&i| {
                    let call = &c.task.calls[i as usize];
                    (c.task.tools[usize::from(call.tool)].clone(), call.args.clone())
                })
                .collect()
        })
        .collect();
    // The new work of each recorded turn, in recorded order: the calls the compiler did not
    // link to an earlier call.
    let mut new_work: Vec<Vec<(String, String)>> = Vec::new();
    let mut k = 0;
    for (turn, calls) in &turns {
        let mut work = Vec::new();
        for (tool, args, _) in calls {
            // Calls without a result are not compiled; skip them as the compiler does.
            let Some(rc) = c.calls.get(k).filter(|rc| rc.turn == *turn && &rc.tool == tool && &rc.canon == args) else {
                continue;
            };
            k += 1;
            match rc.issue {
                Issue::First => work.push((tool.clone(), args.clone())),
                Issue::Identical | Issue::Changed => {
                    // Sent in place of an earlier call of the same tool that had failed or
                    // said more may be available, in an earlier turn, and not its sibling.
                    let before: Vec<_> = c.calls[..k - 1].iter().filter(|p| p.chain == rc.chain).collect();
                    let prev = before.last().expect("a re-issue continues a chain");
                    assert!(prev.turn < *turn, "{}: a re-issue in its chain's own turn", t.header.id);
                    assert!(prev.class.is_some(), "{}: a re-issue of a call that succeeded", t.header.id);
                    assert_eq!(prev.tool, *tool);
                    assert_eq!(rc.issue == Issue::Identical, prev.canon == *args);
                }
            }
        }
        if !work.is_empty() {
            new_work.push(work);
        }
    }
    assert_eq!(k, c.calls.len(), "{}: every answered call is accounted for", t.header.id);
    assert_eq!(steps, new_work, "{}: the compiled steps are the recorded turns' new work", t.header.id);
}

#[test]
fn bundled_traces_keep_their_turns() {
    for (file, format) in [
        ("search-503-503-400.jsonl", SourceFormat::Auto),
        ("ambiguous-search.jsonl", SourceFormat::Auto),
        ("parallel-weather.jsonl", SourceFormat::Auto),
        ("openai-chat_model-retry.cassette.yaml", SourceFormat::Auto),
        ("openai-responses_model-retry.cassette.yaml", SourceFormat::Auto),
        ("anthropic_tool-search.cassette.yaml", SourceFormat::Auto),
        ("gemini_model-retry.cassette.yaml", SourceFormat::Auto),
        ("otel_model-retry.otlp.json", SourceFormat::Auto),
        ("openai-chat_tau-bench-airline-13.json", SourceFormat::Provider(Format::OpenAiChat)),
    ] {
        for t in traces(&root().join("traces").join(file), format) {
            check_turns(&t);
        }
    }
}

#[test]
fn every_tau_bench_conversation_keeps_its_turns() {
    let all = traces(&corpus().join("tau-bench_gpt-4o-airline.json"), SourceFormat::Auto);
    assert_eq!(all.len(), 200);
    for t in &all {
        check_turns(t);
    }
}

#[test]
fn parallel_turns_stay_parallel() {
    // Weather, time and news in one turn, news failing once: one step of three calls.
    let t = &traces(&root().join("traces/parallel-weather.jsonl"), SourceFormat::Auto)[0];
    let c = compile(t);
    assert_eq!(c.task.steps, vec![vec![0, 1, 2]]);
    // get_location("Londos") failing beside get_location("London"): two calls, never merged.
    let t = &traces(&root().join("traces/openai-responses_model-retry.cassette.yaml"), SourceFormat::Auto)[0];
    let c = compile(t);
    assert_eq!(c.task.steps, vec![vec![0, 1]]);
    assert_ne!(c.task.calls[0].args, c.task.calls[1].args);
    // tau-bench 13: the seven update attempts are one call sent again and corrected.
    let t = &traces(
        &root().join("traces/openai-chat_tau-bench-airline-13.json"),
        SourceFormat::Provider(Format::OpenAiChat),
    )[0];
    let c = compile(t);
    let updates = c.task.calls.iter().filter(|x| c.task.tools[usize::from(x.tool)] == "update_reservation_flights");
    assert_eq!(updates.count(), 1);
    assert_eq!(c.calls.iter().filter(|x| x.issue != Issue::First).count(), 6);
}
