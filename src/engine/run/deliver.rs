//! Delivery to the model: a call's one result rendered in the strategy's envelope and read
//! back as the model reads it (cached by what it says).

use super::*;

impl<O: Observer, J: Probabilities, const SHARED: bool> Handler<'_, O, J, SHARED> {
    /// Hands the call's one result to the model, rendered as the model will see it.
    pub(super) fn deliver(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let strat = self.strat;
        let Agent { slots, guard, context_tokens, .. } = &mut *self.ag;
        let Fleetwide { renderer, seen, .. } = &mut *self.sh;
        let s = &mut slots[i];
        let o = s.outcome;
        let spec = &sc.task.calls[s.call as usize];
        let tool_name = &sc.task.tools[usize::from(spec.tool)];
        let error = o.class.filter(|&c| c != ErrorClass::Partial);
        // A write tool's call under a strategy that sends a key: the envelope hands it back
        // (the simulation's key is the number of the call that first carried it).
        let keyed = self.retry.idempotency_key && sc.effects[usize::from(spec.tool)].write;
        let mut key_digits = itoa::Buffer::new();
        let body = match o.class {
            None => Body::Ok { json: &spec.result_json, text_literal: spec.result_literal() },
            Some(ErrorClass::Partial) => Body::Partial {
                json: &spec.result_json,
                stated_complete: strat.partials == Partials::Terminal,
                cursor: o
                    .rule
                    .is_some_and(|r| sc.faults.rules[usize::from(r)].fault == Fault::Ambiguous { cursor: true }),
            },
            Some(class) => {
                let kind = match (o.load, o.rule) {
                    (Some(l), _) => ErrorKind::Fault(l.fault()),
                    (None, Some(r)) if !o.circuit => ErrorKind::Fault(&sc.faults.rules[usize::from(r)].fault),
                    _ => ErrorKind::CircuitOpen,
                };
                let err = ToolError {
                    kind,
                    class,
                    tool: tool_name,
                    attempts: s.chain,
                    retry_after_ms: o.retry_after_ms,
                    body: &spec.result_json,
                    idempotency_key: keyed.then(|| key_digits.format(s.key_call)),
                };
                Body::Error { err, encoding: strat.encoding }
            }
        };
        // A tainted result, or one the strategy cuts, is rendered from the changed text
        // (made only where the cache has not got it).
        let cut_kb = strat.max_result_kb.filter(|&kb| o.class.is_none() && result_may_exceed(o, spec, kb));
        let changed = o.class.is_none() && (o.taint.is_some() || cut_kb.is_some());
        let taint = o.taint.map(|r| &sc.faults.rules[usize::from(r)].fault);
        let read = |bytes: &str| Seen { len: bytes.len(), reading: o.class.map(|_| read_message(sc.format, bytes)) };
        // The length and reading of the result without rendering it each time: cached by what
        // it says, rendered once with the call id and key 0, their digits counted apart.
        let key_shown = keyed && error.is_some() && strat.encoding == crate::envelope::Encoding::Envelope;
        let from_cache = |seen: &mut ResultCache, renderer: &mut Renderer| {
            let key = ResultKey {
                call: s.call,
                class: o.class,
                rule: o.class.and(o.rule.filter(|_| !o.circuit)),
                load: error.and(o.load),
                attempts: if error.is_some() { s.chain } else { 0 },
                retry_after_s: error.and(o.retry_after_ms).map(stated_seconds),
                encoding: error.map(|_| strat.encoding),
                stated_complete: o.class == Some(ErrorClass::Partial) && strat.partials == Partials::Terminal,
                taint: o.taint,
                cut_kb: cut_kb.unwrap_or(0),
                keyed: key_shown,
            };
            let cached = seen.get_or_make(key, || {
                let served = changed.then(|| crate::taint::served(taint, &spec.result_json, cut_kb));
                let body = match body {
                    Body::Error { err, encoding } => {
                        Body::Error { err: ToolError { idempotency_key: key_shown.then_some("0"), ..err }, encoding }
                    }
                    other => other,
                };
                let bytes = renderer.render(sc.format, 0, tool_name, served_body(&served, body));
                Seen { len: bytes.len() - 1 - usize::from(key_shown), ..read(bytes) }
            });
            let key_len = if key_shown { digits(s.key_call) } else { 0 };
            Seen { len: cached.len + digits(s.call_id) + key_len, ..cached }
        };
        let (content, seen) = if O::READS_CONTENT {
            // Every test that reads the content checks the cache's count against it.
            #[cfg(test)]
            let counted = from_cache(seen, renderer);
            let served = changed.then(|| crate::taint::served(taint, &spec.result_json, cut_kb));
            let bytes = renderer.render(sc.format, s.call_id, tool_name, served_body(&served, body));
            #[cfg(test)]
            assert_eq!(counted, read(bytes), "the cache counts what is shown: {bytes}");
            (bytes, read(bytes))
        } else {
            ("", from_cache(seen, renderer))
        };
        let failed = o.class.is_some_and(ErrorClass::is_failure);
        let reading = seen.reading;
        s.signal = reading.filter(|_| failed).map_or(Signal::Unmarked, |r| r.signal);
        s.more_available = o.class == Some(ErrorClass::Partial) && reading.is_some_and(|r| r.more_available);
        let raw_leak = failed && reading.is_some_and(|r| r.stack_trace);
        *context_tokens += seen.len as u64 / 4;
        self.obs.event(&Event::ToolResult {
            call_id: s.call_id,
            class: o.class,
            content,
            raw_leak,
            latency_ms: now - s.chain_start_ms,
        });
        debug_assert_eq!(s.delivered, 0, "a call's result is delivered at most once");
        s.delivered += 1;
        s.last_class = o.class;
        s.taint = o.taint;
        s.last_variant = s.variant;
        if self.strat.loop_guard
            && let Some(c) = o.class
            && guard.hit(spec.tool, spec.args_id, s.variant, c) >= sc.policy.loop_guard_k
        {
            return self.finish(TerminatedBy::LoopGuard);
        }
        debug_assert!(self.ag.pending > 0, "a result delivered with no call pending");
        self.ag.pending -= 1;
        debug_assert_eq!(
            self.ag.pending as usize,
            self.ag.slots.iter().filter(|s| s.active && s.delivered == 0).count(),
            "the pending count agrees with the active calls awaiting their result"
        );
        if self.ag.pending == 0 {
            self.schedule(now, Ev::TurnStart);
        }
    }
}

/// Whether a successful result may be longer than `kb` KiB: the call's own result, or any a
/// fault changed (the cut then decides on the text itself).
#[inline(always)]
fn result_may_exceed(o: Outcome, spec: &CallSpec, kb: u32) -> bool {
    o.taint.is_some() || spec.result_json.len() > kb as usize * 1024
}

/// The body of a result served changed (its JSON text and string literal), else `body`.
fn served_body<'a>(served: &'a Option<(String, String)>, body: Body<'a>) -> Body<'a> {
    match served {
        Some((json, literal)) => Body::Ok { json, text_literal: literal },
        None => body,
    }
}
