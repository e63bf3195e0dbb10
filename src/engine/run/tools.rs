//! A tool call's attempts: admission (breakers, the tool's limits and queue, the retry
//! budget), the fault the attempt meets, and its completion with the orchestrator's retries.

use super::*;

impl<O: Observer, J: Probabilities, const SHARED: bool> Handler<'_, O, J, SHARED> {
    /// A re-issue that cannot help: identical to a call whose failure repeating does not fix.
    #[inline(always)]
    pub(super) fn hopeless(&self, i: usize) -> bool {
        let s = &self.ag.slots[i];
        match s.by {
            By::Model => false,
            By::Orchestrator => s.outcome.class.is_some_and(|c| !c.retryable()),
            By::ModelReissue => {
                s.variant == s.last_variant
                    && matches!(s.last_class, Some(ErrorClass::BadArgs | ErrorClass::Terminal | ErrorClass::Partial))
            }
        }
    }

    /// An attempt leaves for the tool: the breaker may answer instead; a tool under load may
    /// refuse it or keep it waiting; else it is served.
    pub(super) fn tool_attempt(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let spec = &sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        if self.retry.idempotency_key && sc.effects[tool].write {
            self.carry_key(i);
        }
        let mut probe = false;
        if self.strat.breaker {
            let shared = SHARED && self.shared_breaker;
            let cfg = &sc.policy.breaker;
            let admit = if shared {
                self.sh.fleet_breakers[tool].admit(cfg, now, self.a)
            } else {
                self.ag.breakers[tool].admit(cfg, now)
            };
            match admit {
                Admit::Yes => {}
                Admit::Probe => probe = true,
                Admit::Reject { remaining_ms } => {
                    let s = &mut self.ag.slots[i];
                    s.outcome = Outcome {
                        class: Some(ErrorClass::Transient),
                        retry_after_ms: Some(remaining_ms),
                        circuit: true,
                        ..Outcome::default()
                    };
                    let call_id = s.call_id;
                    self.obs.event(&Event::Rejected { call_id, tool: spec.tool });
                    let told = self.ag.told_open[tool];
                    // A fleet breaker that opened again since this agent was told is news.
                    let same_opening =
                        !shared || self.ag.told_opened_at[tool] == self.sh.fleet_breakers[tool].opened_at;
                    if told != NEVER && told < self.ag.turn && same_opening {
                        return self.finish(TerminatedBy::BreakerAbort);
                    }
                    self.ag.told_open[tool] = self.ag.turn;
                    if shared {
                        self.ag.told_opened_at[tool] = self.sh.fleet_breakers[tool].opened_at;
                    }
                    return self.schedule(now, Ev::ToolReply(i as u32));
                }
            }
        }
        if self.ag.slots[i].by == By::Model {
            self.ag.first_attempts += 1;
            if let (true, Some(b)) = (SHARED, self.sh.budget.as_mut()) {
                b.first(now);
            }
        }
        self.ag.attempts[tool] += 1;
        let attempt = self.ag.attempts[tool];
        let fleet_attempt = self.count_fleet_attempt(tool);
        // The request reaches the tool after its network delay, when the tool has one.
        let travels = SHARED && sc.loads[tool].network.is_some();
        let arrives = if travels { now.saturating_add(self.network_ms(tool, attempt, Leg::Request)) } else { now };
        // A retry that reaches the tool before the wait its shared rate limit announced is
        // refused again.
        let early = SHARED && sc.loaded && self.ag.slots[i].by != By::Model && arrives < self.ag.load_until[tool];
        let wasted = self.hopeless(i) || early;
        let s = &mut self.ag.slots[i];
        s.attempt = attempt;
        if SHARED {
            s.fleet_attempt = fleet_attempt;
        }
        s.probe = probe;
        s.wasted = wasted;
        if travels {
            return self.schedule(arrives, Ev::ToolArrive(i as u32));
        }
        self.tool_arrive(i);
    }

    /// The delay of leg `leg` of `tool`'s attempt `attempt` (this agent's) over the tool's
    /// network.
    #[cold]
    pub(super) fn network_ms(&mut self, tool: usize, attempt: u32, leg: Leg) -> u64 {
        let service = &mut self.ag.service;
        self.sc.loads[tool].network_ms(tool, attempt.into(), leg, |k| service.unit(k))
    }

    /// An attempt reaches its tool: a tool under load may refuse it or keep it waiting; else
    /// it is served.
    #[inline(always)]
    pub(super) fn tool_arrive(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let tool = usize::from(sc.task.calls[self.ag.slots[i].call as usize].tool);
        let probe = self.ag.slots[i].probe;
        let s = &mut self.ag.slots[i];
        if SHARED && sc.loaded {
            match self.sh.tools[tool].admit(now, (self.a, i as u32)) {
                Admission::Served { place } => s.place = place,
                Admission::Queued => return,
                Admission::Refused(load, wait) => {
                    if let Some(w) = wait {
                        self.ag.load_until[tool] = now.saturating_add(w);
                    }
                    s.outcome = Outcome {
                        class: Some(load.class()),
                        load: Some(load),
                        retry_after_ms: wait,
                        probe,
                        ..Outcome::default()
                    };
                    s.served_ms = now;
                    self.attempt_event(i);
                    return self.schedule(now, Ev::ToolDone(i as u32));
                }
            }
        }
        self.serve(i);
    }

    /// A call that waited for a place at its tool has one now.
    #[inline(always)]
    pub(super) fn tool_serve(&mut self, i: usize) {
        self.ag.slots[i].place = true;
        self.serve(i);
    }

    /// The tool serves the attempt: a scheduled fault, or the tool's answer after its latency.
    #[inline(always)]
    pub(super) fn serve(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let plan = &sc.faults;
        let spec = &sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let Agent { slots, successes, terminal, refusals, injector, service, service_times, .. } = &mut *self.ag;
        let s = &mut slots[i];
        let attempt = s.attempt;
        let memory = sc.task.script.is_none();
        let refused = memory && now < refusals[tool].until_ms;
        // (rule, whether its trigger fired now, the wait it announces, whether the server sent it now)
        let (rule, fired, retry_after_ms, announced) = if refused {
            (Some(refusals[tool].rule), false, Some(refusals[tool].until_ms - now), false)
        } else if let (true, Some(r)) = (memory, terminal[tool]) {
            let ra = plan.rules[usize::from(r)].fault.retry_after_ms();
            (Some(r), false, ra, ra.is_some())
        } else if memory && s.bad_variant == Some(s.variant) {
            (Some(s.bad_rule), false, None, false)
        } else if let (true, Some(r)) = (memory, s.partial_rule) {
            (Some(r), false, None, false)
        } else {
            let at = Attempt { target: tool, attempt, fleet_attempt: s.fleet_attempt, successes: successes[tool] };
            match decide_fault::<SHARED>(plan, self.sh, injector, at, now) {
                Some(f) => (Some(f.rule), true, f.retry_after_ms, f.retry_after_ms.is_some()),
                None => (None, false, None, false),
            }
        };
        let fault = rule.map(|r| &plan.rules[usize::from(r)].fault);
        // A tainted result is a success whose content the fault changed: it has no class.
        let taint = rule.filter(|_| fault.is_some_and(Fault::taints));
        let class = if taint.is_some() { None } else { fault.map(Fault::class) };
        if let (true, Some(r), Some(c)) = (fired, rule, class) {
            match c {
                ErrorClass::Terminal => terminal[tool] = Some(r),
                ErrorClass::BadArgs => {
                    s.bad_variant = Some(s.variant);
                    s.bad_rule = r;
                }
                ErrorClass::Partial => s.partial_rule = Some(r),
                ErrorClass::Transient | ErrorClass::RateLimited => {}
            }
        }
        // A retry refused because it came back before the server's announced wait is wasted
        // on either path, like a re-issue that repeating cannot fix.
        s.wasted |= refused && s.by != By::Model;
        s.outcome =
            Outcome { class, rule, fired, retry_after_ms, announced, probe: s.probe, taint, ..Outcome::default() };
        let load = &sc.loads[tool];
        let timeout = !refused && matches!(fault, Some(Fault::Timeout { .. }));
        let latency = match (fault, if SHARED { load.service } else { None }) {
            // The caller stops waiting `after_ms` after it sent the request (0 ms of travel
            // without `network_ms`).
            (Some(Fault::Timeout { after_ms }), _) if timeout => match SHARED {
                true => {
                    after_ms.saturating_sub(load.network_ms(tool, attempt.into(), Leg::Request, |k| service.unit(k)))
                }
                false => *after_ms,
            },
            (_, Some(dist)) => {
                service_times.get(tool, attempt, dist, || dist.sample_at(tool, attempt.into(), |k| service.unit(k)))
            }
            _ => spec.latency_ms.unwrap_or(sc.profile.tool_latency_ms),
        };
        // A write that reads first: its read answer and its write travel between the two.
        let latency = match SHARED && load.reads_first && !timeout {
            true => latency.saturating_add(load.read_to_write_ms(tool, attempt.into(), |k| service.unit(k))),
            false => latency,
        };
        s.served_ms = now;
        if SHARED {
            s.serving = true;
            s.read = self.sh.tools[tool].start();
        }
        if !(SHARED && sc.loads[tool].occ) {
            self.attempt_event(i);
        }
        self.schedule(now.saturating_add(latency), Ev::ToolDone(i as u32));
    }

    /// Reports the latest attempt of slot `i` (a write under optimistic concurrency once it
    /// ends, when its outcome is known), and whether it wrote a second time.
    #[inline(always)]
    pub(super) fn attempt_event(&mut self, i: usize) {
        let tool = usize::from(self.sc.task.calls[self.ag.slots[i].call as usize].tool);
        let effect = self.sc.effects[tool];
        let duplicate = effect.write && self.committed_again(i, effect.honours_key);
        let s = &self.ag.slots[i];
        let o = s.outcome;
        let fault = match (o.load, o.rule) {
            (Some(l), _) => Some(l.fault()),
            (None, r) => r.map(|r| &self.sc.faults.rules[usize::from(r)].fault),
        };
        self.obs.event(&Event::Attempt {
            call_id: s.call_id,
            tool: self.sc.task.calls[s.call as usize].tool,
            attempt: s.attempt,
            by: s.by,
            t_ms: s.served_ms,
            class: o.class,
            status: fault.and_then(Fault::status),
            rule: o.rule,
            fired: o.fired,
            wasted: s.wasted,
            load: o.load.is_some(),
            duplicate,
        });
    }

    /// The idempotency key an attempt of slot `i` (a write tool's, under a retry policy that
    /// sends keys) carries, decided as it leaves, before the breaker may answer: the model's
    /// first issue a new one, the orchestrator's retries the key of the attempt they repeat, the
    /// model's re-issues the same one when the envelope (whose `details` name it) handed it back
    /// and the arguments are unchanged, else a new one. A new key has written nothing.
    #[cold]
    fn carry_key(&mut self, i: usize) {
        let envelope = self.strat.encoding == crate::envelope::Encoding::Envelope;
        let s = &mut self.ag.slots[i];
        let same_key = match s.by {
            By::Model => false,
            By::Orchestrator => true,
            By::ModelReissue => envelope && s.variant == s.last_variant,
        };
        if !same_key {
            s.key_written = false;
            s.key_call = s.call_id;
        }
    }

    /// Whether the latest attempt of slot `i`, a write tool's, committed though an earlier one
    /// had: it succeeded, or a fault that fired now failed it after committing (`commit =
    /// "before_failure"`; a refusal repeating an announced wait wrote nothing), under no key
    /// the tool (`honours_key`) had written ([`Self::carry_key`]).
    #[cold]
    fn committed_again(&mut self, i: usize, honours_key: bool) -> bool {
        let keyed = self.retry.idempotency_key;
        let s = &mut self.ag.slots[i];
        let o = s.outcome;
        let committed = o.load.is_none()
            && match o.class {
                None => true,
                Some(c) if !c.is_failure() => true,
                Some(_) => o.fired && o.rule.is_some_and(|r| self.sc.faults.rules[usize::from(r)].commits),
            };
        if !committed || (honours_key && keyed && s.key_written) {
            return false;
        }
        let again = s.written;
        s.written = true;
        s.key_written = keyed;
        again
    }

    pub(super) fn tool_done(&mut self, i: usize) {
        let now = self.now;
        let spec = &self.sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let s = &mut self.ag.slots[i];
        if SHARED && std::mem::take(&mut s.serving) {
            let occ = self.sc.loads[tool].occ;
            // A write committed before its failure is a write all the same.
            let commits =
                s.outcome.fired && s.outcome.rule.is_some_and(|r| self.sc.faults.rules[usize::from(r)].commits);
            let write = (occ && (s.outcome.class.is_none() || commits)).then_some(s.read);
            if !self.sh.tools[tool].end(write) {
                s.outcome =
                    Outcome { class: Some(ErrorClass::Transient), load: Some(LoadFault::Conflict), ..s.outcome };
            }
            if occ {
                self.attempt_event(i);
            }
        }
        if SHARED && std::mem::take(&mut self.ag.slots[i].place) {
            hand_on(&mut self.sh.queue, &mut self.sh.tools[tool], now);
        }
        // The tool keeps the wait it announced, from when it answered.
        let o = self.ag.slots[i].outcome;
        if let (true, Some(ms), Some(rule)) = (o.announced, o.retry_after_ms, o.rule) {
            self.ag.refusals[tool] = Refusal { until_ms: now.saturating_add(ms), rule };
        }
        // The answer travels back over the tool's network (a breaker's refusal is the agent's
        // own; a timeout is the agent giving up, with nothing to travel).
        if SHARED && self.sc.loads[tool].network.is_some() && !o.circuit && !self.timed_out(i) {
            let delay = self.network_ms(tool, self.ag.slots[i].attempt, Leg::Answer);
            return self.schedule(now.saturating_add(delay), Ev::ToolReply(i as u32));
        }
        self.tool_reply(i);
    }

    /// Whether slot `i`'s latest attempt met a timeout fault.
    #[cold]
    fn timed_out(&self, i: usize) -> bool {
        let o = self.ag.slots[i].outcome;
        o.rule.is_some_and(|r| matches!(self.sc.faults.rules[usize::from(r)].fault, Fault::Timeout { .. }))
    }

    /// The attempt's answer reaches the agent: breakers learn of it, and the orchestrator
    /// retries it or hands it on.
    pub(super) fn tool_reply(&mut self, i: usize) {
        let now = self.now;
        let spec = &self.sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let s = self.ag.slots[i];
        let o = s.outcome;
        if self.strat.breaker && !o.circuit {
            let failed =
                matches!(o.class, Some(ErrorClass::Transient | ErrorClass::RateLimited | ErrorClass::Terminal));
            let cfg = &self.sc.policy.breaker;
            let tripped = if SHARED && self.shared_breaker {
                self.sh.fleet_breakers[tool].record(cfg, now, failed, o.probe, self.a)
            } else {
                self.ag.breakers[tool].record(cfg, now, failed, o.probe)
            };
            if tripped {
                self.ag.told_open[tool] = NEVER;
                self.obs.event(&Event::BreakerTrip { tool: tool as u16, t_ms: now });
            }
        }
        let failed = o.class.is_some_and(ErrorClass::is_failure) || o.circuit;
        let wrong = o.taint.is_some_and(|r| self.sc.faults.rules[usize::from(r)].fault == Fault::WrongContent);
        self.ag.last_failed[tool] = failed || wrong;
        if !failed {
            self.ag.successes[tool] += 1;
            self.count_fleet_success(tool);
        }
        if let Some(c) = o.class
            && !o.circuit
            && self.strat.routing == Routing::Orchestrator
            && self.retry.may_retry(c, s.chain, o.retry_after_ms)
            && self.budget_allows(self.ag.first_attempts)
        {
            let u = self.ag.jitter.unit(jitter_slot(0, u64::from(s.call_id), s.chain));
            let delay = self.retry.delay_ms(s.chain - 1, s.prev_delay_ms, u, o.retry_after_ms);
            let next_at = now.saturating_add(delay);
            let nominal = spec.latency_ms.unwrap_or(self.sc.profile.tool_latency_ms);
            if self.past_time_budget(next_at.saturating_add(nominal)) {
                return self.finish(TerminatedBy::TimeBudget);
            }
            let s = &mut self.ag.slots[i];
            s.prev_delay_ms = delay;
            s.chain += 1;
            s.by = By::Orchestrator;
            self.ag.orchestrator_retries += 1;
            return self.schedule(next_at, Ev::ToolAttempt(i as u32));
        }
        self.deliver(i);
    }
}
